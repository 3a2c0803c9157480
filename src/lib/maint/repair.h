/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Repair (docs/FORMAT.md, "Repair"): every pack's own index names what the pack holds, so the
 * chunk index can be rebuilt from the packs. bv_repair reads every pack and every object in it
 * (authenticated and re-hashed), compares what is whole with what the index says, and walks
 * every snapshot's map over what is whole, to list what is lost by snapshot and byte range.
 * Only with force does it write: new index segments naming exactly the whole objects, after
 * which the old segments (damaged ones included) are unlinked. A damaged object is then no
 * longer indexed, so the next backup that meets its content stores it again, which heals every
 * snapshot that references it.
 */

#include <stdbool.h>
#include <stdint.h>

#include "repo.h"

typedef enum BvRepairEventKind {
        BV_REPAIR_DAMAGED, /* a pack, object, index segment or snapshot record that does not read */
        BV_REPAIR_LOST,    /* a byte range of a snapshot whose data no whole object holds */
} BvRepairEventKind;

typedef struct BvRepairEvent {
        BvRepairEventKind kind;
        const char *what;        /* "pack", "object", "index segment", "snapshot" / "data", "map" */
        const char *detail;      /* DAMAGED: the path or id; LOST: NULL */
        uint64_t offset;         /* DAMAGED object: its offset in the pack; LOST: image offset */
        uint64_t length;         /* LOST: bytes */
        const BvSnapshot *snapshot; /* LOST */
        int error;
} BvRepairEvent;

typedef struct BvRepairStats {
        uint64_t packs, packs_damaged;        /* on disk; whose own index does not read */
        uint64_t objects, objects_damaged;    /* entries of the packs' indexes; of those, not whole */
        uint64_t index_missing;  /* whole objects the index does not locate (or locates elsewhere) */
        uint64_t index_stale;    /* index entries that locate nothing whole */
        uint64_t segments_damaged, segments_removed, segments_written;
        uint64_t snapshots, snapshots_lossy, ranges_lost, bytes_lost;
        bool index_rebuilt;
} BvRepairStats;

/* The repository must be open for writing with BV_OPEN_REPAIR when force is set (and should be
 * at least held against writers otherwise). Returns 0 when the index is whole afterwards (or was)
 * and nothing is lost, -EUCLEAN when the index needs a rebuild that force was not given for,
 * -EBADMSG when data is lost; -EBUSY if force finds locks/gc taken (gc, an export, a reader).
 * An entry of packs/ that is a symbolic link or of another type is refused (as a writer's open
 * refuses it), named in *ret_problem if not NULL (an empty path for other errors). */
int bv_repair(BvRepo *r, bool force, void (*cb)(const BvRepairEvent *e, void *ud), void *userdata,
              BvRepairStats *ret_stats, BvRepoProblem *ret_problem);
