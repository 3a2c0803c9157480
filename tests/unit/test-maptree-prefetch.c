/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The map reader's prefetchers (bv_map_reader_prefetch) against an in-memory node store whose
 * fetches take a while, as a ranged GET does: a walk in image order finds the nodes of a level
 * fetched in parallel, each node fetched once, the results those of a reader without them; a node
 * that does not fetch (damaged, missing) fails the lookup that needs it, which names it; a small
 * cache bounds how far ahead they go; readers in several threads meet them safely. */
#include <time.h>
#include <unistd.h>

#include "maptree-mem.h"

#define FETCH_US 3000 /* a fetch's round trip */

typedef struct SlowStore {
        MemStore *m;
        pthread_mutex_t lock;
        unsigned now, most; /* fetches under way, and the most at once */
        MemStore counts;    /* per id: how many fetches (the length of a dummy node) */
        uint8_t bad[BV_ID_SIZE];
        int bad_error; /* < 0: fetching bad fails with it */
} SlowStore;

static void slow_init(SlowStore *s, MemStore *m)
{
        *s = (SlowStore){ .m = m };
        pthread_mutex_init(&s->lock, NULL);
        mem_init(&s->counts);
}

static void slow_done(SlowStore *s)
{
        mem_done(&s->counts);
        pthread_mutex_destroy(&s->lock);
}

static size_t fetch_count(SlowStore *s, const uint8_t id[BV_ID_SIZE])
{
        MemNode *n = *mem_slot(&s->counts, id);
        return n ? n->len : 0;
}

static int slow_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        SlowStore *s = userdata;
        int r;

        pthread_mutex_lock(&s->lock);
        s->now++;
        s->most = MAX(s->most, s->now);
        MemNode *c = *mem_slot(&s->counts, id);
        if (!c) {
                mem_put(&s->counts, id, "", 0);
                c = *mem_slot(&s->counts, id);
        }
        c->len++;
        pthread_mutex_unlock(&s->lock);
        usleep(FETCH_US);
        r = s->bad_error < 0 && memcmp(id, s->bad, BV_ID_SIZE) == 0 ? s->bad_error
                                                                     : mem_fetch(s->m, id, ret_node, ret_len);
        pthread_mutex_lock(&s->lock);
        s->now--;
        pthread_mutex_unlock(&s->lock);
        return r;
}

static double now_s(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Every extent looked up in image order (as restore's walk does); seconds taken. */
static double walk_all(BvMapReader *r, const BvMapExtent *e, size_t n)
{
        double t0 = now_s();
        for (size_t i = 0; i < n; i++)
                check_extent(r, &e[i], e[i].offset + e[i].length / 2);
        return now_s() - t0;
}

/* How many nodes the tree has (a walk). */
static int count_node(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        (*(size_t *)userdata)++;
        return 0;
}

static size_t tree_nodes(MemStore *m, const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size)
{
        size_t n = 0;
        ASSERT_OK(bv_map_walk(root, height, size, mem_fetch, m, count_node, NULL, &n));
        return n;
}

/* A map of count random extents in an in-memory store. */
typedef struct Tree {
        MemStore m;
        BvMapExtent *e;
        size_t n, nodes; /* extents (merged) and nodes */
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size;
} Tree;

static void tree_make(Tree *t, size_t count, uint64_t seed)
{
        mem_init(&t->m);
        t->e = make_extents(count, seed);
        build(&t->m, t->e, count, t->root, &t->height, &t->size);
        t->n = merge_extents(t->e, count);
        t->nodes = tree_nodes(&t->m, t->root, t->height, t->size);
}

static void tree_done(Tree *t)
{
        mem_done(&t->m);
        free(t->e);
}

TEST(parallel_once)
{
        Tree t;
        SlowStore plain, pre;
        BvMapReader *r = NULL;
        BvMapPrefetchStats st;

        tree_make(&t, 30000, 71);
        ASSERT_TRUE(t.height >= 3);

        /* without prefetchers: one node at a time */
        slow_init(&plain, &t.m);
        ASSERT_OK(bv_map_reader_new(t.root, t.height, t.size, slow_fetch, &plain, 1024, &r));
        double t_plain = walk_all(r, t.e, t.n);
        bv_map_reader_free(r);
        ASSERT_EQ(plain.most, 1u);

        /* with them: the same answers, each node fetched once, many at once */
        slow_init(&pre, &t.m);
        ASSERT_OK(bv_map_reader_new(t.root, t.height, t.size, slow_fetch, &pre, 1024, &r));
        ASSERT_OK(bv_map_reader_prefetch(r, 8, 256));
        ASSERT_ERROR(bv_map_reader_prefetch(r, 8, 256), EBUSY);
        double t_pre = walk_all(r, t.e, t.n);
        bv_map_reader_prefetch_stats(r, &st);
        bv_map_reader_free(r);
        printf("  %zu nodes: %.2f s one at a time, %.2f s with prefetchers (%u at once, %llu prefetched, "
               "%llu waits)\n", t.nodes, t_plain, t_pre, pre.most, (unsigned long long)st.prefetched,
               (unsigned long long)st.waits);
        ASSERT_EQ(pre.counts.nodes, t.nodes);
        for (size_t i = 0; i < ELEMENTSOF(pre.counts.buckets); i++)
                for (MemNode *c = pre.counts.buckets[i]; c; c = c->next)
                        ASSERT_EQ(c->len, 1u); /* no node fetched twice */
        ASSERT_TRUE(pre.most >= 4);
        ASSERT_TRUE(st.in_flight_max >= 4);
        ASSERT_TRUE(st.prefetched >= t.nodes / 2);
        ASSERT_TRUE(t_pre < t_plain);
        ASSERT_ERROR(bv_map_reader_prefetch(NULL, 1, 1), EINVAL);
        slow_done(&plain);
        slow_done(&pre);
        tree_done(&t);
}

/* The want-th leaf of a walk: its id and where it starts. */
typedef struct LeafPick {
        size_t want, seen;
        bool armed, got;
        uint8_t id[BV_ID_SIZE];
        uint64_t start;
} LeafPick;

static int pick_node(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        LeafPick *p = userdata;
        if (level == 0 && p->seen++ == p->want) {
                memcpy(p->id, id, BV_ID_SIZE);
                p->armed = true;
        }
        return 0;
}

static int pick_extent(void *userdata, const BvMapExtent *e)
{
        LeafPick *p = userdata;
        if (p->armed && !p->got) {
                p->start = e->leaf_offset;
                p->got = true;
        }
        return 0;
}

/* A leaf whose fetch fails (its object damaged or missing) fails the lookups that need it, though
 * the prefetchers went for it first, and the reader names it; the rest of the map reads. */
TEST(bad_node)
{
        const int errors[] = { -EBADMSG, -EUCLEAN };
        Tree t;
        uint8_t id[BV_ID_SIZE];

        tree_make(&t, 30000, 72);
        for (size_t k = 0; k < ELEMENTSOF(errors); k++) {
                LeafPick p = { .want = 10 + 5 * k };
                SlowStore s;
                BvMapReader *r = NULL;
                BvMapExtent got;
                size_t i;

                ASSERT_OK(bv_map_walk(t.root, t.height, t.size, mem_fetch, &t.m, pick_node, pick_extent, &p));
                ASSERT_TRUE(p.got && p.start > 0);
                slow_init(&s, &t.m);
                memcpy(s.bad, p.id, BV_ID_SIZE);
                s.bad_error = errors[k];
                ASSERT_OK(bv_map_reader_new(t.root, t.height, t.size, slow_fetch, &s, 1024, &r));
                ASSERT_OK(bv_map_reader_prefetch(r, 8, 256));
                for (i = 0; i < t.n && t.e[i].offset < p.start; i++)
                        check_extent(r, &t.e[i], t.e[i].offset);
                ASSERT_EQ(bv_map_reader_bad_node(r, id), 0);
                ASSERT_EQ(bv_map_reader_lookup(r, p.start, &got), errors[k]);
                ASSERT_EQ(bv_map_reader_lookup(r, p.start, &got), errors[k]); /* again: no stale answer */
                ASSERT_EQ(bv_map_reader_bad_node(r, id), 1);
                ASSERT_MEMEQ(id, p.id, BV_ID_SIZE);
                ASSERT_TRUE(fetch_count(&s, p.id) >= 2);
                check_extent(r, &t.e[t.n - 1], t.e[t.n - 1].offset); /* past it the map reads */
                bv_map_reader_free(r);
                slow_done(&s);
        }
        tree_done(&t);
}

/* A small cache bounds the prefetchers (half of it ahead at most): the answers stay right. */
TEST(bounded)
{
        Tree t;
        SlowStore s;
        BvMapReader *r = NULL;
        BvMapPrefetchStats st;

        tree_make(&t, 30000, 73);
        slow_init(&s, &t.m);
        ASSERT_OK(bv_map_reader_new(t.root, t.height, t.size, slow_fetch, &s, 32, &r));
        ASSERT_OK(bv_map_reader_prefetch(r, 16, 1000));
        walk_all(r, t.e, t.n);
        bv_map_reader_prefetch_stats(r, &st);
        bv_map_reader_free(r);
        ASSERT_TRUE(st.in_flight_max <= 16 + 1); /* half of 32 ahead, and the walk's own */
        ASSERT_TRUE(s.most <= 16 + 1);
        ASSERT_TRUE(st.prefetched > 0);
        ASSERT_TRUE(s.counts.nodes == t.nodes);
        slow_done(&s);
        tree_done(&t);
}

/* Readers in several threads, at random offsets, beside the prefetchers. */
TEST(threads)
{
        Tree t;
        BvMapReader *r = NULL;

        tree_make(&t, 30000, 74);
        ASSERT_OK(bv_map_reader_new(t.root, t.height, t.size, mem_fetch, &t.m, 64, &r));
        ASSERT_OK(bv_map_reader_prefetch(r, 4, 32));
        run_readers(r, t.e, t.n, t.size, 2000, 3000);
        bv_map_reader_free(r);
        tree_done(&t);
}

int main(void)
{
        RUN(parallel_once);
        RUN(bad_node);
        RUN(bounded);
        RUN(threads);
        return 0;
}
