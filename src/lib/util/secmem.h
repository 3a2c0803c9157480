/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Memory for secrets: mlock'ed, excluded from core dumps, wiped on free. */

#include <stddef.h>

void *bv_secure_alloc(size_t size);
void bv_secure_free(void *p, size_t size); /* accepts NULL */

/* Wipes memory in a way the compiler cannot elide. */
void bv_wipe(void *p, size_t size);

/* Keeps the whole process out of core dumps: RLIMIT_CORE 0 (inherited by children) and not
 * dumpable (PR_SET_DUMPABLE 0: no core on a fatal signal, /proc/PID/mem and ptrace closed to
 * other unprivileged processes). MADV_DONTDUMP covers only bv_secure_alloc memory, while
 * OpenSSL keeps key schedules and HMAC states on the ordinary heap and the environment may hold
 * a passphrase; every process that holds keys calls this before it reads any. */
int bv_secure_process(void);
