/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The chunk index (docs/FORMAT.md, "Index"): where each object id is stored. It is a set of
 * immutable segment files index/<16 hex>.idx, each a sorted table of entries with a fan-out
 * table and a Bloom filter, memory-mapped on demand: opening reads only headers, a lookup
 * costs a few Bloom probes per segment and, for ids that are present, an interpolation
 * search touching one or two pages. Memory stays bounded: the kernel pages segments in and
 * out; the writer keeps only the entries of its current batch in RAM.
 *
 * Writers: bv_index_claim() decides, once per id and thread-safely, which caller stores a new
 * object; bv_index_add_pack() records where a committed pack put them; bv_index_flush()
 * writes the recorded entries as a new durable segment (done every ~1M entries and at the
 * end of a backup, always after the packs it names are durable).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keyring.h"
#include "pack.h"

typedef struct BvLocation {
        uint8_t pack_id[BV_PACK_ID_SIZE];
        uint32_t offset;
        uint32_t length;
        uint8_t type;   /* BvObjectType: BV_OBJ_GROUP for a chunk stored in a group */
        uint8_t member; /* the chunk's number in its group, else 0 */
} BvLocation;

typedef struct BvIndexStats {
        uint64_t entries;  /* in segments (duplicates across segments counted once each) */
        uint64_t segments;
        uint64_t bytes;    /* on disk */
        uint64_t filter_bytes;
} BvIndexStats;

typedef struct BvIndex BvIndex;

/* A segment file that does not read (damaged header, wrong type, symbolic link, I/O error). */
#define BV_INDEX_NAME_MAX 32
typedef struct BvIndexDamage {
        char name[BV_INDEX_NAME_MAX]; /* the file's name in index/ */
        int error;                    /* -EBADMSG, -EPROTONOSUPPORT, -ELOOP, -EBADFD, -EIO, ... */
} BvIndexDamage;

/* The name of a segment file, or of a condemned list: 16 hex digits (either case) and ".idx".
 * Every name the index opens, and so every name a rebuild or gc must consider. */
bool bv_index_name_valid(const char *name);

/* Opens every segment of the directory. A segment that does not read is left out and listed
 * (bv_index_damaged): lookups then miss what only it locates. Fails only for what is not one
 * segment's damage (the directory, memory). */
int bv_index_open(int index_dirfd, BvIndex **ret);
/* The same for the segments of backend b (listed and read through it: on S3 each segment is
 * fetched once into the backend's local cache and mapped from there). index_dirfd is the local
 * repository's index/ for what writes segments (flush, compaction), or -EBADF for an index that
 * is only read: then those are -EROFS. A remote backend's transport or credential errors fail
 * the open rather than leave a segment out as damaged. */
int bv_index_open_backend(BvBackend *b, int index_dirfd, BvIndex **ret);

/* Lets an index opened on a remote backend (index_dirfd -EBADF) write: flush, compaction and
 * condemned lists then go through the backend's spooled writers (a segment is put create-only
 * under its random name; a compaction's inputs are deleted once its output is put). -EINVAL for
 * an index that already writes to a folder. */
int bv_index_write_through(BvIndex *x);

/* The segments the last scan (open or refresh) left out: a malloc'd copy (NULL when none). */
int bv_index_damaged(BvIndex *x, BvIndexDamage **ret, size_t *ret_count);

/* Calls cb for every pack the segments name (from their pack tables; no entry is read). A pack
 * named by several segments is named several times. A negative return stops and is returned. */
int bv_index_packs(BvIndex *x, int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], void *ud), void *userdata);

/* Packs known to be missing: lookups and claims treat an entry located in one of them as absent,
 * so that a writer stores such objects again (its newer segment then wins). Set before the index
 * is used by other threads. */
int bv_index_set_missing_packs(BvIndex *x, const uint8_t (*ids)[BV_PACK_ID_SIZE], size_t n);
void bv_index_free(BvIndex *x);

/* Picks up segments written since open (readers that live long, e.g. after a backup). */
int bv_index_refresh(BvIndex *x);

/* 0 and *ret filled, or -ENOENT. Thread-safe. Also finds entries added but not yet flushed. */
int bv_index_lookup(BvIndex *x, const uint8_t id[BV_ID_SIZE], BvLocation *ret);
/* Reads the segments' mappings ahead (MADV_WILLNEED: started, not waited for) when they hold at
 * most max_bytes in all: for a pass whose lookups will touch most of their pages, which one by
 * one (they are mapped MADV_RANDOM) would each wait for the disk. */
void bv_index_advise(BvIndex *x, uint64_t max_bytes);

/* 1: the id is neither stored nor claimed, and now is claimed by the caller, who must store
 * it (or bv_index_unclaim it); 0: already stored or claimed. Thread-safe. */
int bv_index_claim(BvIndex *x, const uint8_t id[BV_ID_SIZE]);
void bv_index_unclaim(BvIndex *x, const uint8_t id[BV_ID_SIZE]);

/* Records the locations of a committed pack's objects. */
int bv_index_add_pack(BvIndex *x, const uint8_t pack_id[BV_PACK_ID_SIZE], const BvPackEntry *entries, size_t n);

/* Entries recorded but not flushed yet. */
size_t bv_index_pending(const BvIndex *x);

/* Writes recorded entries as a new segment (durably); no-op if there are none. */
int bv_index_flush(BvIndex *x);

/* Merges segments into one when there are more than max_segments (writer lock held). */
int bv_index_compact(BvIndex *x, unsigned max_segments);

int bv_index_stats(BvIndex *x, BvIndexStats *ret);

/*
 * Garbage collection (index-gc.c, docs/LIFECYCLE.md). Positions number the entries of the
 * segments loaded now, [0, bv_index_positions()): segments newest first, entries in order; they
 * hold until the index is refreshed or compacted. Unflushed entries have none.
 */
uint64_t bv_index_positions(BvIndex *x);
/* bv_index_lookup through the mappings, with the winning entry's position. */
int bv_index_lookup_position(BvIndex *x, const uint8_t id[BV_ID_SIZE], BvLocation *ret, uint64_t *ret_pos);
/* Calls cb for every entry of every segment in id order (streaming, with pread); winner: the
 * entry a lookup returns for its id. A negative return stops the walk and is returned. */
typedef int (*bv_index_walk_fn)(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, uint64_t pos, bool winner,
                                void *userdata);
int bv_index_walk(BvIndex *x, bv_index_walk_fn cb, void *userdata);
/* Merges every segment into one without the entries located in packs (sorted): those (at most
 * list_max) go to a condemned list, a segment file written first, durably, in list_dirfd (-EBADF:
 * the condemned list object gc/<name> of the backend the index writes through) with
 * the pack table packs and generation list_generation, named in ret_list_name. Then the merged
 * segment is made durable and its inputs unlinked. */
int bv_index_compact_drop(BvIndex *x, const uint8_t (*packs)[BV_PACK_ID_SIZE], size_t npacks, uint64_t list_max,
                          int list_dirfd, uint64_t list_generation, char ret_list_name[BV_INDEX_NAME_MAX]);

/* A condemned list read back (mapped). */
typedef struct BvIndexList BvIndexList;
int bv_index_list_open(int dirfd, const char *name, BvIndexList **ret);
/* The same for the condemned list gc/<name> of backend b (S3: fetched into its local cache). */
int bv_index_list_open_backend(BvBackend *b, const char *name, BvIndexList **ret);
void bv_index_list_free(BvIndexList *l);
uint64_t bv_index_list_generation(const BvIndexList *l);
uint64_t bv_index_list_count(const BvIndexList *l);
size_t bv_index_list_packs(const BvIndexList *l, const uint8_t (**ret)[BV_PACK_ID_SIZE]);
/* Entry i (< count), -EBADMSG for a pack position out of range. */
int bv_index_list_entry(const BvIndexList *l, uint64_t i, uint8_t ret_id[BV_ID_SIZE], BvLocation *ret);
/* -ENOENT if absent; *ret_entry: its number in the list. */
int bv_index_list_find(const BvIndexList *l, const uint8_t id[BV_ID_SIZE], BvLocation *ret, uint64_t *ret_entry);

/* Checks every segment's checksum and ordering; calls cb for each entry (for verify). */
int bv_index_check(BvIndex *x, int (*cb)(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud),
                   void *userdata);
