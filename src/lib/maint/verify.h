/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "repo.h"

typedef struct BvVerifyProblem {
        const char *snapshot_id;  /* NULL for repository-level problems */
        uint64_t offset;          /* image offset, when the problem is in a snapshot's data */
        int error;                /* -EBADMSG, -EUCLEAN, ... */
        const char *what;         /* "chunk", "map node", "pack", "index segment", "snapshot" */
        const char *detail;       /* e.g. the pack or object id in hex */
} BvVerifyProblem;

typedef struct BvVerifyStats {
        uint64_t snapshots, chunks_checked, bytes_checked, map_nodes, packs, problems;
        uint64_t packs_read;     /* scheduled: packs whose data this run read to the end */
        uint64_t packs_never;    /* scheduled: packs whose data no run has read yet */
        bool stopped;            /* scheduled: max_duration ended the run before its sample */
        bool state_reset;        /* scheduled: verify-state did not parse and was started anew */
} BvVerifyStats;

typedef struct BvVerifyOptions {
        const char *snapshot;     /* NULL: every snapshot */
        bool read_data;
        /* With snapshot: only the chunks that the snapshot before it of the same name does not
         * reference (what its backup added). */
        bool written;
        /* Scheduled (read_data, no snapshot): read the packs least recently verified first (the
         * repository's verify-state), up to sample_percent of the bytes of all packs (0: all)
         * and stopping once max_duration_ns has passed (0: no limit), and record what was read. */
        unsigned sample_percent;
        uint64_t max_duration_ns;
        bv_progress_fn progress;  /* see bv_verify_progress; NULL: none */
        void *progress_userdata;
        /* If not NULL: on failure, the entry of the repository at fault (verify-state, refused or
         * not written), if one was; an empty path otherwise. */
        BvRepoProblem *problem;
} BvVerifyOptions;

/* Verifies structure (snapshots, map trees, that every referenced id is indexed, index
 * segment checksums, pack footers); with read_data every chunk is read, authenticated and
 * re-hashed. Each problem is reported through cb; returns 0 if none, -EBADMSG otherwise. */
int bv_verify(BvRepo *r, const char *snapshot_spec, bool read_data,
              void (*cb)(const BvVerifyProblem *p, void *ud), void *userdata, BvVerifyStats *ret_stats);
/* The same with options; -EINVAL for a schedule with a snapshot, or written without one. */
int bv_verify_opts(BvRepo *r, const BvVerifyOptions *o, void (*cb)(const BvVerifyProblem *p, void *ud),
                   void *userdata, BvVerifyStats *ret_stats);
/* bv_verify, calling progress (if not NULL) about every 250 ms and at the end of the data check
 * (read_data): its work is the bytes of the distinct chunks read. */
int bv_verify_progress(BvRepo *r, const char *snapshot_spec, bool read_data,
                       void (*cb)(const BvVerifyProblem *p, void *ud), void *userdata, bv_progress_fn progress,
                       void *progress_userdata, BvVerifyStats *ret_stats);
