/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Cryptographically strong random bytes (OpenSSL RAND_bytes); -EIO if unavailable. */
int bv_random_bytes(void *buf, size_t len);
