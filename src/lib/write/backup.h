/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "repo.h"
#include "source.h"

typedef struct BvBackupOptions {
        const char *name;         /* NULL: the source path's base name */
        unsigned threads;         /* 0: one per online CPU */
        BvSourceOptions source;
        bv_progress_fn progress;  /* called about every 250 ms from the reading thread */
        void *progress_userdata;
} BvBackupOptions;

typedef struct BvBackupStats {
        char snapshot_id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        uint64_t size;            /* image bytes */
        BvSnapshotStats counts;   /* what the snapshot records as its stats */
        bool used_uring;
        bool used_direct;
} BvBackupStats;

/* Backs up source (a path, or "-" for stdin) as a new snapshot. The repository must be open
 * with BV_OPEN_WRITE. On any failure nothing is published and earlier snapshots are intact. */
int bv_backup(BvRepo *r, const char *source, const BvBackupOptions *opts, BvBackupStats *ret_stats);
