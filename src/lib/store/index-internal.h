/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Private to the index (index.c, index-segment.c, index-pending.c, index-merge.c): the segment
 * file layout, the in-memory structures and the functions the four files share.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "index.h"

#define IDX_MAGIC "BLKVIDX1"
#define IDX_VERSION 1
#define IDX_HEADER_SIZE 128
#define IDX_ENTRY_SIZE 48
#define IDX_PACK_SIZE BV_PACK_ID_SIZE
#define IDX_BLOOM_BLOCK 64
#define IDX_BLOOM_BITS_PER_ENTRY 12
#define IDX_BLOOM_PROBES 8
#define IDX_BLOOM_MAX_PROBES 14
#define IDX_FANOUT_MAX_BITS 28
#define IDX_BUCKET_TARGET 32
#define IDX_NAME_LEN 20 /* 16 hex digits + ".idx" */
#define IDX_MERGE_BATCH 1024
#define IDX_WRITE_BATCH 21845 /* entries: just under 1 MiB */
#define IDX_HASH_BLOCK (1024 * 1024)
#define IDX_PREAD_BUCKET 128 /* entries; buckets average 16-32 */

/* Header fields (byte offsets). */
enum {
        H_MAGIC = 0,
        H_VERSION = 8,
        H_FLAGS = 12,
        H_COUNT = 16,
        H_GENERATION = 24,
        H_PACK_COUNT = 32,
        H_FANOUT_BITS = 36,
        H_BLOOM_PROBES = 37,
        H_PACKS_OFF = 40,
        H_FANOUT_OFF = 48,
        H_BLOOM_OFF = 56,
        H_BLOOM_LEN = 64,
        H_ENTRIES_OFF = 72,
        H_FILE_SIZE = 80,
        H_BODY_SHA = 88,
        H_CHECKSUM = 120,
};

/* Entry fields. */
enum {
        E_ID = 0,
        E_PACK = 32,
        E_OFFSET = 36,
        E_LENGTH = 40,
        E_TYPE = 44,
        E_MEMBER = 45,
};

typedef struct Segment {
        char name[IDX_NAME_LEN + 1];
        int fd;
        const uint8_t *map;
        size_t size;
        uint64_t count;
        uint64_t generation;
        uint32_t npacks;
        unsigned fanout_bits;
        unsigned probes;
        const uint8_t *packs;
        const uint8_t *fanout;
        const uint8_t *bloom;
        uint64_t bloom_len;
        const uint8_t *entries;
        uint64_t entries_off;
} Segment;

typedef struct SegArray {
        size_t n;
        Segment *s[]; /* newest first */
} SegArray;

#define PENDING_CLAIMED UINT32_MAX

typedef struct PendingSlot {
        uint8_t id[BV_ID_SIZE];
        uint32_t pack; /* position in Pending.packs, or PENDING_CLAIMED */
        uint32_t offset;
        uint32_t length;
        uint8_t type;
        uint8_t member;
        uint8_t used;
} PendingSlot;

typedef struct Pending {
        PendingSlot *slots;
        size_t cap; /* a power of two, or 0 */
        size_t used;
        size_t located; /* read without the lock by bv_index_pending() and lookups */
        uint8_t (*packs)[IDX_PACK_SIZE];
        size_t npacks;
        size_t packs_cap;
} Pending;

struct BvIndex {
        BvBackend *backend; /* borrowed; NULL: segments are read from dirfd */
        int dirfd;          /* index/ of a local repository, for writes; -EBADF: read-only */
        BvBackend *write_backend; /* a remote repository's, when segments are written through it */
        BvIndexDamage *damaged; /* segments the last scan left out (update_mutex) */
        size_t n_damaged;
        uint8_t (*missing)[IDX_PACK_SIZE]; /* sorted: packs whose entries lookups ignore */
        size_t n_missing;
        pthread_mutex_t update_mutex;
        pthread_mutex_t pending_mutex;
        pthread_rwlock_t seg_lock;
        SegArray *segs;
        uint64_t max_generation;
        Pending pending;
};


/* Where a segment (or a condemned list) is written: a folder of a local repository, or a kind of
 * object of a backend (through its spooled writers, backend.h). */
typedef struct SegDest {
        int dirfd;          /* when backend is NULL */
        BvBackend *backend;
        BvObjKind kind;     /* BV_KIND_INDEX, BV_KIND_CONDEMNED */
} SegDest;

/* Where x writes its segments: -EROFS for an index opened to be read only. */
struct BvIndex;
int index_seg_dest(const struct BvIndex *x, SegDest *ret);

typedef struct SegWriter {
        int dirfd;
        BvBackend *backend;
        BvObjKind kind;
        BvObjWriter *ow; /* the backend's writer: it owns fd */
        int fd;
        char tmpname[64];
        uint8_t *map; /* header, pack table, fan-out and filter: [0, entries_off) */
        size_t map_size;
        uint8_t *buf; /* entries waiting to be written */
        size_t nbuf;
        uint64_t max_count;
        uint64_t count;
        uint32_t npacks;
        unsigned fanout_bits;
        uint64_t fanout_off;
        uint64_t bloom_off;
        uint64_t bloom_len;
        uint64_t entries_off;
} SegWriter;

typedef struct Cursor {
        const Segment *seg;
        unsigned rank; /* 0 = newest: wins among equal ids */
        uint32_t *remap; /* the segment's pack positions → merged pack positions */
        uint8_t *buf;
        size_t nbuf, pos;
        uint64_t next; /* next entry to read from the file */
        const uint8_t *cur; /* current entry, NULL at the end */
} Cursor;

/* index-segment.c: segment files */
int id_cmp(const uint8_t *a, const uint8_t *b);
void segment_free(Segment *s);
int segment_open(int dirfd, const char *name, Segment **ret);
/* The same for index/<name> of a backend (read through bv_obj_reader_fd). */
int segment_open_backend(BvBackend *b, BvObjKind kind, const char *name, Segment **ret);
/* ret_entry (if not NULL): the entry's number in the segment. */
int segment_find(const Segment *s, const uint8_t id[BV_ID_SIZE], bool via_pread, BvLocation *ret,
                 uint64_t *ret_entry);
/* The location entry e of s records; its pack number must be below s->npacks. */
void segment_entry_location(const Segment *s, const uint8_t *e, BvLocation *ret);
void seg_writer_abort(SegWriter *w);
int seg_writer_begin(SegWriter *w, SegDest dest, uint64_t max_count, const uint8_t (*packs)[IDX_PACK_SIZE],
                     uint32_t npacks);
int seg_writer_add(SegWriter *w, const uint8_t id[BV_ID_SIZE], uint32_t pack, uint32_t offset, uint32_t length,
                   uint8_t type, uint8_t member);
int seg_writer_finish(SegWriter *w, uint64_t generation, Segment **ret);
int segment_check(const Segment *s, int (*cb)(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud),
                  void *userdata);
int cursor_advance(Cursor *c);

/* index-pending.c: the pending table */
size_t pending_grown(size_t cap);
void pending_release(PendingSlot *slots, size_t cap);
PendingSlot *pending_find(const Pending *t, const uint8_t id[BV_ID_SIZE]);
int pending_rebuild(Pending *t, size_t cap);
PendingSlot *pending_insert(Pending *t, const uint8_t id[BV_ID_SIZE]);
void pending_remove(Pending *t, PendingSlot *sl);
void pending_set_located(Pending *t, size_t n);
void pending_drop_located(Pending *t);

/* index.c: the published segment array */
SegArray *segarray_new(size_t n);
void index_publish(BvIndex *x, SegArray *next);
