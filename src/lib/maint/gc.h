/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/*
 * Garbage collection (docs/LIFECYCLE.md): runs beside backups and NBD exports. It marks every
 * object the snapshots reference (one bit per index entry), finalizes the condemned lists whose
 * epoch every live lease has reached (resurrecting what a snapshot committed meanwhile still
 * needs, then deleting their packs), and condemns anew: packs with nothing live, orphan packs of
 * interrupted backups, and packs whose unused share exceeds max_unused, whose live objects are
 * first copied into new packs. The repository must be opened with BV_OPEN_GC.
 */
#include <stdbool.h>
#include <stdint.h>

#include "repo.h"

#define BV_GC_MAX_UNUSED_DEFAULT 10

typedef struct BvGcOptions {
        bool dry_run;        /* mark and plan; change nothing */
        unsigned max_unused; /* percent of a pack's entries that may be unused before it is rewritten */
        /* If not NULL: on failure, the entry of the repository at fault (a lease, gc/, gc/epoch, a
         * condemned list, a pack to delete), if one was; an empty path otherwise. */
        BvRepoProblem *problem;
} BvGcOptions;

typedef struct BvGcStats {
        uint64_t snapshots;
        uint64_t entries, entries_live;      /* index entries, and those a snapshot references */
        uint64_t missing;                    /* referenced ids found nowhere (damage; nothing to keep) */
        uint64_t packs;                      /* in packs/ or named by the index */
        uint64_t packs_dead, packs_orphan;   /* condemned: nothing live / named by no index segment */
        uint64_t packs_rewritten;            /* condemned after their live objects were copied */
        uint64_t bytes_condemned;            /* file sizes of the condemned packs */
        uint64_t bytes_copied;               /* encoded bytes written for rewritten packs' live objects */
        uint64_t groups_reencoded;           /* partly unused groups whose live members were re-encoded */
        uint64_t packs_deleted, bytes_deleted;
        uint64_t packs_locked;               /* dead packs kept: S3 Object Lock retention not passed yet */
        uint64_t locked_until;               /* the latest end of their retention (seconds since the epoch) */
        uint64_t lists_locked;               /* condemned lists kept for them (a later gc finalizes them) */
        uint64_t tmp_deleted, tmp_bytes_deleted; /* .tmp-* files interrupted writers left */
        uint64_t entries_resurrected;        /* put back into the index for a snapshot committed meanwhile */
        uint64_t lists_finalized, lists_waiting;
        uint64_t leases_live, leases_reaped;
        uint64_t epoch;                      /* the gc epoch when gc ended */
        uint64_t epoch_read;                 /* gc/epoch as read (0: absent) */
        uint64_t epoch_start;                /* the largest of it, the live leases' and the condemned lists'
                                                epochs: gc goes on from it (above epoch_read: gc/epoch went
                                                back, and gc wrote it anew) */
} BvGcStats;

/* -EUCLEAN when a damaged index segment or snapshot record hides what is referenced (gc would
 * delete what it cannot see is used), or a snapshot's map cannot be read. -ENOSPC when the
 * copies or the new index do not fit: nothing is lost, the next run starts over. -EOVERFLOW when
 * gc/epoch holds UINT64_MAX (no repository reaches it; one written by someone else may). */
int bv_gc(BvRepo *repo, const BvGcOptions *o, BvGcStats *ret);
