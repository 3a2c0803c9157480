/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The map tree (docs/FORMAT.md, "Map tree"). A node is
 *
 *   u8 version (1) | u8 level (0 = leaf) | u16 reserved (0) | u32 count | entries
 *   leaf entry:     u8 kind | varint length | id[32] (DATA only)
 *   internal entry: varint length | child id[32]
 *
 * The builder keeps one open node per level. A node is closed after an entry whose id (chunk
 * id or child id) has get_le32(id) % 64 == 0, and always at 1024 entries; closing stores it
 * and appends (covered length, id) to the level above. The reader descends from the root and
 * keeps a bounded LRU cache of decoded nodes (entry ends as prefix sums, for binary search).
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "endian.h"
#include "macro.h"
#include "list.h"
#include "maptree.h"

#define NODE_VERSION 1
#define NODE_HEADER_SIZE 8
#define NODE_MAX_ENTRIES 1024u
#define NODE_CUT_MODULUS 64u
#define MAP_MAX_HEIGHT BV_MAP_MAX_HEIGHT
#define LEAF_ENTRY_MAX (1 + VARINT_MAX + BV_ID_SIZE)
#define NODE_MAX_SIZE (NODE_HEADER_SIZE + NODE_MAX_ENTRIES * LEAF_ENTRY_MAX)
#define READER_DEFAULT_CACHE 256u

static bool id_cuts(const uint8_t id[BV_ID_SIZE])
{
        return get_le32(id) % NODE_CUT_MODULUS == 0;
}

/* ---- building ---- */

typedef struct OpenNode {
        uint8_t *buf; /* NODE_MAX_SIZE bytes; the header is written when the node closes */
        size_t len;
        uint32_t count;
        uint64_t total;  /* bytes covered by the entries so far */
        uint64_t closed; /* nodes of this level already stored */
} OpenNode;

struct BvMapBuilder {
        bv_map_store_fn store;
        void *userdata;
        OpenNode levels[MAP_MAX_HEIGHT];
        BvExtentKind pending_kind; /* a ZERO or HOLE run not yet written (0: none) */
        uint64_t pending_length;
        uint64_t size;
        int error; /* sticky: after a failure or finish() the builder only accepts free() */
};

int bv_map_builder_new(bv_map_store_fn store, void *userdata, BvMapBuilder **ret)
{
        BvMapBuilder *b;

        if (!store || !ret)
                return -EINVAL;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->store = store;
        b->userdata = userdata;
        *ret = b;
        return 0;
}

void bv_map_builder_free(BvMapBuilder *b)
{
        if (!b)
                return;
        for (size_t i = 0; i < MAP_MAX_HEIGHT; i++)
                free(b->levels[i].buf);
        free(b);
}

static int level_get(BvMapBuilder *b, unsigned level, OpenNode **ret)
{
        OpenNode *n;

        if (level >= MAP_MAX_HEIGHT)
                return -EOVERFLOW;
        n = &b->levels[level];
        if (!n->buf) {
                n->buf = malloc(NODE_MAX_SIZE);
                if (!n->buf)
                        return -ENOMEM;
                n->len = NODE_HEADER_SIZE;
        }
        *ret = n;
        return 0;
}

/* Writes the header of level's open node, stores it and resets the level. */
static int level_store(BvMapBuilder *b, unsigned level, uint64_t *ret_total, uint8_t ret_id[BV_ID_SIZE])
{
        OpenNode *n = &b->levels[level];
        int r;

        n->buf[0] = NODE_VERSION;
        n->buf[1] = (uint8_t)level;
        put_le16(n->buf + 2, 0);
        put_le32(n->buf + 4, n->count);
        r = b->store(b->userdata, n->buf, n->len, ret_id);
        if (r < 0)
                return r;
        *ret_total = n->total;
        n->closed++;
        n->len = NODE_HEADER_SIZE;
        n->count = 0;
        n->total = 0;
        return 0;
}

static int level_append(BvMapBuilder *b, unsigned level, const void *entry, size_t entry_len,
                        uint64_t length, const uint8_t *cut_id);

/* Closes level's open node and appends it to the level above. */
static int level_close(BvMapBuilder *b, unsigned level)
{
        uint8_t entry[VARINT_MAX + BV_ID_SIZE], id[BV_ID_SIZE];
        uint64_t total;
        size_t n;
        int r;

        r = level_store(b, level, &total, id);
        if (r < 0)
                return r;
        n = varint_put(entry, total);
        memcpy(entry + n, id, BV_ID_SIZE);
        return level_append(b, level + 1, entry, n + BV_ID_SIZE, total, id);
}

static int level_append(BvMapBuilder *b, unsigned level, const void *entry, size_t entry_len,
                        uint64_t length, const uint8_t *cut_id)
{
        OpenNode *n;
        int r;

        r = level_get(b, level, &n);
        if (r < 0)
                return r;
        memcpy(n->buf + n->len, entry, entry_len);
        n->len += entry_len;
        n->count++;
        n->total += length;
        if ((cut_id && id_cuts(cut_id)) || n->count >= NODE_MAX_ENTRIES)
                return level_close(b, level);
        return 0;
}

static int leaf_append(BvMapBuilder *b, BvExtentKind kind, uint64_t length, const uint8_t *id)
{
        uint8_t entry[LEAF_ENTRY_MAX];
        size_t n = 0;

        entry[n++] = (uint8_t)kind;
        n += varint_put(entry + n, length);
        if (kind == BV_EXTENT_DATA) {
                if (!id)
                        return -EINVAL;
                memcpy(entry + n, id, BV_ID_SIZE);
                n += BV_ID_SIZE;
        }
        return level_append(b, 0, entry, n, length, kind == BV_EXTENT_DATA ? id : NULL);
}

static int flush_pending(BvMapBuilder *b)
{
        int r;

        if (b->pending_kind == 0)
                return 0;
        r = leaf_append(b, b->pending_kind, b->pending_length, NULL);
        if (r < 0)
                return r;
        b->pending_kind = 0;
        b->pending_length = 0;
        return 0;
}

int bv_map_builder_add(BvMapBuilder *b, BvExtentKind kind, uint64_t length, const uint8_t id[BV_ID_SIZE])
{
        int r;

        if (!b || length == 0)
                return -EINVAL;
        if (kind != BV_EXTENT_DATA && kind != BV_EXTENT_ZERO && kind != BV_EXTENT_HOLE)
                return -EINVAL;
        if (kind == BV_EXTENT_DATA && !id)
                return -EINVAL;
        if (b->error < 0)
                return b->error;
        if (length > UINT64_MAX - b->size)
                return -EOVERFLOW;

        if (kind != BV_EXTENT_DATA && b->pending_kind == kind) {
                b->pending_length += length;
                b->size += length;
                return 0;
        }
        r = flush_pending(b);
        if (r >= 0) {
                if (kind == BV_EXTENT_DATA)
                        r = leaf_append(b, kind, length, id);
                else {
                        b->pending_kind = kind;
                        b->pending_length = length;
                }
        }
        if (r < 0)
                return (b->error = r);
        b->size += length;
        return 0;
}

static int builder_finish(BvMapBuilder *b, uint8_t root[BV_ID_SIZE], uint32_t *height)
{
        uint64_t total;
        int r;

        r = flush_pending(b);
        if (r < 0)
                return r;
        for (unsigned level = 0;; level++) {
                OpenNode *n;

                r = level_get(b, level, &n);
                if (r < 0)
                        return r;
                if (n->closed == 0) {
                        /* Nothing was ever stored at this level: its open node is the root. */
                        r = level_store(b, level, &total, root);
                        if (r < 0)
                                return r;
                        *height = level + 1;
                        return 0;
                }
                if (n->count > 0) {
                        r = level_close(b, level);
                        if (r < 0)
                                return r;
                }
        }
}

int bv_map_builder_finish(BvMapBuilder *b, uint8_t ret_root[BV_ID_SIZE], uint32_t *ret_height,
                          uint64_t *ret_size)
{
        uint8_t root[BV_ID_SIZE];
        uint32_t height = 0;
        int r;

        if (!b)
                return -EINVAL;
        if (b->error < 0)
                return b->error;
        r = builder_finish(b, root, &height);
        if (r < 0)
                return (b->error = r);
        b->error = -ESTALE;
        if (ret_root)
                memcpy(ret_root, root, BV_ID_SIZE);
        if (ret_height)
                *ret_height = height;
        if (ret_size)
                *ret_size = b->size;
        return 0;
}

/* ---- parsing ---- */

typedef struct MapNode {
        uint8_t id[BV_ID_SIZE];
        unsigned level;
        size_t count;
        uint64_t *ends;             /* ends[i]: bytes covered by entries 0..i */
        uint8_t *kinds;             /* leaf: entry kinds */
        uint8_t (*ids)[BV_ID_SIZE]; /* chunk id or child id (zeros for ZERO and HOLE) */
        struct MapNode *hash_next;
        BvLink lru;
        bool unused;          /* loaded by a prefetcher, not looked up yet */
        size_t children_next; /* children from here on not handed to the prefetchers yet */
} MapNode;

static uint64_t node_total(const MapNode *n)
{
        return n->count > 0 ? n->ends[n->count - 1] : 0;
}

static MapNode *node_alloc(size_t count)
{
        /* One allocation: struct, ends (8-aligned), ids, kinds. */
        size_t size = sizeof(MapNode) + count * (sizeof(uint64_t) + BV_ID_SIZE + 1);
        MapNode *n = calloc(1, size);

        if (!n)
                return NULL;
        n->count = count;
        n->ends = (uint64_t *)(n + 1);
        n->ids = (uint8_t(*)[BV_ID_SIZE])(n->ends + count);
        n->kinds = (uint8_t *)(n->ids + count);
        return n;
}

/* Parses entry i at *pos; returns its length through ret_length. */
static int entry_parse(const uint8_t *p, size_t len, size_t *pos, MapNode *n, size_t i, uint64_t *ret_length)
{
        uint64_t length;
        size_t k, at = *pos;
        bool has_id = true;

        if (n->level == 0) {
                if (at >= len)
                        return -EBADMSG;
                n->kinds[i] = p[at++];
                if (n->kinds[i] < BV_EXTENT_DATA || n->kinds[i] > BV_EXTENT_HOLE)
                        return -EBADMSG;
                has_id = n->kinds[i] == BV_EXTENT_DATA;
        }
        k = varint_get(p + at, len - at, &length);
        if (k == 0 || length == 0)
                return -EBADMSG;
        at += k;
        if (has_id) {
                if (len - at < BV_ID_SIZE)
                        return -EBADMSG;
                memcpy(n->ids[i], p + at, BV_ID_SIZE);
                at += BV_ID_SIZE;
        }
        *pos = at;
        *ret_length = length;
        return 0;
}

static int node_decode(const void *data, size_t len, MapNode **ret)
{
        const uint8_t *p = data;
        MapNode *n;
        uint64_t total = 0, length;
        uint32_t count;
        size_t pos = NODE_HEADER_SIZE;
        int r;

        if (!data || len < NODE_HEADER_SIZE)
                return -EBADMSG;
        if (p[0] != NODE_VERSION)
                return -EPROTONOSUPPORT;
        count = get_le32(p + 4);
        if (p[1] >= MAP_MAX_HEIGHT || get_le16(p + 2) != 0 || count > NODE_MAX_ENTRIES)
                return -EBADMSG;
        if (p[1] > 0 && count == 0)
                return -EBADMSG;
        /* Every entry takes at least two bytes: refuse counts the bytes cannot hold. */
        if ((size_t)count * 2 > len - NODE_HEADER_SIZE)
                return -EBADMSG;

        n = node_alloc(count);
        if (!n)
                return -ENOMEM;
        n->level = p[1];
        for (size_t i = 0; i < count; i++) {
                r = entry_parse(p, len, &pos, n, i, &length);
                if (r >= 0 && length > UINT64_MAX - total)
                        r = -EBADMSG;
                if (r < 0) {
                        free(n);
                        return r;
                }
                total += length;
                n->ends[i] = total;
        }
        if (pos != len) {
                free(n);
                return -EBADMSG;
        }
        *ret = n;
        return 0;
}

/* Fetches node id and decodes it. */
static int node_fetch(bv_map_fetch_fn fetch, void *userdata, const uint8_t id[BV_ID_SIZE], MapNode **ret)
{
        _cleanup_free_ void *data = NULL;
        MapNode *n;
        size_t len = 0;
        int r;

        r = fetch(userdata, id, &data, &len);
        if (r < 0)
                return r;
        r = node_decode(data, len, &n);
        if (r < 0)
                return r;
        memcpy(n->id, id, BV_ID_SIZE);
        *ret = n;
        return 0;
}

int bv_map_node_parse(const void *node, size_t len, unsigned *ret_level, size_t *ret_count,
                      uint64_t *ret_length)
{
        MapNode *n = NULL;
        int r;

        r = node_decode(node, len, &n);
        if (r < 0)
                return r;
        if (ret_level)
                *ret_level = n->level;
        if (ret_count)
                *ret_count = n->count;
        if (ret_length)
                *ret_length = node_total(n);
        free(n);
        return 0;
}

/* ---- reading ---- */

struct BvMapReader {
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size;
        bv_map_fetch_fn fetch;
        void *userdata;

        pthread_mutex_t lock;
        size_t cache_max, cache_count;
        size_t nbuckets; /* a power of two */
        MapNode **buckets;
        BvList lru; /* most recently used first */

        /* prefetching (bv_map_reader_prefetch): ids waiting for a prefetcher (a ring), ids being
         * fetched, and nodes prefetched but not looked up yet; all three together at most ahead */
        pthread_cond_t wake, arrived;
        pthread_t threads[BV_MAP_PREFETCH_THREADS_MAX];
        size_t nthreads, max_threads, ahead;
        uint8_t (*queue)[BV_ID_SIZE];
        size_t qhead, nqueued;
        uint8_t (*inflight)[BV_ID_SIZE]; /* lookups' fetches too */
        size_t ninflight, inflight_cap, unused;
        bool stopping;
        BvMapPrefetchStats stats;
        /* the first node whose fetch or check failed (a lookup's), for naming it */
        bool has_bad;
        uint8_t bad[BV_ID_SIZE];
};

/* The entry of a node that covers a relative offset, copied out of the cache. */
typedef struct MapEntry {
        size_t index; /* of the entry in its node */
        uint64_t start, length;
        uint8_t kind;
        uint8_t id[BV_ID_SIZE];
} MapEntry;

int bv_map_reader_new(const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size, bv_map_fetch_fn fetch,
                      void *userdata, size_t cache_nodes, BvMapReader **ret)
{
        _cleanup_free_ BvMapReader *r = NULL;
        size_t nbuckets = 16;

        if (!root || !fetch || !ret)
                return -EINVAL;
        if (height == 0 || height > MAP_MAX_HEIGHT)
                return -EBADMSG;
        if (cache_nodes == 0)
                cache_nodes = READER_DEFAULT_CACHE;
        if (cache_nodes > SIZE_MAX / 4)
                return -EINVAL;
        while (nbuckets < cache_nodes * 2)
                nbuckets *= 2;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->buckets = calloc(nbuckets, sizeof(MapNode *));
        if (!r->buckets)
                return -ENOMEM;
        memcpy(r->root, root, BV_ID_SIZE);
        r->height = height;
        r->size = size;
        r->fetch = fetch;
        r->userdata = userdata;
        r->cache_max = cache_nodes;
        r->nbuckets = nbuckets;
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->wake, NULL);
        pthread_cond_init(&r->arrived, NULL);
        *ret = TAKE_PTR(r);
        return 0;
}

static void prefetch_stop(BvMapReader *r);

void bv_map_reader_free(BvMapReader *r)
{
        if (!r)
                return;
        prefetch_stop(r);
        for (MapNode *n = bv_list_entry_or_null(r->lru.head, MapNode, lru), *next; n; n = next) {
                next = bv_list_entry_or_null(n->lru.next, MapNode, lru);
                free(n);
        }
        free(r->buckets);
        free(r->queue);
        free(r->inflight);
        pthread_cond_destroy(&r->wake);
        pthread_cond_destroy(&r->arrived);
        pthread_mutex_destroy(&r->lock);
        free(r);
}

static MapNode **cache_slot(BvMapReader *r, const uint8_t id[BV_ID_SIZE])
{
        MapNode **slot = &r->buckets[get_le64(id) & (r->nbuckets - 1)];

        while (*slot && memcmp((*slot)->id, id, BV_ID_SIZE) != 0)
                slot = &(*slot)->hash_next;
        return slot;
}

/* Called with the lock held; takes ownership of n. Returns the node cached under its id. */
static MapNode *cache_insert(BvMapReader *r, MapNode *n)
{
        MapNode **slot = cache_slot(r, n->id);

        if (*slot) {
                free(n); /* another thread got there first */
                return *slot;
        }
        if (r->cache_count >= r->cache_max) {
                MapNode *victim = bv_list_entry(r->lru.tail, MapNode, lru);
                bv_list_unlink(&r->lru, &victim->lru);
                *cache_slot(r, victim->id) = victim->hash_next;
                if (victim->unused)
                        r->unused--;
                free(victim);
                r->cache_count--;
                slot = cache_slot(r, n->id); /* the chain may have changed */
        }
        n->hash_next = NULL;
        *slot = n;
        bv_list_push_front(&r->lru, &n->lru);
        r->cache_count++;
        return n;
}

/* Checks the node against where it hangs in the tree and finds the entry covering rel. */
static int node_find(const MapNode *n, unsigned level, uint64_t total, uint64_t rel, MapEntry *ret)
{
        size_t lo = 0, hi = n->count;

        if (n->level != level || node_total(n) != total || rel >= total)
                return -EBADMSG;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (n->ends[mid] > rel)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        ret->index = lo;
        ret->start = lo > 0 ? n->ends[lo - 1] : 0;
        ret->length = n->ends[lo] - ret->start;
        ret->kind = level == 0 ? n->kinds[lo] : 0;
        memcpy(ret->id, n->ids[lo], BV_ID_SIZE);
        return 0;
}

static bool inflight_has(const BvMapReader *r, const uint8_t id[BV_ID_SIZE])
{
        for (size_t i = 0; i < r->ninflight; i++)
                if (memcmp(r->inflight[i], id, BV_ID_SIZE) == 0)
                        return true;
        return false;
}

/* Marks id as being fetched (lock held): false when there is no room to say so. */
static bool inflight_add(BvMapReader *r, const uint8_t id[BV_ID_SIZE])
{
        if (BV_ARRAY_RESERVE(r->inflight, r->inflight_cap, r->ninflight + 1, 16) < 0)
                return false;
        memcpy(r->inflight[r->ninflight++], id, BV_ID_SIZE);
        return true;
}

/* Its fetch is over (lock held): those who wait for it look again. */
static void inflight_remove(BvMapReader *r, const uint8_t id[BV_ID_SIZE])
{
        for (size_t i = 0; i < r->ninflight; i++)
                if (memcmp(r->inflight[i], id, BV_ID_SIZE) == 0) {
                        memmove(r->inflight[i], r->inflight[i + 1], (--r->ninflight - i) * BV_ID_SIZE);
                        break;
                }
        pthread_cond_broadcast(&r->arrived);
}

static void queue_children(BvMapReader *r, MapNode *n, size_t from);

/* A lookup passed through n, taking its entry `entry` (lock held): n is used, and a branch
 * node's children from there on go to the prefetchers. */
static void node_used(BvMapReader *r, MapNode *n, size_t entry)
{
        if (n->unused) {
                n->unused = false;
                r->unused--;
        }
        if (n->level > 0)
                queue_children(r, n, entry);
}

static void note_bad(BvMapReader *r, const uint8_t id[BV_ID_SIZE])
{
        if (!r->has_bad) {
                r->has_bad = true;
                memcpy(r->bad, id, BV_ID_SIZE);
        }
}

static int reader_step(BvMapReader *r, const uint8_t id[BV_ID_SIZE], unsigned level, uint64_t total,
                       uint64_t rel, MapEntry *ret)
{
        MapNode *n = NULL;
        bool marked;
        int k;

        {
                BV_LOCK_GUARD(&r->lock);
                for (;;) {
                        n = *cache_slot(r, id);
                        if (n) {
                                bv_list_unlink(&r->lru, &n->lru);
                                bv_list_push_front(&r->lru, &n->lru);
                                k = node_find(n, level, total, rel, ret);
                                if (k < 0)
                                        note_bad(r, id);
                                else
                                        node_used(r, n, ret->index);
                                return k;
                        }
                        if (!inflight_has(r, id))
                                break;
                        r->stats.waits++; /* another thread fetches it: one GET, not two */
                        pthread_cond_wait(&r->arrived, &r->lock);
                }
                marked = inflight_add(r, id);
        }

        /* Fetch and parse outside the lock. */
        k = node_fetch(r->fetch, r->userdata, id, &n);
        if (k >= 0) {
                k = node_find(n, level, total, rel, ret);
                if (k < 0)
                        free(n);
        }
        BV_LOCK_GUARD(&r->lock);
        if (marked)
                inflight_remove(r, id);
        if (k < 0) {
                note_bad(r, id);
                return k;
        }
        n = cache_insert(r, n);
        node_used(r, n, ret->index);
        return 0;
}

int bv_map_reader_lookup(BvMapReader *r, uint64_t offset, BvMapExtent *ret)
{
        uint8_t id[BV_ID_SIZE];
        uint64_t total, base = 0, rel = offset;
        MapEntry e;
        int k;

        if (!r || !ret)
                return -EINVAL;
        if (offset >= r->size)
                return -ERANGE;
        memcpy(id, r->root, BV_ID_SIZE);
        total = r->size;
        for (unsigned level = r->height - 1;; level--) {
                k = reader_step(r, id, level, total, rel, &e);
                if (k < 0)
                        return k;
                if (level == 0)
                        break;
                base += e.start;
                rel -= e.start;
                total = e.length;
                memcpy(id, e.id, BV_ID_SIZE);
        }
        ret->kind = (BvExtentKind)e.kind;
        ret->offset = base + e.start;
        ret->length = e.length;
        ret->leaf_offset = base;
        memcpy(ret->id, e.id, BV_ID_SIZE);
        return 0;
}

int bv_map_reader_leaf_starts(BvMapReader *r, uint64_t offset, uint64_t *ret_leaf_start, uint64_t *next,
                              size_t max)
{
        uint64_t base = 0, rel = offset, total;
        const MapNode *n;
        MapEntry e;
        size_t i, k = 0;

        if (!r || !ret_leaf_start || (!next && max > 0))
                return -EINVAL;
        if (offset >= r->size)
                return -ERANGE;
        if (r->height < 2)
                return -ENOENT;
        BV_LOCK_GUARD(&r->lock);
        n = *cache_slot(r, r->root);
        total = r->size;
        for (unsigned level = r->height - 1; level > 1; level--) {
                if (!n || node_find(n, level, total, rel, &e) < 0)
                        return -ENOENT;
                base += e.start;
                rel -= e.start;
                total = e.length;
                n = *cache_slot(r, e.id);
        }
        /* n: the leaves' parent; the leaf itself must be cached too */
        if (!n || node_find(n, 1, total, rel, &e) < 0 || !*cache_slot(r, e.id))
                return -ENOENT;
        *ret_leaf_start = base + e.start;
        for (i = 0; i < n->count && n->ends[i] <= rel; i++)
                ;
        for (i++; i < n->count && k < max; i++)
                next[k++] = base + n->ends[i - 1];
        return (int)k;
}

/* ---- prefetching a lookup's way ahead ---- */

static void *prefetcher(void *userdata);

/* Hands n's children from entry `from` on, neither cached nor being fetched, to the prefetchers
 * while fewer than r->ahead nodes are queued, being fetched or prefetched and unused (lock held).
 * Starts a prefetcher for every node waiting, up to r->max_threads. */
static void queue_children(BvMapReader *r, MapNode *n, size_t from)
{
        size_t i = MAX(from, n->children_next), queued = 0;

        if (r->max_threads == 0 || r->stopping)
                return;
        for (; i < n->count && r->nqueued + r->ninflight + r->unused < r->ahead; i++) {
                if (*cache_slot(r, n->ids[i]) || inflight_has(r, n->ids[i]))
                        continue;
                memcpy(r->queue[(r->qhead + r->nqueued++) % r->ahead], n->ids[i], BV_ID_SIZE);
                queued++;
        }
        n->children_next = MAX(n->children_next, i);
        while (r->nthreads < r->max_threads && r->nthreads < r->nqueued + r->ninflight &&
               pthread_create(&r->threads[r->nthreads], NULL, prefetcher, r) == 0)
                r->nthreads++;
        if (queued > 0)
                pthread_cond_broadcast(&r->wake);
}

/* A prefetcher: fetches (and so authenticates) the nodes queued, oldest first, into the cache,
 * marked unused; a branch node's children follow it into the queue. A failure is dropped: the
 * lookup that needs the node fetches it again and says what is wrong. */
static void *prefetcher(void *userdata)
{
        BvMapReader *r = userdata;
        uint8_t id[BV_ID_SIZE];

        pthread_mutex_lock(&r->lock);
        for (;;) {
                while (!r->stopping && r->nqueued == 0)
                        pthread_cond_wait(&r->wake, &r->lock);
                if (r->stopping)
                        break;
                memcpy(id, r->queue[r->qhead], BV_ID_SIZE);
                r->qhead = (r->qhead + 1) % r->ahead;
                r->nqueued--;
                if (*cache_slot(r, id) || inflight_has(r, id) || !inflight_add(r, id))
                        continue;
                r->stats.in_flight_max = MAX(r->stats.in_flight_max, r->ninflight);
                pthread_mutex_unlock(&r->lock);
                MapNode *n = NULL;
                int k = node_fetch(r->fetch, r->userdata, id, &n);
                pthread_mutex_lock(&r->lock);
                inflight_remove(r, id);
                if (k < 0) {
                        r->stats.failed++;
                        continue;
                }
                if (*cache_slot(r, id)) {
                        free(n);
                        continue;
                }
                r->stats.prefetched++;
                n->unused = true;
                r->unused++;
                n = cache_insert(r, n);
                if (n->level > 0)
                        queue_children(r, n, 0);
        }
        pthread_mutex_unlock(&r->lock);
        return NULL;
}

int bv_map_reader_prefetch(BvMapReader *r, unsigned threads, size_t ahead)
{
        if (!r || threads > BV_MAP_PREFETCH_THREADS_MAX || (threads > 0 && ahead == 0))
                return -EINVAL;
        BV_LOCK_GUARD(&r->lock);
        if (r->max_threads > 0)
                return -EBUSY;
        ahead = MIN(ahead, r->cache_max / 2);
        ahead = MAX(ahead, (size_t)1);
        r->queue = calloc(ahead, BV_ID_SIZE);
        if (!r->queue)
                return -ENOMEM;
        r->ahead = ahead;
        r->max_threads = threads;
        return 0;
}

static void prefetch_stop(BvMapReader *r)
{
        pthread_mutex_lock(&r->lock);
        r->stopping = true;
        pthread_cond_broadcast(&r->wake);
        pthread_mutex_unlock(&r->lock);
        for (size_t i = 0; i < r->nthreads; i++)
                pthread_join(r->threads[i], NULL);
        r->nthreads = 0;
}

void bv_map_reader_prefetch_stats(BvMapReader *r, BvMapPrefetchStats *ret)
{
        BV_LOCK_GUARD(&r->lock);
        *ret = r->stats;
}

int bv_map_reader_bad_node(BvMapReader *r, uint8_t ret_id[BV_ID_SIZE])
{
        BV_LOCK_GUARD(&r->lock);
        if (!r->has_bad)
                return 0;
        memcpy(ret_id, r->bad, BV_ID_SIZE);
        return 1;
}

/* ---- walking ---- */

typedef struct MapWalk {
        bv_map_fetch_fn fetch;
        void *fetch_userdata;
        bv_map_node_fn node_fn;
        bv_map_extent_fn extent_fn;
        void *userdata;
} MapWalk;

static int walk_node(const MapWalk *w, const uint8_t id[BV_ID_SIZE], unsigned level, uint64_t offset,
                     uint64_t total)
{
        _cleanup_free_ MapNode *n = NULL;
        int r;

        if (w->node_fn) {
                r = w->node_fn(w->userdata, id, level);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        r = node_fetch(w->fetch, w->fetch_userdata, id, &n);
        if (r < 0)
                return r;
        if (n->level != level || node_total(n) != total)
                return -EBADMSG;
        for (size_t i = 0; i < n->count; i++) {
                uint64_t start = i > 0 ? n->ends[i - 1] : 0, length = n->ends[i] - start;

                if (level > 0)
                        r = walk_node(w, n->ids[i], level - 1, offset + start, length);
                else if (w->extent_fn) {
                        BvMapExtent e = {
                                .kind = n->kinds[i], .offset = offset + start, .length = length, .leaf_offset = offset
                        };
                        memcpy(e.id, n->ids[i], BV_ID_SIZE);
                        r = w->extent_fn(w->userdata, &e);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

int bv_map_walk(const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size, bv_map_fetch_fn fetch,
                void *fetch_userdata, bv_map_node_fn node_fn, bv_map_extent_fn extent_fn, void *userdata)
{
        const MapWalk w = {
                .fetch = fetch,
                .fetch_userdata = fetch_userdata,
                .node_fn = node_fn,
                .extent_fn = extent_fn,
                .userdata = userdata,
        };

        if (!root || !fetch)
                return -EINVAL;
        if (height == 0 || height > MAP_MAX_HEIGHT)
                return -EBADMSG;
        return walk_node(&w, root, height - 1, 0, size);
}

/* ---- prefetching ---- */

int bv_map_prefetch(const uint8_t root[BV_ID_SIZE], uint32_t height, bv_map_fetch_fn fetch, bv_map_hint_fn hint,
                    void *userdata, size_t max_nodes)
{
        _cleanup_free_ uint8_t(*ids)[BV_ID_SIZE] = malloc(BV_ID_SIZE);
        size_t n = 1, total = 1;
        int r = 0;

        if (!root || !fetch || !hint)
                return -EINVAL;
        if (height == 0 || height > MAP_MAX_HEIGHT)
                return -EBADMSG;
        if (!ids)
                return -ENOMEM;
        memcpy(ids[0], root, BV_ID_SIZE);
        for (unsigned level = height - 1;; level--) {
                for (size_t i = 0; i < n; i++)
                        hint(userdata, ids[i]); /* all of the level in flight at once */
                if (level == 0)
                        return 0; /* the leaves: read by the pass itself */
                _cleanup_free_ uint8_t(*next)[BV_ID_SIZE] = NULL;
                size_t n_next = 0, cap_next = 0;
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        _cleanup_free_ MapNode *node = NULL;
                        r = node_fetch(fetch, userdata, ids[i], &node);
                        if (r >= 0 && node->level != level)
                                r = -EBADMSG;
                        if (r >= 0 && (total += node->count) > max_nodes)
                                r = -EFBIG;
                        if (r >= 0 && BV_ARRAY_RESERVE(next, cap_next, n_next + node->count, 64) < 0)
                                r = -ENOMEM;
                        if (r >= 0) {
                                memcpy(next[n_next], node->ids, node->count * BV_ID_SIZE);
                                n_next += node->count;
                        }
                }
                if (r < 0)
                        return r;
                free(ids);
                ids = TAKE_PTR(next);
                n = n_next;
        }
}

/* ---- the ids a map uses ---- */

typedef struct IdWalk {
        bv_map_id_fn fn;
        void *userdata;
} IdWalk;

static int id_walk_node(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        const IdWalk *w = userdata;
        return w->fn(w->userdata, id);
}

static int id_walk_extent(void *userdata, const BvMapExtent *e)
{
        const IdWalk *w = userdata;
        int r = e->kind == BV_EXTENT_DATA ? w->fn(w->userdata, e->id) : 0;
        return r < 0 ? r : 0;
}

int bv_map_walk_ids(const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size, bv_map_fetch_fn fetch,
                    void *fetch_userdata, bv_map_id_fn id_fn, void *userdata)
{
        IdWalk w = { .fn = id_fn, .userdata = userdata };
        return bv_map_walk(root, height, size, fetch, fetch_userdata, id_walk_node, id_walk_extent, &w);
}
