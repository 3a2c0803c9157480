/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "repo.h"
#include "source.h"
#include "used.h"

typedef struct BvBackupOptions {
        const char *name;         /* NULL: bv_backup_default_name; -EINVAL for a name
                                   * bv_snapshot_name_problem refuses */
        unsigned threads;         /* 0: one per online CPU */
        BvSourceOptions source;   /* for bv_backup_path */
        const BvSnapshot *parent; /* what a changed-block source's UNCHANGED extents refer to */
        bool force_read;          /* read a regular file even when its identity is unchanged */
        /* The source reads only the blocks its filesystems use (fs/used-source.h, a source
         * bv_fs_used_open wrapped): its map, recorded in the snapshot ("used_only"). NULL: the
         * source is read whole. */
        const BvFsUsedMap *used_only;
        unsigned full_read_every; /* 0: never force; N: at most N - 1 unread backups in a row */
        /* A changed-block source that its caller knows no parent pairs with (a libvirt disk whose
         * job exports no bitmap): read whole, this the reason (stats.changed_reason). NULL: pair. */
        const char *read_whole_because;
        bv_progress_fn progress;  /* called about every 250 ms from the reading thread */
        void *progress_userdata;
        /* If not NULL: on failure, where the source read that failed starts (source.error_offset);
         * opts->source.skip_unreadable makes such blocks zeroes recorded in the snapshot instead. */
        uint64_t *ret_error_offset;
        /* when set and it returns true (a signal asked to stop), the backup stops at its next
         * read or before it publishes, fails with -ECANCELED and publishes nothing */
        bool (*cancelled)(void);
        /* If not NULL: on failure, what this backup made durable and leaves for the next one to
         * reuse (docs/LIFECYCLE.md, "Interrupted backups") */
        struct BvBackupKept *ret_kept;
} BvBackupOptions;

typedef struct BvBackupKept {
        uint64_t packs, bytes; /* committed packs and their encoded bytes */
        bool indexed;          /* recorded in an index segment (else the next backup adopts them) */
} BvBackupKept;

typedef struct BvBackupStats {
        char snapshot_id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        uint64_t size;            /* image bytes */
        BvSnapshotStats counts;   /* what the snapshot records as its stats */
        bool used_uring;
        bool used_direct;
        /* the parent snapshot whose map was taken unread ("" when the source was read) */
        char reused_from[2 * BV_SNAPSHOT_ID_SIZE + 1];
        /* the unchanged file's parent that was not taken because the index no longer locates all
         * of its map (repair --force left damaged chunks out): the source was read again */
        char lost_from[2 * BV_SNAPSHOT_ID_SIZE + 1];
        /* the unchanged file's parent that was not taken because it was read otherwise: used-only
         * where this backup reads whole, or the other way round (or with another map) */
        char other_read_from[2 * BV_SNAPSHOT_ID_SIZE + 1];
        bool other_read_used_only; /* that parent was a used-only one */
        /* A changed-block source: the parent whose map filled the ranges it called unchanged
         * ("" when it was read whole), and why it was read whole ("" when it was not). */
        char changed_from[2 * BV_SNAPSHOT_ID_SIZE + 1];
        char changed_reason[256];
        /* the clean parts of chunks a changed range cut into, taken from the parent's stored
         * chunks instead of the source (not in counts.bytes_read) */
        uint64_t bytes_parent;
        uint64_t bytes_unreadable, ranges_unreadable; /* skip_unreadable: stored as zeroes */
        /* packs an interrupted backup left unrecorded, adopted into the index (write/adopt.h) */
        uint64_t packs_resumed, bytes_resumed;
} BvBackupStats;

/*
 * Backs up an opened source as a new snapshot. The repository must be open with BV_OPEN_WRITE.
 * On any failure nothing is published and earlier snapshots are intact. UNCHANGED extents take
 * the parent's map entries for their range (-EINVAL without opts->parent, or past its end):
 * zero and hole runs and data chunks wholly inside are not read; the rest of a data chunk that
 * sticks out of the range is taken from the parent's stored chunk (read with the source's
 * read_at when that chunk is no longer stored whole).
 *
 * A regular file whose identity (device, inode, size, mtime, ctime) equals what the newest
 * snapshot of the same name and path recorded is not read: the new snapshot takes that one's map
 * (bytes_read 0) and records it in source.reused_from, unless opts->force_read or
 * opts->full_read_every asks for a read, or that snapshot was read otherwise: used-only
 * (opts->used_only) where this backup reads whole, or the other way round, or with a map that
 * says otherwise (then stats.other_read_from names it). A whole snapshot never takes a map
 * whose free blocks were not read.
 *
 * A changed-block source (bv_source_changed_map) without opts->parent is paired with the newest
 * snapshot of the same name (changed.h): its map fills the ranges the source calls unchanged, or
 * the source is read whole with the reason in stats.changed_reason; a whole read with a parent
 * that could have been paired checks the map (stats.counts.bytes_map_checked, bytes_map_wrong).
 */
int bv_backup(BvRepo *r, BvSource *src, const BvBackupOptions *opts, BvBackupStats *ret_stats);
/* Opens path ("-": stdin) with opts->source and backs it up. */
int bv_backup_path(BvRepo *r, const char *path, const BvBackupOptions *opts, BvBackupStats *ret_stats);

/* The name a snapshot of source gets by default: its last path component, "stdin" for "-". */
const char *bv_backup_default_name(const char *source);
