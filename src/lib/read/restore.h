/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "repo.h"

typedef struct BvRestoreOptions {
        unsigned threads;        /* 0: one per CPU */
        bv_progress_fn progress;
        void *progress_userdata;
} BvRestoreOptions;

typedef struct BvRestoreStats {
        uint64_t size;
        uint64_t bytes_written;  /* data written */
        uint64_t bytes_zero;     /* zero and hole extents (left sparse, or zeroed on devices) */
        double seconds;
        uint64_t bad_offset;     /* on -EBADMSG / -EUCLEAN: where the damage is */
} BvRestoreStats;

/* Restores a snapshot to dest: a new file (created exclusively with mode 0600, written sparse;
 * removed again on failure) or a block device at least as large (-ENOSPC otherwise; zero
 * extents are zeroed with BLKZEROOUT; opened with O_EXCL, so a mounted device fails with
 * -EBUSY). ret_stats is filled on success and, with bad_offset, on -EBADMSG / -EUCLEAN. */
int bv_restore(BvRepo *r, const BvSnapshot *snap, const char *dest, const BvRestoreOptions *opts,
               BvRestoreStats *ret_stats);
