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
        uint64_t dest_size;      /* bv_restore_image: the image's virtual size (also on -EMSGSIZE) */
        uint64_t map_prefetched; /* map nodes fetched ahead, in parallel (a remote repository's) */
        size_t map_in_flight_max; /* most map node fetches under way at once */
        bool bad_map;            /* on -EBADMSG / -EUCLEAN: the walk of the map stopped at */
        uint8_t bad_map_node[BV_ID_SIZE]; /* this map node, which does not read or fit the tree */
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

/* Restores a snapshot into the existing disk image at path, of format ("raw", "qcow2" ... as
 * qemu-img names it), in place: written through qemu-nbd, so a qcow2 stays a qcow2 (its
 * container is never replaced; its zero ranges become zero clusters), with its owner, mode and
 * other bitmaps. Its virtual size must be the snapshot's: -EMSGSIZE, with the image's size in
 * ret_stats->dest_size. What was written is flushed and the image closed (qemu-nbd gone) before
 * this returns. Errors as bv_restore's, and those of bv_qemu_nbd_failed (-EBUSY: a running QEMU
 * holds the image; -EBADMSG: qemu cannot open it, qemu-nbd's words in detail; -ENOPKG), -EROFS
 * when the image is read-only. On failure the image holds a partial restore. */
int bv_restore_image(BvRepo *r, const BvSnapshot *snap, const char *path, const char *format,
                     const BvRestoreOptions *opts, BvRestoreStats *ret_stats, char *detail, size_t detail_size);
