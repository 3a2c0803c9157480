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
        /* damaged (-EBADMSG) or missing (-EUCLEAN) data does not stop the restore: each such
         * data extent is written as zeroes and listed in the stats' damaged ranges */
        bool skip_damaged;
} BvRestoreOptions;

/* A range of the image that skip_damaged wrote as zeroes. */
typedef struct BvRestoreDamage {
        uint64_t offset, length;
        int error;               /* -EBADMSG damaged, -EUCLEAN missing */
        bool map;                /* the map of the range, not its data, is damaged or missing */
} BvRestoreDamage;

typedef struct BvRestoreStats {
        uint64_t size;
        uint64_t bytes_written;  /* data written */
        uint64_t bytes_zero;     /* zero and hole extents (left sparse, or zeroed on devices) */
        double seconds;
        uint64_t bad_offset;     /* on -EBADMSG / -EUCLEAN: where the damage is */
        uint64_t written_below;  /* on -ECANCELED: every data extent below this offset was written */
        bool device;             /* dest is a block device */
        BvRestoreDamage *damaged; /* skip_damaged: by offset, adjacent ones of one kind merged;
                                   * the caller frees it */
        size_t n_damaged;
        uint64_t bytes_damaged;
} BvRestoreStats;

/* Restores a snapshot to dest: a new file (-EEXIST if dest exists; written sparse with mode 0600
 * as an anonymous or temporary file in dest's directory, and given the name dest only when
 * complete and durable, so that a failure, a cancellation or a crash never leaves a partial
 * image at dest) or a block device at least as large (-ENOSPC otherwise; zero
 * extents are zeroed with BLKZEROOUT; opened with O_EXCL, so a mounted device fails with
 * -EBUSY). ret_stats is filled on success and, with bad_offset, on -EBADMSG / -EUCLEAN, and with
 * written_below on -ECANCELED. With skip_damaged damage does not fail the restore: the image is
 * complete but for the ranges listed in ret_stats->damaged (zeroes there); a damaged map costs
 * the rest of the image from where its walk stopped. */
int bv_restore(BvRepo *r, const BvSnapshot *snap, const char *dest, const BvRestoreOptions *opts,
               BvRestoreStats *ret_stats);
