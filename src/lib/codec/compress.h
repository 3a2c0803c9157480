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

/*
 * --compression=auto (docs/FORMAT.md, "Compression"): how to store a group of new data, chosen
 * from the order-0 entropy of a sample of it (BV_ZSTD_SAMPLE_PIECES blocks of 4 KiB spread
 * evenly, or all of it when shorter), which costs ~25 us per 256 KiB group where compressing it
 * costs ~1 ms:
 *   >= 7.9 bits per byte: stored raw at once (compressed already: archives, images, firmware);
 *   >= 7.0: zstd level 2 with 2^15 hash and chain tables (compresses a little: gains little);
 *   >= 5.5: zstd level 3 with a 2^15 hash and 2^14 chain table (machine code, libraries: the
 *           search pays here; tables that stay in the caches cost 16% less than 2^16/2^15);
 *   below:  zstd level 1 (text and tables compress nearly as well at the fastest level).
 * Measured on the bench images (bench/compress-groups.c, docs/BENCHMARKS.md): zstd's CPU time
 * a third lower than level 3 everywhere, the data within 2.5% of its size at level 3.
 */
typedef enum BvZstdChoice {
        BV_ZSTD_RAW = 0,
        BV_ZSTD_FAST,
        BV_ZSTD_MID,
        BV_ZSTD_STRONG,
} BvZstdChoice;

#define BV_ZSTD_SAMPLE_PIECES 4u
#define BV_ZSTD_SAMPLE_PIECE 4096u

/* The order-0 entropy, in bits per byte (0 ... 8), of the sample of data the choice looks at. */
double bv_zstd_sample_entropy(const void *data, size_t len);

/* The choice for data (BV_ZSTD_RAW for len 0). */
BvZstdChoice bv_zstd_choose(const void *data, size_t len);

/* Makes z compress with the settings of choice (not BV_ZSTD_RAW) from now on; -EINVAL for an
 * unknown choice. */
int bv_zstd_set_choice(BvZstd *z, BvZstdChoice choice);
/* Makes z compress with the settings it was created with again (what auto does not choose for:
 * map nodes). */
int bv_zstd_reset_choice(BvZstd *z);
