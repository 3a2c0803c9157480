/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Cryptographically strong random bytes (OpenSSL RAND_bytes); -EIO if unavailable. */
int bv_random_bytes(void *buf, size_t len);

/* A supply of random bytes for one thread's nonces: RAND_bytes fills a page at a time, each
 * byte is handed out once. Each RAND_bytes call costs a getpid(2), a process-wide lock and a
 * DRBG round, which is ~1% of a first backup's CPU when every object takes its 12 bytes by
 * itself. The page is wiped in a forked child (MADV_WIPEONFORK), which then draws afresh: parent
 * and child never hand out the same bytes. Where the kernel cannot do that, every take is a
 * RAND_bytes call of its own. Not for keys: the bytes sit in ordinary memory until taken. */
typedef struct BvRandomPool BvRandomPool;

int bv_random_pool_new(BvRandomPool **ret);
void bv_random_pool_free(BvRandomPool *p);
/* len at most BV_RANDOM_POOL_TAKE_MAX; -EINVAL beyond. */
#define BV_RANDOM_POOL_TAKE_MAX 64u
int bv_random_pool_take(BvRandomPool *p, void *buf, size_t len);
