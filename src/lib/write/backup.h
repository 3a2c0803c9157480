/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "repo.h"
#include "source.h"

typedef struct BvBackupOptions {
        const char *name;         /* NULL: bv_backup_default_name; -EINVAL for a name
                                   * bv_snapshot_name_problem refuses */
        unsigned threads;         /* 0: one per online CPU */
        BvSourceOptions source;
        bv_progress_fn progress;  /* called about every 250 ms from the reading thread */
        void *progress_userdata;
} BvBackupOptions;

typedef struct BvBackupStats {
        char snapshot_id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        uint64_t size;          /* image bytes */
        uint64_t bytes_read;    /* bytes read from the source (not holes) */
        uint64_t bytes_zero;    /* all-zero blocks found in what was read */
        uint64_t bytes_hole;    /* holes never read */
        uint64_t bytes_data;    /* data in chunks (read - zero) */
        uint64_t bytes_new;     /* raw bytes of chunks not in the repository before */
        uint64_t bytes_stored;  /* encoded bytes written to packs (chunks and map nodes) */
        uint64_t chunks;        /* data chunks */
        uint64_t chunks_new;
        uint64_t packs;         /* packs written */
        double seconds;
        bool used_uring;
        bool used_direct;
} BvBackupStats;

/* Backs up source (a path, or "-" for stdin) as a new snapshot. The repository must be open
 * with BV_OPEN_WRITE. On any failure nothing is published and earlier snapshots are intact. */
int bv_backup(BvRepo *r, const char *source, const BvBackupOptions *opts, BvBackupStats *ret_stats);

/* The name a snapshot of source gets by default: its last path component, "stdin" for "-". */
const char *bv_backup_default_name(const char *source);
