/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Snapshot records (docs/FORMAT.md, "Snapshots"): snapshots/<32 hex id>.snap, a small file
 * of magic, version and one SNAPSHOT object whose payload is a JSON document. Publishing it
 * is the commit of a backup: it is written last, after everything it points to is durable.
 */

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "chunker.h"
#include "keyring.h"
#include "object.h"
#include "source.h"

#define BV_SNAPSHOT_ID_SIZE 16
/* "<32 hex>.snap" and its NUL */
#define BV_SNAPSHOT_FILE_MAX (2 * BV_SNAPSHOT_ID_SIZE + 5 + 1)

/* Whether name (an entry of snapshots/) is a snapshot record's, "<32 lowercase hex>.snap", and
 * then its id in id; anything else (temporary files, protect markers, strays) is not a record,
 * and every reader of snapshots/ leaves it alone. */
bool bv_snapshot_file_id(const char *name, char id[2 * BV_SNAPSHOT_ID_SIZE + 1]);

/* A disk of a libvirt domain (kind libvirt), read through a pull-mode backup job. */
typedef struct BvSnapshotLibvirt {
        char *domain, *uuid; /* the domain's name and UUID; domain NULL: not a libvirt disk */
        char *disk;          /* its target ("vda") */
        uint64_t disk_size;  /* its virtual size as libvirt reported it */
        char *checkpoint;    /* the checkpoint the job created with this backup (NULL: none) */
} BvSnapshotLibvirt;

/* What was backed up. */
typedef struct BvSnapshotSource {
        char *path;         /* as given on the command line */
        char *host;         /* the host name of the machine that made the backup (NULL if not recorded) */
        char *abs_path;     /* the absolute path (NULL for a stream, or not recorded) */
        char *stable_name;  /* a block device's /dev/disk/by-id (or by-uuid) link, NULL if none */
        BvSourceKind kind;  /* 0 when the record names a kind this version does not know */
        uint64_t size;
        bool probed;        /* probe holds what libblkid found (never for a stream) */
        BvProbe probe;
        bool has_identity;  /* a regular file: identity is what it was when the backup opened it */
        BvSourceIdentity identity;
        /* The snapshot whose map was taken unread because the file's identity was unchanged
         * ("" when the source was read), and how many backups in a row were taken so since the
         * last one that read the source (0 for a backup that read it). */
        char reused_from[2 * BV_SNAPSHOT_ID_SIZE + 1];
        uint64_t unread_backups;
        /* A changed-block source: what tracked its changes ("qemu:dirty-bitmap:NAME"; NULL for
         * none), the snapshot whose map filled the ranges it called unchanged ("" when the source
         * was read whole), and how many backups in a row did so since the last whole read. */
        char *changed_map;
        char changed_from[2 * BV_SNAPSHOT_ID_SIZE + 1];
        uint64_t changed_backups;
        /* A disk image read as its virtual disk (kind image): its format ("qcow2"); size is then
         * the virtual disk's and identity.size the image file's. NULL for other sources. */
        char *image_format;
        BvSnapshotLibvirt libvirt;
} BvSnapshotSource;

/* The one stats schema: a backup's counters, recorded in its snapshot and printed by backup,
 * list and info under these names (docs/man/blkvault-json.7). */
typedef struct BvSnapshotStats {
        uint64_t bytes_read;    /* bytes read from the source (not holes) */
        uint64_t bytes_read_cached; /* of those, read through the page cache */
        uint64_t bytes_read_direct; /* of those, read with O_DIRECT */
        uint64_t bytes_zero;    /* all-zero blocks found in what was read */
        uint64_t bytes_hole;    /* holes never read */
        uint64_t bytes_data;    /* data in chunks (read - zero) */
        uint64_t bytes_new;     /* raw bytes of chunks not in the repository before */
        uint64_t bytes_stored;  /* encoded bytes written to packs (chunks and map nodes) */
        uint64_t chunks;        /* data chunks */
        uint64_t chunks_new;
        uint64_t packs;         /* packs written */
        /* A whole read of a changed-block source checks its map: bytes of the parent's extents
         * in ranges the map called unchanged that were compared, and of those, bytes that had
         * changed all the same (the map was wrong). Recorded only when a check ran. */
        uint64_t bytes_map_checked;
        uint64_t bytes_map_wrong;
        double seconds;
} BvSnapshotStats;

/* A backup that read only the blocks the filesystems inside its source use (backup --used-only):
 * the free blocks of the partitions a reader mapped were not read and are holes in the snapshot,
 * so it is no image of the whole source. Per partition what its map said. */
typedef struct BvSnapshotUsedPart {
        uint32_t number;          /* 1, 2, ...; 0: a filesystem on the whole disk */
        uint64_t start, size;     /* bytes */
        char *fstype;             /* libblkid's name; NULL: none found */
        char *label;              /* the filesystem's label; NULL: none */
        char *reader;             /* what mapped it ("libext2fs", "partclone.xfs"); NULL: read whole */
        char *why;                /* read whole: why; NULL when mapped */
        uint64_t bytes_used, bytes_free, bytes_unknown; /* read; free, not read; read whole */
} BvSnapshotUsedPart;

typedef struct BvSnapshotUsedOnly {
        bool on;                  /* false: the source was read whole (no "used_only" member) */
        uint64_t bytes_free;      /* free bytes not read, all partitions */
        BvSnapshotUsedPart *parts;
        size_t n_parts;
} BvSnapshotUsedOnly;

void bv_snapshot_used_only_done(BvSnapshotUsedOnly *u);
/* Whether a and b say the same of the same partitions (both whole, or both used-only with equal
 * partitions, readers and counts): a map of the one may stand for the other. */
bool bv_snapshot_used_only_equal(const BvSnapshotUsedOnly *a, const BvSnapshotUsedOnly *b);

typedef struct BvSnapshot {
        char id[2 * BV_SNAPSHOT_ID_SIZE + 1]; /* hex */
        char *name;
        uint64_t time;        /* unix seconds (UTC) of the backup's start */
        uint64_t time_ns;     /* the same in nanoseconds; 0 in records older than it */
        uint64_t size;        /* image bytes */
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        BvSnapshotSource source;
        BvSnapshotStats stats;
        BvChunkerParams chunker;
        /* Ranges the source could not read (backup --skip-unreadable): stored as zeroes. */
        BvByteRange *unreadable;
        size_t n_unreadable;
        BvSnapshotUsedOnly used_only;
        /* Not in the record: snapshots/ listed a <id>.protect marker beside it (set by
         * bv_snapshot_list only, from the listing that found the record: no request more). */
        bool protect_listed;
} BvSnapshot;

void bv_snapshot_free(BvSnapshot *s);
void bv_snapshot_source_done(BvSnapshotSource *s);

/* Writes snapshots/<id>.snap durably; -EEXIST if that id exists. */
int bv_snapshot_save(BvBackend *b, BvObjectCodec *codec, const BvSnapshot *s);
int bv_snapshot_load(BvBackend *b, BvObjectCodec *codec, const char *id, BvSnapshot **ret);

/* Every snapshot, oldest first: by time, then by time_ns when both records have it, else by the
 * modification time of its file (so that backups of the same second keep the order they were
 * started in, also in a copy whose files' times differ), then by id. Only files
 * named <32 lowercase hex>.snap are read (temporary files are ignored). Damage is contained: a
 * record that does not load (damaged, -EBADMSG; unknown version; a symbolic link, -ELOOP; not a
 * regular file, -EBADFD; unreadable) is skipped, and the others are listed. Only what is not one
 * record's fault (the directory, memory) fails the list. */
int bv_snapshot_list(BvBackend *b, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count);
/* The same, calling skip (if not NULL) with the file name and error of each record skipped. */
typedef void (*bv_snapshot_skip_fn)(const char *file, int error, void *userdata);
int bv_snapshot_list_report(BvBackend *b, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count,
                            bv_snapshot_skip_fn skip, void *userdata);
void bv_snapshot_list_free(BvSnapshot **list, size_t n);

/* Resolves a user's spec against a list: a full id, a unique id prefix, a name (its newest
 * snapshot) or "latest". -ENOENT if none matches, -ENOTUNIQ for an ambiguous prefix.
 * Precedence: "latest", a full id, an id prefix (lowercase hex) of 4 digits or more, a name, a
 * shorter id prefix. Ids win over names, so a name that looks like another snapshot's id
 * (written before bv_snapshot_name_problem refused such names) never shadows it. */
int bv_snapshot_resolve(BvSnapshot *const *list, size_t n, const char *spec, const BvSnapshot **ret);

/* Snapshot names: at most 255 bytes, no control character (below 0x20, or DEL), not "latest",
 * and not 4 to 32 hex digits (in either case), which could be taken for an id or id prefix. */
#define BV_SNAPSHOT_NAME_MAX 255
#define BV_SNAPSHOT_NAME_HEX_MIN 4
/* NULL if name may name a new snapshot, otherwise why not (a phrase for a message). */
const char *bv_snapshot_name_problem(const char *name);
