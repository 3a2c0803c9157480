/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What test-maptree and test-maptree-walk share: an in-memory node store (id → bytes) and
 * random extent lists with the trees built from them. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "bvtest.h"
#include "endian.h"
#include "hash.h"
#include "macro.h"
#include "maptree.h"

/* ---- an in-memory node store: id → bytes ---- */

typedef struct MemNode {
        uint8_t id[BV_ID_SIZE];
        void *data;
        size_t len;
        struct MemNode *next;
} MemNode;

typedef struct MemStore {
        MemNode *buckets[4096];
        size_t nodes;     /* distinct ids held */
        size_t new_ids;   /* distinct ids added since the last reset */
        size_t stores;    /* store calls since the last reset */
        size_t fetches;   /* fetch calls */
        int fail_store;   /* if < 0, store returns it */
        pthread_mutex_t lock;
} MemStore;

static inline void mem_init(MemStore *m)
{
        memset(m, 0, sizeof(*m));
        pthread_mutex_init(&m->lock, NULL);
}

static inline void mem_done(MemStore *m)
{
        for (size_t i = 0; i < ELEMENTSOF(m->buckets); i++)
                for (MemNode *n = m->buckets[i], *next; n; n = next) {
                        next = n->next;
                        free(n->data);
                        free(n);
                }
        pthread_mutex_destroy(&m->lock);
}

static inline MemNode **mem_slot(MemStore *m, const uint8_t id[BV_ID_SIZE])
{
        MemNode **slot = &m->buckets[get_le32(id + 4) % ELEMENTSOF(m->buckets)];
        while (*slot && memcmp((*slot)->id, id, BV_ID_SIZE) != 0)
                slot = &(*slot)->next;
        return slot;
}

/* Puts bytes under an explicit id (to plant corrupt nodes). */
static inline void mem_put(MemStore *m, const uint8_t id[BV_ID_SIZE], const void *data, size_t len)
{
        MemNode **slot = mem_slot(m, id);
        if (*slot)
                return;
        MemNode *n = calloc(1, sizeof(*n));
        ASSERT_TRUE(n);
        memcpy(n->id, id, BV_ID_SIZE);
        n->data = malloc(len ? len : 1);
        ASSERT_TRUE(n->data);
        memcpy(n->data, data, len);
        n->len = len;
        *slot = n;
        m->nodes++;
        m->new_ids++;
}

static inline int mem_store(void *userdata, const void *node, size_t len, uint8_t ret_id[BV_ID_SIZE])
{
        MemStore *m = userdata;
        if (m->fail_store < 0)
                return m->fail_store;
        bv_sha256(node, len, ret_id);
        m->stores++;
        mem_put(m, ret_id, node, len);
        return 0;
}

static inline int mem_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        MemStore *m = userdata;
        BV_LOCK_GUARD(&m->lock);
        m->fetches++;
        MemNode *n = *mem_slot(m, id);
        if (!n)
                return -ENOENT;
        void *copy = malloc(n->len ? n->len : 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, n->data, n->len);
        *ret_node = copy;
        *ret_len = n->len;
        return 0;
}

/* ---- extent lists ---- */

static inline uint64_t rng_next(uint64_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        return *x;
}

static inline void data_id(uint64_t seed, size_t i, uint8_t id[BV_ID_SIZE])
{
        uint64_t in[2] = {seed, i};
        bv_sha256(in, sizeof(in), id);
}

/* Random kinds and lengths (mostly whole blocks, some odd), data ids derived from (seed, i). */
static inline BvMapExtent *make_extents(size_t n, uint64_t seed)
{
        BvMapExtent *e = calloc(n ? n : 1, sizeof(*e));
        uint64_t x = seed * 2654435761u + 1, offset = 0;
        ASSERT_TRUE(e);
        for (size_t i = 0; i < n; i++) {
                uint64_t v = rng_next(&x);
                e[i].kind = v % 10 < 6 ? BV_EXTENT_DATA : v % 10 < 8 ? BV_EXTENT_ZERO : BV_EXTENT_HOLE;
                e[i].length = (v >> 8) % 7 == 0 ? 1 + (v >> 16) % 100000 : 4096 * (1 + (v >> 16) % 64);
                e[i].offset = offset;
                offset += e[i].length;
                if (e[i].kind == BV_EXTENT_DATA)
                        data_id(seed, i, e[i].id);
        }
        return e;
}

/* The list a reader must return: neighbouring ZERO/ZERO and HOLE/HOLE merged. */
static inline size_t merge_extents(BvMapExtent *e, size_t n)
{
        size_t out = 0;
        for (size_t i = 0; i < n; i++) {
                if (out > 0 && e[i].kind != BV_EXTENT_DATA && e[out - 1].kind == e[i].kind) {
                        e[out - 1].length += e[i].length;
                        continue;
                }
                e[out++] = e[i];
        }
        return out;
}

static inline void build(MemStore *m, const BvMapExtent *e, size_t n, uint8_t root[BV_ID_SIZE], uint32_t *height,
                  uint64_t *size)
{
        BvMapBuilder *b = NULL;
        ASSERT_OK(bv_map_builder_new(mem_store, m, &b));
        for (size_t i = 0; i < n; i++)
                ASSERT_OK(bv_map_builder_add(b, e[i].kind, e[i].length, e[i].id));
        ASSERT_OK(bv_map_builder_finish(b, root, height, size));
        bv_map_builder_free(b);
}

static inline void check_extent(BvMapReader *r, const BvMapExtent *want, uint64_t offset)
{
        BvMapExtent got;
        ASSERT_OK(bv_map_reader_lookup(r, offset, &got));
        ASSERT_EQ(got.kind, want->kind);
        ASSERT_TRUE(got.offset == want->offset);
        ASSERT_TRUE(got.length == want->length);
        if (want->kind == BV_EXTENT_DATA)
                ASSERT_MEMEQ(got.id, want->id, BV_ID_SIZE);
}

static inline size_t find_extent(const BvMapExtent *e, size_t n, uint64_t offset)
{
        size_t lo = 0, hi = n;
        while (lo + 1 < hi) {
                size_t mid = (lo + hi) / 2;
                if (e[mid].offset <= offset)
                        lo = mid;
                else
                        hi = mid;
        }
        return lo;
}

/* ---- readers in several threads at random offsets ---- */

typedef struct ThreadArgs {
        BvMapReader *r;
        const BvMapExtent *e;
        size_t n, lookups;
        uint64_t size, seed;
} ThreadArgs;

static inline void *reader_thread(void *p)
{
        ThreadArgs *a = p;
        uint64_t x = a->seed;
        for (size_t i = 0; i < a->lookups; i++) {
                uint64_t off = rng_next(&x) % a->size;
                check_extent(a->r, &a->e[find_extent(a->e, a->n, off)], off);
        }
        return NULL;
}

/* Four threads of lookups lookups each over r, which maps the n (merged) extents e of size bytes. */
static inline void run_readers(BvMapReader *r, const BvMapExtent *e, size_t n, uint64_t size, uint64_t seed,
                               size_t lookups)
{
        pthread_t t[4];
        ThreadArgs args[4];

        for (int i = 0; i < 4; i++) {
                args[i] = (ThreadArgs){ .r = r, .e = e, .n = n, .lookups = lookups, .size = size, .seed = seed + i };
                ASSERT_EQ(pthread_create(&t[i], NULL, reader_thread, &args[i]), 0);
        }
        for (int i = 0; i < 4; i++)
                ASSERT_EQ(pthread_join(t[i], NULL), 0);
}
