/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "repo.h"

typedef struct BvRestoreOptions {
        unsigned threads;        /* 0: one per CPU */
        bv_progress_fn progress;
        void *progress_userdata;
        /* when set and it becomes nonzero (e.g. from a signal handler), the restore stops after
         * the jobs under way and fails with -ECANCELED */
        const volatile sig_atomic_t *cancel;
} BvRestoreOptions;

typedef struct BvRestoreStats {
        uint64_t size;
        uint64_t bytes_written;  /* data written */
        uint64_t bytes_zero;     /* zero and hole extents (left sparse, or zeroed on devices) */
        double seconds;
        uint64_t bad_offset;     /* on -EBADMSG / -EUCLEAN: where the damage is */
        uint64_t written_below;  /* on -ECANCELED: every data extent below this offset was written */
        bool device;             /* dest is a block device */
} BvRestoreStats;

/* Restores a snapshot to dest: a new file (-EEXIST if dest exists; written sparse with mode 0600
 * as an anonymous or temporary file in dest's directory, and given the name dest only when
 * complete and durable, so that a failure, a cancellation or a crash never leaves a partial
 * image at dest) or a block device at least as large (-ENOSPC otherwise; zero
 * extents are zeroed with BLKZEROOUT; opened with O_EXCL, so a mounted device fails with
 * -EBUSY). ret_stats is filled on success and, with bad_offset, on -EBADMSG / -EUCLEAN, and with
 * written_below on -ECANCELED. */
int bv_restore(BvRepo *r, const BvSnapshot *snap, const char *dest, const BvRestoreOptions *opts,
               BvRestoreStats *ret_stats);
