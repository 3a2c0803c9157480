/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

/* Adds v to o under key, taking ownership of v in every case. v may be NULL (its allocation
 * failed): then -ENOMEM. Returns 0 or -ENOMEM. */
int bv_json_add(struct json_object *o, const char *key, struct json_object *v);
