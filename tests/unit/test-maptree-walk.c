/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The map tree walked against an in-memory node store: walks, leaf starts, prefetching by level,
 * one path per lookup, concurrent readers over a small cache. */
#include "maptree-mem.h"

/* ---- walking ---- */

typedef struct WalkState {
        MemStore *seen; /* if set: skip subtrees already in it, and add the others */
        size_t nodes, extents, max_extents;
        BvMapExtent *got;
        int fail_at; /* if > 0: the extent callback fails with -ECANCELED at this extent */
} WalkState;

static int walk_node_cb(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        WalkState *w = userdata;
        if (w->seen) {
                if (*mem_slot(w->seen, id))
                        return 1;
                mem_put(w->seen, id, "", 0);
        }
        w->nodes++;
        return 0;
}

static int walk_extent_cb(void *userdata, const BvMapExtent *e)
{
        WalkState *w = userdata;
        if (w->fail_at > 0 && (size_t)w->fail_at == w->extents + 1)
                return -ECANCELED;
        ASSERT_TRUE(w->extents < w->max_extents);
        w->got[w->extents++] = *e;
        return 0;
}

TEST(walk)
{
        const size_t count = 30000;
        MemStore m, seen;
        BvMapExtent *e = make_extents(count, 61), *b = make_extents(count, 61);
        uint8_t root[BV_ID_SIZE], root_b[BV_ID_SIZE];
        uint32_t height, height_b;
        uint64_t size, size_b;
        WalkState w = {0};

        mem_init(&m);
        build(&m, e, count, root, &height, &size);
        size_t nodes = m.nodes;
        size_t n = merge_extents(e, count);
        w.got = calloc(count, sizeof(*w.got));
        w.max_extents = count;
        ASSERT_TRUE(w.got);
        ASSERT_OK(bv_map_walk(root, height, size, mem_fetch, &m, walk_node_cb, walk_extent_cb, &w));
        ASSERT_EQ(w.nodes, nodes);
        ASSERT_EQ(w.extents, n);
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(w.got[i].kind, e[i].kind);
                ASSERT_TRUE(w.got[i].offset == e[i].offset && w.got[i].length == e[i].length);
                /* leaves start at an extent, in order */
                ASSERT_TRUE(w.got[i].leaf_offset <= w.got[i].offset);
                ASSERT_TRUE(i == 0 ? w.got[i].leaf_offset == 0
                                   : w.got[i].leaf_offset == w.got[i - 1].leaf_offset ||
                                             w.got[i].leaf_offset == w.got[i].offset);
                if (e[i].kind == BV_EXTENT_DATA)
                        ASSERT_MEMEQ(w.got[i].id, e[i].id, BV_ID_SIZE);
        }

        free(w.got);

        /* skipping what was seen: a second tree costs only its new nodes */
        b[count / 3].kind = BV_EXTENT_DATA;
        data_id(98, 98, b[count / 3].id);
        m.new_ids = 0;
        build(&m, b, count, root_b, &height_b, &size_b);
        size_t added = m.new_ids;
        mem_init(&seen);
        w = (WalkState){.seen = &seen};
        ASSERT_OK(bv_map_walk(root, height, size, mem_fetch, &m, walk_node_cb, NULL, &w));
        ASSERT_EQ(w.nodes, nodes);
        w.nodes = 0;
        ASSERT_OK(bv_map_walk(root_b, height_b, size_b, mem_fetch, &m, walk_node_cb, NULL, &w));
        ASSERT_EQ(w.nodes, added);
        mem_done(&seen);

        /* errors: a callback's, a wrong height or size, a missing node, bad arguments */
        w = (WalkState){.got = calloc(count, sizeof(BvMapExtent)), .max_extents = count, .fail_at = 5};
        ASSERT_ERROR(bv_map_walk(root, height, size, mem_fetch, &m, NULL, walk_extent_cb, &w), ECANCELED);
        ASSERT_EQ(w.extents, 4);
        free(w.got);
        ASSERT_ERROR(bv_map_walk(root, height + 1, size, mem_fetch, &m, NULL, NULL, NULL), EBADMSG);
        ASSERT_ERROR(bv_map_walk(root, height, size - 1, mem_fetch, &m, NULL, NULL, NULL), EBADMSG);
        ASSERT_ERROR(bv_map_walk(root, 0, size, mem_fetch, &m, NULL, NULL, NULL), EBADMSG);
        ASSERT_ERROR(bv_map_walk(root, height, size, NULL, &m, NULL, NULL, NULL), EINVAL);
        uint8_t missing[BV_ID_SIZE] = {1};
        ASSERT_ERROR(bv_map_walk(missing, 1, 0, mem_fetch, &m, NULL, NULL, NULL), ENOENT);
        mem_done(&m);
        free(e);
        free(b);
}

/* ---- prefetching ---- */

typedef struct PrefetchEvent {
        bool fetch; /* else a hint */
        uint8_t id[BV_ID_SIZE];
} PrefetchEvent;

typedef struct PrefetchState {
        MemStore *m;
        PrefetchEvent *ev;
        size_t n, cap;
} PrefetchState;

static void prefetch_note(PrefetchState *p, bool fetch, const uint8_t id[BV_ID_SIZE])
{
        ASSERT_TRUE(p->n < p->cap);
        p->ev[p->n].fetch = fetch;
        memcpy(p->ev[p->n++].id, id, BV_ID_SIZE);
}

static void prefetch_hint(void *userdata, const uint8_t id[BV_ID_SIZE])
{
        prefetch_note(userdata, false, id);
}

static int prefetch_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        PrefetchState *p = userdata;
        prefetch_note(p, true, id);
        return mem_fetch(p->m, id, ret_node, ret_len);
}

/* Each node's level, as data of one byte under its id. */
static int level_note(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        uint8_t l = (uint8_t)level;
        mem_put(userdata, id, &l, 1);
        return 0;
}

static unsigned level_of(MemStore *levels, const uint8_t id[BV_ID_SIZE])
{
        MemNode *n = *mem_slot(levels, id);
        ASSERT_TRUE(n && n->len == 1);
        return *(uint8_t *)n->data;
}

/* Every node is announced once; only internal nodes are fetched, once each, and a level is
 * announced whole before the first of its nodes is fetched (its reads all in flight at once). */
TEST(prefetch)
{
        const size_t count = 200000;
        MemStore m, levels, seen;
        BvMapExtent *e = make_extents(count, 17);
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size;
        size_t per_level[BV_MAP_MAX_HEIGHT] = {0}, hinted[BV_MAP_MAX_HEIGHT] = {0};

        mem_init(&m);
        mem_init(&levels);
        mem_init(&seen);
        build(&m, e, count, root, &height, &size);
        ASSERT_TRUE(height >= 3);
        ASSERT_OK(bv_map_walk(root, height, size, mem_fetch, &m, level_note, NULL, &levels));
        ASSERT_EQ(levels.nodes, m.nodes);
        PrefetchState p = { .m = &m, .cap = 3 * m.nodes };
        p.ev = calloc(p.cap, sizeof(*p.ev));
        ASSERT_TRUE(p.ev);
        ASSERT_OK(bv_map_prefetch(root, height, prefetch_fetch, prefetch_hint, &p, SIZE_MAX));
        for (size_t i = 0; i < p.n; i++)
                if (!p.ev[i].fetch)
                        per_level[level_of(&levels, p.ev[i].id)]++;
        size_t hints = 0, fetches = 0;
        for (size_t i = 0; i < p.n; i++) {
                unsigned l = level_of(&levels, p.ev[i].id);
                if (!p.ev[i].fetch) {
                        hints++;
                        hinted[l]++;
                        ASSERT_TRUE(!*mem_slot(&seen, p.ev[i].id)); /* once */
                        mem_put(&seen, p.ev[i].id, "", 0);
                        continue;
                }
                fetches++;
                ASSERT_TRUE(l > 0);
                ASSERT_EQ(hinted[l], per_level[l]);
        }
        ASSERT_EQ(hints, m.nodes);
        ASSERT_EQ(fetches, m.nodes - per_level[0]);

        /* a tree larger than allowed: stopped once a level would pass the cap */
        p.n = 0;
        ASSERT_ERROR(bv_map_prefetch(root, height, prefetch_fetch, prefetch_hint, &p, 1), EFBIG);
        ASSERT_EQ(p.n, 2); /* the root announced and fetched, its children not announced */
        ASSERT_ERROR(bv_map_prefetch(root, 0, prefetch_fetch, prefetch_hint, &p, SIZE_MAX), EBADMSG);
        ASSERT_ERROR(bv_map_prefetch(root, height, prefetch_fetch, NULL, &p, SIZE_MAX), EINVAL);
        uint8_t missing[BV_ID_SIZE] = {1};
        ASSERT_ERROR(bv_map_prefetch(missing, 2, prefetch_fetch, prefetch_hint, &p, SIZE_MAX), ENOENT);
        free(p.ev);
        mem_done(&seen);
        mem_done(&levels);
        mem_done(&m);
        free(e);
}

/* ---- concurrent readers over a small cache ---- */

static int count_leaves(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        if (level == 0)
                (*(size_t *)userdata)++;
        return 0;
}

/* leaf_starts answers from cached nodes only; walking every extent in order, the leaf start it
 * names changes exactly once per leaf, always to the start it named next before, and every
 * start it names is where an extent starts. */
TEST(leaf_starts)
{
        const size_t count = 30000;
        MemStore m;
        BvMapExtent *e = make_extents(count, 5);
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size, start, next[4], prev_start = UINT64_MAX, want_next = UINT64_MAX;
        size_t leaves = 0, seen = 0, n;
        BvMapReader *r = NULL;
        BvMapExtent got;
        int k;

        mem_init(&m);
        build(&m, e, count, root, &height, &size);
        n = merge_extents(e, count);
        ASSERT_TRUE(height >= 2);
        ASSERT_OK(bv_map_walk(root, height, size, mem_fetch, &m, count_leaves, NULL, &leaves));
        ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, 0, &r));
        ASSERT_ERROR(bv_map_reader_leaf_starts(r, 0, &start, next, 4), ENOENT); /* nothing cached */
        ASSERT_ERROR(bv_map_reader_leaf_starts(r, size, &start, next, 4), ERANGE);
        ASSERT_ERROR(bv_map_reader_leaf_starts(r, 0, NULL, next, 4), EINVAL);
        ASSERT_ERROR(bv_map_reader_leaf_starts(r, 0, &start, NULL, 4), EINVAL);
        for (size_t i = 0; i < n; i++) {
                ASSERT_OK(bv_map_reader_lookup(r, e[i].offset, &got));
                k = bv_map_reader_leaf_starts(r, e[i].offset, &start, next, 4);
                ASSERT_TRUE(k >= 0 && k <= 4);
                ASSERT_TRUE(start <= e[i].offset);
                ASSERT_TRUE(got.leaf_offset == start); /* the lookup tells its leaf too */
                if (start != prev_start) {
                        ASSERT_TRUE(start == e[i].offset); /* a leaf starts with an extent */
                        if (want_next != UINT64_MAX)
                                ASSERT_TRUE(start == want_next);
                        seen++;
                        prev_start = start;
                }
                for (int j = 0; j < k; j++) {
                        ASSERT_TRUE(next[j] > start && next[j] < size);
                        ASSERT_TRUE(j == 0 || next[j] > next[j - 1]);
                        ASSERT_TRUE(e[find_extent(e, n, next[j])].offset == next[j]);
                }
                want_next = k > 0 ? next[0] : UINT64_MAX;
        }
        ASSERT_EQ(seen, leaves);
        bv_map_reader_free(r);
        mem_done(&m);
        free(e);

        /* a tree of one leaf has no parent to tell */
        {
                BvMapExtent one[1] = { { .kind = BV_EXTENT_ZERO, .length = 4096 } };

                mem_init(&m);
                build(&m, one, 1, root, &height, &size);
                ASSERT_EQ(height, 1u);
                ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, 0, &r));
                ASSERT_OK(bv_map_reader_lookup(r, 0, &got));
                ASSERT_ERROR(bv_map_reader_leaf_starts(r, 0, &start, next, 4), ENOENT);
                bv_map_reader_free(r);
                mem_done(&m);
        }
}

/* Opening costs nothing whatever the map's size, and a lookup reads one path from the root: an
 * export opens in constant time and loads only the parts of the map it reads. */
TEST(lookup_reads_one_path)
{
        size_t counts[] = {1000, 200000};
        for (size_t k = 0; k < ELEMENTSOF(counts); k++) {
                MemStore m;
                BvMapExtent *e = make_extents(counts[k], 61 + k);
                uint8_t root[BV_ID_SIZE];
                uint32_t height;
                uint64_t size;
                BvMapReader *r = NULL;
                BvMapExtent got;

                mem_init(&m);
                build(&m, e, counts[k], root, &height, &size);
                ASSERT_TRUE(height >= (k == 0 ? 2u : 3u));
                ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, 64, &r));
                ASSERT_EQ(m.fetches, 0);
                ASSERT_OK(bv_map_reader_lookup(r, size / 2, &got));
                ASSERT_EQ(m.fetches, height);
                /* the same leaf again: nothing more */
                ASSERT_OK(bv_map_reader_lookup(r, got.offset, &got));
                ASSERT_EQ(m.fetches, height);
                /* the last byte: at most one path more (the root is cached) */
                ASSERT_OK(bv_map_reader_lookup(r, size - 1, &got));
                ASSERT_TRUE(m.fetches <= 2 * height - 1);
                if (k == 1) /* and nothing near the whole map */
                        ASSERT_TRUE(m.fetches < m.nodes / 100);
                bv_map_reader_free(r);
                mem_done(&m);
                free(e);
        }
}

TEST(threads)
{
        MemStore m;
        BvMapExtent *e = make_extents(30000, 51);
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size;
        BvMapReader *r = NULL;

        mem_init(&m);
        build(&m, e, 30000, root, &height, &size);
        size_t n = merge_extents(e, 30000);
        ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, 8, &r));
        run_readers(r, e, n, size, 1000, 20000);
        bv_map_reader_free(r);
        mem_done(&m);
        free(e);
}

int main(void)
{
        RUN(walk);
        RUN(leaf_starts);
        RUN(prefetch);
        RUN(lookup_reads_one_path);
        RUN(threads);
        return 0;
}
