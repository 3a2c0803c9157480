/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Repairs the checksums of an index segment file (docs/FORMAT.md, "Index") after a test or
 * the fuzzer changed it, so that the change reaches the parser. Shared by fuzz-index-segment
 * and test-index.
 */

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define IDX_SUMS_HEADER_SIZE 128
#define IDX_SUMS_BODY_SHA 88
#define IDX_SUMS_CHECKSUM 120
#define IDX_SUMS_BLOCK ((size_t)1 << 20)

/* body: SHA-256 over the SHA-256 of each 1 MiB block after the header; header: the first 8
 * bytes of SHA-256 over bytes 0..119. */
static inline void index_segment_fix_sums(uint8_t *seg, size_t len, bool header, bool body)
{
        uint8_t sha[BV_HASH_SIZE];

        if (len < IDX_SUMS_HEADER_SIZE)
                return;
        if (body) {
                size_t blen = len - IDX_SUMS_HEADER_SIZE, nblocks = (blen + IDX_SUMS_BLOCK - 1) / IDX_SUMS_BLOCK;
                uint8_t *digests = malloc(nblocks ? nblocks * BV_HASH_SIZE : 1);

                if (!digests)
                        abort();
                for (size_t i = 0; i < nblocks; i++) {
                        size_t off = i * IDX_SUMS_BLOCK, n = blen - off;
                        bv_sha256(seg + IDX_SUMS_HEADER_SIZE + off, n < IDX_SUMS_BLOCK ? n : IDX_SUMS_BLOCK,
                                  digests + i * BV_HASH_SIZE);
                }
                bv_sha256(digests, nblocks * BV_HASH_SIZE, seg + IDX_SUMS_BODY_SHA);
                free(digests);
        }
        if (header) {
                bv_sha256(seg, IDX_SUMS_CHECKSUM, sha);
                memcpy(seg + IDX_SUMS_CHECKSUM, sha, 8);
        }
}
