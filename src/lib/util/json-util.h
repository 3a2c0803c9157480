/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

/* Adds v to o under key, taking ownership of v in every case. v may be NULL (its allocation
 * failed): then -ENOMEM. Returns 0 or -ENOMEM. */
int bv_json_add(struct json_object *o, const char *key, struct json_object *v);

/* Parses [json, json+len) as one JSON object nested at most max_depth deep, followed by
 * nothing but whitespace (RFC 8259). -EBADMSG for anything else (NUL bytes included), -ENOMEM. */
int bv_json_parse_object(const char *json, size_t len, int max_depth, struct json_object **ret);

/* o[key] if o has that member and it is of the type; else NULL. */
struct json_object *bv_json_member(struct json_object *o, const char *key, json_type type);
