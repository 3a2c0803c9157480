/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/* Shared by gc.c (the run, condemn, rewrite) and gc-mark.c (mark, condemned lists, finalize). */
#include <stdint.h>

#include "gc.h"
#include "index.h"
#include "object.h"

typedef struct GcList {
        char name[BV_INDEX_NAME_MAX];
        BvIndexList *list;
        uint8_t *bits; /* one per entry: referenced by a snapshot, and not in the index (NULL: not marked) */
} GcList;

typedef struct Gc {
        BvRepo *repo;
        BvIndex *index;
        BvObjectCodec *codec;
        int dirfd, gc_dirfd;
        uint8_t *bits; /* one per index position: the winning entry of a referenced id */
        uint64_t npos;
        GcList *lists;
        size_t nlists;
        char (*snaps)[2 * BV_SNAPSHOT_ID_SIZE + 1]; /* the snapshots marked, sorted */
        size_t nsnaps;
        BvGcStats *st;
        BvRepoProblem *problem; /* BvGcOptions.problem */
} Gc;

/* Names path (below the repository) as the entry at fault for error; returns error. */
static inline int gc_note(Gc *g, const char *path, bool want_dir, int error)
{
        return bv_repo_problem_note(g->problem, g->dirfd, path, want_dir, error);
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
int gc_snap_cmp(const void *a, const void *b);
