/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Memory for secrets: mlock'ed, excluded from core dumps, wiped on free. */

#include <stddef.h>

void *bv_secure_alloc(size_t size);
void bv_secure_free(void *p, size_t size); /* accepts NULL */

/* Wipes memory in a way the compiler cannot elide. */
void bv_wipe(void *p, size_t size);
