/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "macro.h"
#include "parent-map.h"

#define PARENT_MAP_CACHE_NODES 64
/* Decoded groups kept for edge chunks: the two edges of a dirty run mostly lie in one group or
 * in neighbours, and a pass over the image never comes back. */
#define PARENT_GROUP_CACHE (2u * 1024 * 1024)
/* A map of up to this many nodes is announced whole before a pass (a 64 GiB image in 64 KiB
 * chunks has some 16,000); the index is read ahead whole when it is at most this many bytes per
 * chunk of the parent (each lookup of the pass touches a page of it, or more). */
#define PREFETCH_MAP_NODES (64u * 1024)
#define PREFETCH_INDEX_PER_CHUNK (8u * 1024)

struct BvParentMap {
        BvRepo *repo;
        BvObjectCodec *codec; /* its own: the pipeline's codecs belong to other threads */
        BvMapReader *map;
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size, chunks;
        bool exact; /* set the repository's reads exact (bv_parent_map_prefetch) */
        BvGroupCache *groups;
        uint8_t chunk_id[BV_ID_SIZE]; /* of the chunk in chunk_buf, when chunk_len > 0 */
        uint8_t *chunk_buf;
        size_t chunk_len, chunk_cap;
};

static int fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        BvParentMap *p = userdata;

        return bv_repo_read_object_alloc(p->repo, p->codec, BV_OBJ_MAP, id, ret_node, ret_len);
}

void bv_parent_map_free(BvParentMap *p)
{
        if (!p)
                return;
        if (p->exact)
                bv_repo_set_exact_reads(p->repo, false);
        bv_map_reader_free(p->map);
        bv_group_cache_free(p->groups);
        free(p->chunk_buf);
        bv_object_codec_free(p->codec);
        free(p);
}

int bv_parent_map_open(BvRepo *r, const BvSnapshot *parent, BvParentMap **ret)
{
        BvParentMap *p = calloc(1, sizeof(*p));
        int rr;

        if (!p)
                return -ENOMEM;
        p->repo = r;
        memcpy(p->root, parent->root, BV_ID_SIZE);
        p->height = parent->height;
        p->size = parent->size;
        p->chunks = parent->stats.chunks;
        rr = bv_object_codec_new(bv_repo_keyring(r), bv_repo_config(r)->zstd_level, &p->codec);
        if (rr >= 0)
                rr = bv_map_reader_new(parent->root, parent->height, parent->size, fetch, p, PARENT_MAP_CACHE_NODES,
                                       &p->map);
        if (rr >= 0)
                rr = bv_group_cache_new(PARENT_GROUP_CACHE, 0, &p->groups);
        if (rr < 0) {
                bv_parent_map_free(p);
                return rr;
        }
        *ret = p;
        return 0;
}

int bv_parent_map_lookup(BvParentMap *p, uint64_t offset, BvMapExtent *ret)
{
        int r = bv_map_reader_lookup(p->map, offset, ret);

        if (r >= 0 && (ret->offset > offset || ret->length == 0 || offset - ret->offset >= ret->length))
                return -EBADMSG;
        return r;
}

int bv_parent_map_chunk(BvParentMap *p, const BvMapExtent *e, const BvLocation *loc, const uint8_t **ret)
{
        size_t len;
        int r;

        if (e->kind != BV_EXTENT_DATA || e->length == 0 || e->length > BV_CHUNK_MAX_LIMIT)
                return -EINVAL;
        if (p->chunk_len == e->length && memcmp(p->chunk_id, e->id, BV_ID_SIZE) == 0) {
                *ret = p->chunk_buf;
                return 0;
        }
        p->chunk_len = 0;
        if (p->chunk_cap < e->length) {
                uint8_t *nb = realloc(p->chunk_buf, e->length);
                if (!nb)
                        return -ENOMEM;
                p->chunk_buf = nb;
                p->chunk_cap = e->length;
        }
        r = bv_repo_read_chunk_at(p->repo, p->codec, p->groups, e->id, loc, p->chunk_buf, e->length, &len);
        if (r < 0)
                return r;
        if (len != e->length)
                return -EBADMSG; /* authentic, but not the length the parent's map gives it */
        memcpy(p->chunk_id, e->id, BV_ID_SIZE);
        p->chunk_len = len;
        *ret = p->chunk_buf;
        return 0;
}

/* Starts the read of the object id (a map node) beside the others. */
static void hint_node(void *userdata, const uint8_t id[BV_ID_SIZE])
{
        BvParentMap *p = userdata;
        BvLocation loc;

        if (bv_repo_locate(p->repo, id, &loc) >= 0)
                (void)bv_repo_advise(p->repo, &loc);
}

/* Starts the read of the parent's data chunk at offset (its group) when it sticks out of
 * [from, to): the pass will take its clean part from the repository (bv_parent_map_chunk). */
static void hint_edge(BvParentMap *p, uint64_t offset, uint64_t from, uint64_t to)
{
        BvMapExtent e;
        BvLocation loc;

        if (bv_parent_map_lookup(p, offset, &e) < 0 || e.kind != BV_EXTENT_DATA ||
            (e.offset >= from && e.offset + e.length <= to))
                return;
        if (bv_repo_locate(p->repo, e.id, &loc) >= 0)
                (void)bv_repo_advise(p->repo, &loc);
}

int bv_parent_map_prefetch(BvParentMap *p, const BvByteRange *changed, size_t n)
{
        int r;

        if (p->chunks <= UINT64_MAX / PREFETCH_INDEX_PER_CHUNK)
                bv_repo_advise_index(p->repo, p->chunks * PREFETCH_INDEX_PER_CHUNK);
        r = bv_map_prefetch(p->root, p->height, fetch, hint_node, p, PREFETCH_MAP_NODES);
        if (r < 0)
                return r;
        /* The unchanged range before a changed one ends at its start, the one after begins at
         * its end: the parent's chunks across those points are the edges. */
        for (size_t i = 0; i < n; i++) {
                uint64_t start = changed[i].offset, end = changed[i].offset + changed[i].length;
                uint64_t before = i > 0 ? changed[i - 1].offset + changed[i - 1].length : 0;
                uint64_t after = i + 1 < n ? changed[i + 1].offset : p->size;
                if (start > before && start <= p->size)
                        hint_edge(p, start - 1, before, start);
                if (end < after)
                        hint_edge(p, end, end, after);
        }
        if (changed) { /* every read the pass makes is announced */
                bv_repo_set_exact_reads(p->repo, true);
                p->exact = true;
        }
        return 0;
}

/* ---- reading ahead in a thread of its own ---- */

struct BvParentWarm {
        BvRepo *repo;
        BvSnapshot *parents; /* what bv_parent_map_open reads of each: copies */
        size_t n;
        pthread_t thread;
};

static void *warm_main(void *userdata)
{
        BvParentWarm *w = userdata;

        for (size_t i = 0; i < w->n; i++) {
                BvParentMap *p = NULL;
                if (bv_parent_map_open(w->repo, &w->parents[i], &p) >= 0)
                        (void)bv_parent_map_prefetch(p, NULL, 0);
                bv_parent_map_free(p);
        }
        return NULL;
}

int bv_parent_warm_start(BvRepo *r, const BvSnapshot *const *parents, size_t n, BvParentWarm **ret)
{
        _cleanup_free_ BvParentWarm *w = calloc(1, sizeof(*w));
        int rr;

        if (n == 0) {
                *ret = NULL;
                return 0;
        }
        if (!w || !(w->parents = calloc(n, sizeof(*w->parents))))
                return -ENOMEM;
        w->repo = r;
        w->n = n;
        for (size_t i = 0; i < n; i++) {
                BvSnapshot *c = &w->parents[i];
                memcpy(c->root, parents[i]->root, BV_ID_SIZE);
                c->height = parents[i]->height;
                c->size = parents[i]->size;
                c->stats.chunks = parents[i]->stats.chunks;
        }
        rr = -pthread_create(&w->thread, NULL, warm_main, w);
        if (rr < 0) {
                free(w->parents);
                return rr;
        }
        *ret = TAKE_PTR(w);
        return 0;
}

void bv_parent_warm_join(BvParentWarm *w)
{
        if (!w)
                return;
        (void)pthread_join(w->thread, NULL);
        free(w->parents);
        free(w);
}
