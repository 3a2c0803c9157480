/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Chunking: the splitter turns a source's bytes into extents. It finds all-zero 4 KiB blocks
 * (aligned to image offsets) and reports them as ZERO extents, passes holes through as HOLE
 * extents, and cuts the remaining data into chunks with one of three rules (docs/FORMAT.md,
 * "Chunking", pins them down exactly):
 *
 *   hybrid  cuts only at 4 KiB-aligned offsets, after a block whose keyed print is a local
 *           minimum: below the prints of the avg/8KiB - 1 blocks before it and not above
 *           those of the avg/8KiB blocks after it, within one run of full data blocks
 *           (content-defined grouping of aligned blocks); also at max size and wherever zero
 *           runs or holes begin.
 *   cdc     FastCDC-style gear hash at byte granularity, keyed gear table, normalized.
 *   fixed   cuts at image offsets that are multiples of avg.
 *
 * The splitter copies chunk data into its own buffer (at most max bytes, plus the hybrid
 * look-ahead of avg/8KiB blocks), so callers may feed buffers of any size; a hybrid chunk is
 * emitted only once the blocks after it are known, so it may end before the last bytes fed.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extent.h"

typedef enum {
        BV_CHUNKER_HYBRID = 1,
        BV_CHUNKER_CDC = 2,
        BV_CHUNKER_FIXED = 3,
} BvChunkerKind;

typedef struct BvChunkerParams {
        BvChunkerKind kind;
        uint32_t min, avg, max; /* bytes; defaults 16 KiB, 64 KiB, 256 KiB */
        uint8_t key[32];        /* from the repository keyring */
} BvChunkerParams;

#define BV_CHUNK_MIN_DEFAULT (16u * 1024)
#define BV_CHUNK_AVG_DEFAULT (64u * 1024)
#define BV_CHUNK_MAX_DEFAULT (256u * 1024)
#define BV_CHUNK_MAX_LIMIT (4u * 1024 * 1024)

const char *bv_chunker_kind_name(BvChunkerKind k); /* "hybrid", "cdc", "fixed" */
int bv_chunker_kind_from_name(const char *s, BvChunkerKind *ret);

/* Checks sizes: hybrid and fixed need multiples of 4 KiB; 4 KiB <= min < avg < max <= 4 MiB
 * (fixed uses avg only); hybrid also avg >= min + 8 KiB and min <= avg/2. -EINVAL with nothing
 * written otherwise. */
int bv_chunker_params_check(const BvChunkerParams *p);

typedef struct BvSplitter BvSplitter;

/* Called for every extent in image order. DATA extents are single chunks (<= max bytes);
 * ZERO and HOLE extents are coalesced runs of any length. Returns:
 *   0      the extent is taken whole;
 *   L > 0  (DATA only, 0 < L < length, a multiple of 4 KiB for hybrid) only the first L bytes
 *          are taken as a chunk: the splitter restarts content-defined cutting at offset+L as
 *          if a new stream began there, and re-scans the rest. The backup uses this when a
 *          prefix of a new chunk is a chunk already stored that ended at a forced cut (end of
 *          an earlier image, a zero run): cuts then fall where they fell in that image;
 *   < 0    an error: the feed stops and returns it. */
typedef int (*bv_extent_cb)(const BvExtent *e, void *userdata);

int bv_splitter_new(const BvChunkerParams *p, BvSplitter **ret);
void bv_splitter_free(BvSplitter *s);

/* Batches of DATA extents, for a caller that works on several chunks at once (hashes them on
 * more than one core): the DATA extents cut while at most `bytes` of them are gathered (and at
 * most 256) go to cb together, in image order, instead of one by one to the feed's callback;
 * ZERO and HOLE extents and every barrier (a zero run, a hole, skip, finish) hand over the
 * batch first, so the order of all extents is kept. cb sets *ret_taken to how many extents it
 * took whole (n: all) and returns < 0 (an error), or, when *ret_taken = k < n, L as a
 * bv_extent_cb does for e[k] (0 < L < length: its first L bytes are taken and cutting restarts
 * after them; extents after k are dropped and cut again). The cuts, the extents and the
 * restarts are exactly those of the one-by-one callback. Call before the first feed. The buffer
 * grows by about `bytes`. */
#define BV_SPLITTER_BATCH_MAX 256u
typedef int (*bv_batch_cb)(const BvExtent *e, size_t n, size_t *ret_taken, void *userdata);
int bv_splitter_set_batch(BvSplitter *s, size_t bytes, bv_batch_cb cb, void *userdata);

/* Data read from the image at `offset`, which must be where the previous feed or hole ended
 * (the first call starts at 0). */
int bv_splitter_feed(BvSplitter *s, uint64_t offset, const void *data, size_t len, bv_extent_cb cb,
                     void *userdata);
/* A hole of len bytes at offset (same continuity rule). */
int bv_splitter_hole(BvSplitter *s, uint64_t offset, uint64_t len, bv_extent_cb cb, void *userdata);
/* len bytes at offset that the caller accounts for itself (extents of a parent snapshot it
 * reuses): what is pending is emitted, nothing is emitted for the range, and cutting starts
 * over at offset + len as at the start of a stream (same continuity rule). */
int bv_splitter_skip(BvSplitter *s, uint64_t offset, uint64_t len, bv_extent_cb cb, void *userdata);
/* End of the image: emits what is pending. */
int bv_splitter_finish(BvSplitter *s, bv_extent_cb cb, void *userdata);
