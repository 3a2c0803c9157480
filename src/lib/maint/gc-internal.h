/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/* Shared by gc.c (the run, condemn), gc-rewrite.c (copies), gc-mark.c (mark, condemned lists,
 * finalize) and gc-tmp.c. */
#include <stdbool.h>
#include <stdint.h>

#include "gc.h"
#include "index.h"
#include "object.h"
#include "pack.h"

enum {
        PACK_NAMED = 1 << 0,  /* in an index segment's pack table */
        PACK_LISTED = 1 << 1, /* in packs/ */
        PACK_CONDEMN = 1 << 2,
        PACK_REWRITE = 1 << 3,
        PACK_PENDING = 1 << 4, /* in a condemned list that waits: condemned already */
};

typedef struct PackStat {
        uint8_t id[BV_PACK_ID_SIZE];
        uint64_t size;
        uint32_t live, total; /* winning entries a snapshot references / entries */
        uint8_t flags;
} PackStat;

typedef struct Packs {
        PackStat *p;
        size_t n, cap;
} Packs;

typedef struct GcList {
        char name[BV_INDEX_NAME_MAX];
        BvIndexList *list;
        uint8_t *bits; /* one per entry: referenced by a snapshot, and not in the index (NULL: not marked) */
} GcList;

typedef struct Gc {
        BvRepo *repo;
        BvIndex *index;
        BvObjectCodec *codec;
        int dirfd, gc_dirfd;  /* a local repository's; -EBADF for a remote one */
        bool remote;          /* written through the backend (S3): no folders, no flock */
        int object_lock;      /* whether the bucket has Object Lock: 0 not probed yet, 1 yes, -1 no */
        const Packs *ps;      /* every pack the index names or packs/ holds (sizes from the listing) */
        uint8_t *bits; /* one per index position: the winning entry of a referenced id */
        uint64_t npos;
        GcList *lists;
        size_t nlists;
        char (*snaps)[2 * BV_SNAPSHOT_ID_SIZE + 1]; /* the snapshots marked, sorted */
        size_t nsnaps;
        BvGcStats *st;
        BvRepoProblem *problem; /* BvGcOptions.problem */
        unsigned max_unused;    /* BvGcOptions.max_unused */
} Gc;

/* Names path (below the repository) as the entry at fault for error; returns error. */
static inline int gc_note(Gc *g, const char *path, bool want_dir, int error)
{
        return bv_repo_problem_note(g->problem, bv_repo_backend(g->repo), path, want_dir, error);
}

static inline bool bit_test(const uint8_t *b, uint64_t i)
{
        return b[i >> 3] & (1u << (i & 7));
}
static inline void bit_set(uint8_t *b, uint64_t i)
{
        b[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* Opens the condemned list gc/<name> and adds it to g->lists, with a mark bitmap if mark. */
int gc_list_add(Gc *g, const char *name, bool mark);
int gc_lists_load(Gc *g);
void gc_lists_free(Gc *g);
int gc_mark(Gc *g);
/* Finalizes list l (bits: NULL when nothing needs resurrecting), then unlinks it. */
int gc_finalize(Gc *g, GcList *l);
int gc_pack_cmp(const void *a, const void *b);
/* Deletes the .tmp-* files of the repository's folders that no live writer holds (gc-tmp.c). */
int gc_reap_tmp(Gc *g);
/* Copies the live objects of every pack marked PACK_REWRITE into new packs (gc-rewrite.c): an
 * object as it is stored, except a group whose unused members exceed g->max_unused of its bytes,
 * whose live members are re-encoded into new groups. Their entries are durable on return. */
int gc_rewrite_packs(Gc *g, const Packs *ps);
int gc_snap_cmp(const void *a, const void *b);
