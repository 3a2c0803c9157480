/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

/* What a region of an image is: stored data, all-zero blocks, or a hole the source reported
 * (SEEK_HOLE) and that was never read. Values are on-disk (map node entries). */
typedef enum {
        BV_EXTENT_DATA = 1,
        BV_EXTENT_ZERO = 2,
        BV_EXTENT_HOLE = 3,
        /* Never stored: a source's word that [offset, offset+length) holds what its parent
         * snapshot holds there (a changed-block source); the backup reuses the parent's map. */
        BV_EXTENT_UNCHANGED = 16,
} BvExtentKind;

typedef struct BvExtent {
        BvExtentKind kind;
        uint64_t offset;  /* byte offset in the image */
        uint64_t length;  /* bytes */
        const void *data; /* DATA only; valid until the callback returns or the next call */
} BvExtent;

#define BV_BLOCK_SIZE 4096u

/* A byte range of an image (e.g. one a source could not read). */
typedef struct BvByteRange {
        uint64_t offset, length;
} BvByteRange;
