/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* zstd compression with contexts created once per worker thread and reused. */

#include <stddef.h>
#include <stdint.h>

typedef struct BvZstd BvZstd;

/* level 1..19 (negative levels allowed too); used for compression only. */
int bv_zstd_new(int level, BvZstd **ret);
void bv_zstd_free(BvZstd *z);

/* Compresses into dst (capacity cap). Returns -E2BIG when the result would not be smaller
 * than cap: the caller then stores the data raw (incompressible). */
int bv_zstd_compress(BvZstd *z, const void *src, size_t len, void *dst, size_t cap, size_t *ret_len);

/* Decompresses a frame that must expand to exactly expected_len bytes; -EBADMSG otherwise. */
int bv_zstd_decompress(BvZstd *z, const void *src, size_t len, void *dst, size_t expected_len);
