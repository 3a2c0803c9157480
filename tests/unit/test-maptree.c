/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The map tree against an in-memory node store: lookups, determinism, reuse, corruption. */
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

static void mem_init(MemStore *m)
{
        memset(m, 0, sizeof(*m));
        pthread_mutex_init(&m->lock, NULL);
}

static void mem_done(MemStore *m)
{
        for (size_t i = 0; i < ELEMENTSOF(m->buckets); i++)
                for (MemNode *n = m->buckets[i], *next; n; n = next) {
                        next = n->next;
                        free(n->data);
                        free(n);
                }
        pthread_mutex_destroy(&m->lock);
}

static MemNode **mem_slot(MemStore *m, const uint8_t id[BV_ID_SIZE])
{
        MemNode **slot = &m->buckets[get_le32(id + 4) % ELEMENTSOF(m->buckets)];
        while (*slot && memcmp((*slot)->id, id, BV_ID_SIZE) != 0)
                slot = &(*slot)->next;
        return slot;
}

/* Puts bytes under an explicit id (to plant corrupt nodes). */
static void mem_put(MemStore *m, const uint8_t id[BV_ID_SIZE], const void *data, size_t len)
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

static int mem_store(void *userdata, const void *node, size_t len, uint8_t ret_id[BV_ID_SIZE])
{
        MemStore *m = userdata;
        if (m->fail_store < 0)
                return m->fail_store;
        bv_sha256(node, len, ret_id);
        m->stores++;
        mem_put(m, ret_id, node, len);
        return 0;
}

static int mem_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
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

static uint64_t rng_next(uint64_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        return *x;
}

static void data_id(uint64_t seed, size_t i, uint8_t id[BV_ID_SIZE])
{
        uint64_t in[2] = {seed, i};
        bv_sha256(in, sizeof(in), id);
}

/* Random kinds and lengths (mostly whole blocks, some odd), data ids derived from (seed, i). */
static BvMapExtent *make_extents(size_t n, uint64_t seed)
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
static size_t merge_extents(BvMapExtent *e, size_t n)
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

static void build(MemStore *m, const BvMapExtent *e, size_t n, uint8_t root[BV_ID_SIZE], uint32_t *height,
                  uint64_t *size)
{
        BvMapBuilder *b = NULL;
        ASSERT_OK(bv_map_builder_new(mem_store, m, &b));
        for (size_t i = 0; i < n; i++)
                ASSERT_OK(bv_map_builder_add(b, e[i].kind, e[i].length, e[i].id));
        ASSERT_OK(bv_map_builder_finish(b, root, height, size));
        bv_map_builder_free(b);
}

static void check_extent(BvMapReader *r, const BvMapExtent *want, uint64_t offset)
{
        BvMapExtent got;
        ASSERT_OK(bv_map_reader_lookup(r, offset, &got));
        ASSERT_EQ(got.kind, want->kind);
        ASSERT_TRUE(got.offset == want->offset);
        ASSERT_TRUE(got.length == want->length);
        if (want->kind == BV_EXTENT_DATA)
                ASSERT_MEMEQ(got.id, want->id, BV_ID_SIZE);
}

static size_t find_extent(const BvMapExtent *e, size_t n, uint64_t offset)
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

static void build_and_check(size_t count, uint64_t seed, size_t cache_nodes)
{
        MemStore m;
        BvMapExtent *e = make_extents(count, seed);
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size, x = seed | 1;
        BvMapReader *r = NULL;

        mem_init(&m);
        build(&m, e, count, root, &height, &size);
        size_t n = merge_extents(e, count);
        ASSERT_TRUE(size == (n ? e[n - 1].offset + e[n - 1].length : 0));
        ASSERT_TRUE(height >= 1);
        ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, cache_nodes, &r));
        for (size_t i = 0; i < n; i++) {
                check_extent(r, &e[i], e[i].offset);
                check_extent(r, &e[i], e[i].offset + e[i].length - 1);
        }
        for (size_t i = 0; n > 0 && i < 2000; i++) {
                uint64_t off = rng_next(&x) % size;
                check_extent(r, &e[find_extent(e, n, off)], off);
        }
        BvMapExtent got;
        ASSERT_ERROR(bv_map_reader_lookup(r, size, &got), ERANGE);
        ASSERT_ERROR(bv_map_reader_lookup(r, UINT64_MAX, &got), ERANGE);
        bv_map_reader_free(r);
        mem_done(&m);
        free(e);
}

TEST(empty)
{
        MemStore m;
        uint8_t root[BV_ID_SIZE];
        uint32_t height = 0;
        uint64_t size = 1;
        BvMapReader *r = NULL;
        BvMapExtent got;
        void *node;
        size_t len, count;
        unsigned level;
        uint64_t length;

        mem_init(&m);
        build(&m, NULL, 0, root, &height, &size);
        ASSERT_EQ(height, 1);
        ASSERT_EQ(size, 0);
        ASSERT_EQ(m.nodes, 1);
        ASSERT_OK(mem_fetch(&m, root, &node, &len));
        ASSERT_EQ(len, 8);
        ASSERT_OK(bv_map_node_parse(node, len, &level, &count, &length));
        ASSERT_EQ(level, 0);
        ASSERT_EQ(count, 0);
        ASSERT_EQ(length, 0);
        free(node);
        ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, 0, &r));
        ASSERT_ERROR(bv_map_reader_lookup(r, 0, &got), ERANGE);
        bv_map_reader_free(r);
        mem_done(&m);
}

TEST(one_extent)
{
        build_and_check(1, 11, 0);
}

TEST(thousand_extents)
{
        build_and_check(1000, 12, 0);
        build_and_check(1000, 13, 1);
}

TEST(many_extents)
{
        build_and_check(200000, 14, 0);
}

TEST(merges_zero_and_hole_runs)
{
        MemStore m;
        BvMapBuilder *b = NULL;
        uint8_t root[BV_ID_SIZE], id[BV_ID_SIZE];
        uint32_t height;
        uint64_t size;
        void *node;
        size_t len, count;

        mem_init(&m);
        for (size_t k = 1; k == 1 || get_le32(id) % 64 == 0; k++)
                data_id(1, k, id); /* an id that does not close the node */
        ASSERT_OK(bv_map_builder_new(mem_store, &m, &b));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_ZERO, 4096, NULL));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_ZERO, 8192, NULL));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_HOLE, 100, NULL));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_HOLE, 200, NULL));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_DATA, 4096, id));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_DATA, 4096, id));
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_HOLE, 1, NULL));
        ASSERT_OK(bv_map_builder_finish(b, root, &height, &size));
        bv_map_builder_free(b);
        ASSERT_EQ(size, 4096 + 8192 + 300 + 4096 * 2 + 1);
        ASSERT_EQ(height, 1);
        ASSERT_OK(mem_fetch(&m, root, &node, &len));
        ASSERT_OK(bv_map_node_parse(node, len, NULL, &count, NULL));
        ASSERT_EQ(count, 5); /* zero, hole, data, data, hole */
        /* the exact bytes of the first two entries */
        const uint8_t want[] = {1, 0, 0, 0, 5, 0, 0, 0, 2, 0x80, 0x60, 3, 0xac, 0x02, 1, 0x80, 0x20};
        ASSERT_MEMEQ(node, want, sizeof(want));
        ASSERT_MEMEQ((uint8_t *)node + sizeof(want), id, BV_ID_SIZE);
        free(node);
        mem_done(&m);
}

TEST(deterministic)
{
        MemStore m;
        BvMapExtent *e = make_extents(50000, 21);
        uint8_t root1[BV_ID_SIZE], root2[BV_ID_SIZE];
        uint32_t h1, h2;
        uint64_t s1, s2;

        mem_init(&m);
        build(&m, e, 50000, root1, &h1, &s1);
        size_t nodes = m.nodes;
        ASSERT_TRUE(h1 >= 2);
        m.new_ids = 0;
        build(&m, e, 50000, root2, &h2, &s2);
        ASSERT_MEMEQ(root1, root2, BV_ID_SIZE);
        ASSERT_EQ(h1, h2);
        ASSERT_TRUE(s1 == s2);
        ASSERT_EQ(m.new_ids, 0);
        ASSERT_EQ(m.nodes, nodes);
        mem_done(&m);
        free(e);
}

/* Builds list a, then list b, and returns how many nodes b added that a did not have. */
static size_t new_nodes(const BvMapExtent *a, size_t na, const BvMapExtent *b, size_t nb, size_t *ret_total,
                        uint32_t *ret_height)
{
        MemStore m;
        uint8_t root[BV_ID_SIZE];
        uint64_t size;
        size_t added;

        mem_init(&m);
        build(&m, a, na, root, ret_height, &size);
        m.new_ids = 0;
        m.stores = 0;
        build(&m, b, nb, root, ret_height, &size);
        added = m.new_ids;
        *ret_total = m.stores;
        mem_done(&m);
        return added;
}

TEST(change_costs_one_path)
{
        const size_t n = 200000;
        BvMapExtent *a = make_extents(n, 31);
        BvMapExtent *b = make_extents(n, 31);
        size_t total;
        uint32_t height;

        b[n / 2].kind = BV_EXTENT_DATA;
        data_id(99, 99, b[n / 2].id);
        size_t added = new_nodes(a, n, b, n, &total, &height);
        ASSERT_TRUE(height >= 3);
        ASSERT_TRUE(total > 1000);
        /* one path, plus at most a neighbour per level where a cut moved */
        ASSERT_TRUE(added >= height);
        ASSERT_TRUE(added <= 2 * (size_t)height + 2);
        free(a);
        free(b);
}

TEST(insert_resyncs)
{
        const size_t n = 200000;
        BvMapExtent *a = make_extents(n, 41);
        BvMapExtent *b = calloc(n + 1, sizeof(*b));
        size_t total;
        uint32_t height;

        ASSERT_TRUE(b);
        memcpy(b, a, 10 * sizeof(*a));
        b[10].kind = BV_EXTENT_DATA;
        b[10].length = 12345;
        data_id(77, 77, b[10].id);
        memcpy(b + 11, a + 10, (n - 10) * sizeof(*a));
        size_t added = new_nodes(a, n, b, n + 1, &total, &height);
        ASSERT_TRUE(added >= height);
        ASSERT_TRUE(added <= 2 * (size_t)height + 2);
        ASSERT_TRUE(added * 100 < total);
        free(a);
        free(b);
}

/* ---- error paths ---- */

static size_t put_header(uint8_t *p, unsigned level, uint32_t count)
{
        p[0] = 1;
        p[1] = (uint8_t)level;
        put_le16(p + 2, 0);
        put_le32(p + 4, count);
        return 8;
}

static size_t put_leaf_data(uint8_t *p, uint64_t length, const uint8_t id[BV_ID_SIZE])
{
        size_t n = 0;
        p[n++] = BV_EXTENT_DATA;
        n += varint_put(p + n, length);
        memcpy(p + n, id, BV_ID_SIZE);
        return n + BV_ID_SIZE;
}

static size_t put_internal(uint8_t *p, uint64_t length, const uint8_t id[BV_ID_SIZE])
{
        size_t n = varint_put(p, length);
        memcpy(p + n, id, BV_ID_SIZE);
        return n + BV_ID_SIZE;
}

TEST(node_parse_errors)
{
        uint8_t node[256], id[BV_ID_SIZE];
        size_t len, count;
        unsigned level;
        uint64_t length;

        data_id(5, 5, id);
        len = put_header(node, 0, 2);
        len += put_leaf_data(node + len, 4096, id);
        node[len++] = BV_EXTENT_ZERO;
        len += varint_put(node + len, 300);
        ASSERT_OK(bv_map_node_parse(node, len, &level, &count, &length));
        ASSERT_EQ(level, 0);
        ASSERT_EQ(count, 2);
        ASSERT_EQ(length, 4396);

        /* every truncation */
        for (size_t k = 0; k < len; k++)
                ASSERT_ERROR(bv_map_node_parse(node, k, NULL, NULL, NULL), EBADMSG);
        ASSERT_ERROR(bv_map_node_parse(NULL, 0, NULL, NULL, NULL), EBADMSG);
        /* trailing garbage */
        node[len] = 0;
        ASSERT_ERROR(bv_map_node_parse(node, len + 1, NULL, NULL, NULL), EBADMSG);
        /* unknown version */
        node[0] = 2;
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EPROTONOSUPPORT);
        node[0] = 1;
        /* reserved bits */
        node[2] = 1;
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        node[2] = 0;
        /* level out of range */
        node[1] = 200;
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        node[1] = 0;
        /* count larger than the entries, and above the maximum */
        put_le32(node + 4, 3);
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        put_le32(node + 4, 1025);
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        put_le32(node + 4, UINT32_MAX);
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        put_le32(node + 4, 2);
        /* bad kinds */
        node[8] = 0;
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        node[8] = 4;
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        node[8] = BV_EXTENT_DATA;
        ASSERT_OK(bv_map_node_parse(node, len, NULL, NULL, NULL));

        /* bad varints: zero length, non-canonical, unterminated, too large */
        static const uint8_t bad_varints[][11] = {
                {0x00},
                {0x80, 0x00},
                {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
                {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_varints); i++) {
                uint8_t bad[64];
                size_t n = put_header(bad, 0, 1);
                bad[n++] = BV_EXTENT_ZERO;
                memcpy(bad + n, bad_varints[i], sizeof(bad_varints[i]));
                n += sizeof(bad_varints[i]);
                ASSERT_ERROR(bv_map_node_parse(bad, n, NULL, NULL, NULL), EBADMSG);
        }

        /* lengths whose sum overflows */
        len = put_header(node, 0, 2);
        for (int i = 0; i < 2; i++) {
                node[len++] = BV_EXTENT_HOLE;
                len += varint_put(node + len, UINT64_MAX - 1);
        }
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);

        /* an internal node needs entries; a leaf may be empty (the empty image) */
        len = put_header(node, 1, 0);
        ASSERT_ERROR(bv_map_node_parse(node, len, NULL, NULL, NULL), EBADMSG);
        len = put_header(node, 0, 0);
        ASSERT_OK(bv_map_node_parse(node, len, NULL, NULL, NULL));
        /* an internal entry truncated inside its id */
        len = put_header(node, 1, 1);
        len += put_internal(node + len, 4096, id);
        ASSERT_ERROR(bv_map_node_parse(node, len - 1, NULL, NULL, NULL), EBADMSG);
        ASSERT_OK(bv_map_node_parse(node, len, &level, NULL, NULL));
        ASSERT_EQ(level, 1);
}

/* Plants node bytes in the store under their hash and returns the id. */
static void plant(MemStore *m, const uint8_t *node, size_t len, uint8_t id[BV_ID_SIZE])
{
        bv_sha256(node, len, id);
        mem_put(m, id, node, len);
}

static int lookup_in(MemStore *m, const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size,
                     uint64_t offset)
{
        BvMapReader *r = NULL;
        BvMapExtent got;
        int k;

        ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, m, 4, &r));
        k = bv_map_reader_lookup(r, offset, &got);
        bv_map_reader_free(r);
        return k;
}

TEST(reader_errors)
{
        MemStore m;
        uint8_t node[256], chunk[BV_ID_SIZE], leaf[BV_ID_SIZE], wrong_level[BV_ID_SIZE], top[BV_ID_SIZE];
        uint8_t missing[BV_ID_SIZE] = {0}, bad[BV_ID_SIZE];
        BvMapReader *r = NULL;
        size_t len;

        mem_init(&m);
        data_id(6, 6, chunk);
        len = put_header(node, 0, 1);
        len += put_leaf_data(node + len, 1000, chunk);
        plant(&m, node, len, leaf);

        /* a good two-level tree */
        len = put_header(node, 1, 1);
        len += put_internal(node + len, 1000, leaf);
        plant(&m, node, len, top);
        ASSERT_OK(lookup_in(&m, top, 2, 1000, 999));
        ASSERT_ERROR(lookup_in(&m, top, 2, 1000, 1000), ERANGE);
        /* the root's total is not the size */
        ASSERT_ERROR(lookup_in(&m, top, 2, 1001, 0), EBADMSG);
        ASSERT_ERROR(lookup_in(&m, top, 2, 999, 0), EBADMSG);
        /* wrong height: the root's level is not height - 1 */
        ASSERT_ERROR(lookup_in(&m, top, 3, 1000, 0), EBADMSG);
        ASSERT_ERROR(lookup_in(&m, top, 1, 1000, 0), EBADMSG);

        /* a parent entry whose length is not its child's total */
        len = put_header(node, 1, 1);
        len += put_internal(node + len, 2000, leaf);
        plant(&m, node, len, bad);
        ASSERT_ERROR(lookup_in(&m, bad, 2, 2000, 5), EBADMSG);

        /* a level-1 child below a level-1 parent */
        len = put_header(node, 1, 1);
        len += put_internal(node + len, 1000, top);
        plant(&m, node, len, wrong_level);
        ASSERT_ERROR(lookup_in(&m, wrong_level, 2, 1000, 5), EBADMSG);
        ASSERT_ERROR(lookup_in(&m, wrong_level, 3, 1000, 5), EBADMSG);

        /* a truncated node, a node with a bad kind and with a bad varint, under the ids a
         * parent names */
        uint8_t trunc[BV_ID_SIZE], badkind[BV_ID_SIZE], badvar[BV_ID_SIZE];
        len = put_header(node, 0, 1);
        len += put_leaf_data(node + len, 1000, chunk);
        data_id(7, 1, trunc);
        mem_put(&m, trunc, node, len - 1);
        node[8] = 9;
        data_id(7, 2, badkind);
        mem_put(&m, badkind, node, len);
        node[8] = BV_EXTENT_ZERO;
        node[9] = 0x80;
        node[10] = 0x80;
        data_id(7, 3, badvar);
        mem_put(&m, badvar, node, 11);
        ASSERT_ERROR(lookup_in(&m, trunc, 1, 1000, 0), EBADMSG);
        ASSERT_ERROR(lookup_in(&m, badkind, 1, 1000, 0), EBADMSG);
        ASSERT_ERROR(lookup_in(&m, badvar, 1, 1000, 0), EBADMSG);

        /* a node the store does not have: the fetch error passes through */
        ASSERT_ERROR(lookup_in(&m, missing, 1, 1000, 0), ENOENT);

        /* reader arguments */
        ASSERT_ERROR(bv_map_reader_new(top, 0, 1000, mem_fetch, &m, 0, &r), EBADMSG);
        ASSERT_ERROR(bv_map_reader_new(top, 33, 1000, mem_fetch, &m, 0, &r), EBADMSG);
        ASSERT_ERROR(bv_map_reader_new(top, 1, 1000, NULL, &m, 0, &r), EINVAL);
        ASSERT_TRUE(r == NULL);
        mem_done(&m);
}

TEST(builder_errors)
{
        MemStore m;
        BvMapBuilder *b = NULL;
        uint8_t id[BV_ID_SIZE], root[BV_ID_SIZE];
        uint32_t height = 77;

        mem_init(&m);
        data_id(8, 8, id);
        ASSERT_ERROR(bv_map_builder_new(NULL, &m, &b), EINVAL);
        ASSERT_OK(bv_map_builder_new(mem_store, &m, &b));
        ASSERT_ERROR(bv_map_builder_add(b, BV_EXTENT_DATA, 0, id), EINVAL);
        ASSERT_ERROR(bv_map_builder_add(b, BV_EXTENT_DATA, 10, NULL), EINVAL);
        ASSERT_ERROR(bv_map_builder_add(b, (BvExtentKind)0, 10, id), EINVAL);
        ASSERT_ERROR(bv_map_builder_add(b, (BvExtentKind)4, 10, id), EINVAL);
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_HOLE, UINT64_MAX - 5, NULL));
        ASSERT_ERROR(bv_map_builder_add(b, BV_EXTENT_HOLE, 6, NULL), EOVERFLOW);
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_DATA, 5, id));
        ASSERT_OK(bv_map_builder_finish(b, root, &height, NULL));
        ASSERT_EQ(height, 1);
        ASSERT_ERROR(bv_map_builder_add(b, BV_EXTENT_DATA, 5, id), ESTALE);
        ASSERT_ERROR(bv_map_builder_finish(b, root, &height, NULL), ESTALE);
        bv_map_builder_free(b);

        /* a store failure is returned, and sticks */
        b = NULL;
        ASSERT_OK(bv_map_builder_new(mem_store, &m, &b));
        m.fail_store = -EIO;
        ASSERT_OK(bv_map_builder_add(b, BV_EXTENT_ZERO, 4096, NULL));
        ASSERT_ERROR(bv_map_builder_finish(b, root, &height, NULL), EIO);
        ASSERT_EQ(height, 1);
        m.fail_store = 0;
        ASSERT_ERROR(bv_map_builder_finish(b, root, &height, NULL), EIO);
        bv_map_builder_free(b);

        /* a store failure in the middle of adding (1024 entries close a node) */
        b = NULL;
        ASSERT_OK(bv_map_builder_new(mem_store, &m, &b));
        m.fail_store = -ENOSPC;
        int k = 0;
        for (size_t i = 0; i < 2000 && k == 0; i++)
                k = bv_map_builder_add(b, i % 2 ? BV_EXTENT_ZERO : BV_EXTENT_HOLE, 1, NULL);
        ASSERT_EQ(k, -ENOSPC);
        ASSERT_ERROR(bv_map_builder_add(b, BV_EXTENT_DATA, 5, id), ENOSPC);
        bv_map_builder_free(b);
        bv_map_builder_free(NULL);
        bv_map_reader_free(NULL);
        mem_done(&m);
}

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

typedef struct ThreadArgs {
        BvMapReader *r;
        const BvMapExtent *e;
        size_t n;
        uint64_t size, seed;
} ThreadArgs;

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

static void *reader_thread(void *p)
{
        ThreadArgs *a = p;
        uint64_t x = a->seed;
        for (size_t i = 0; i < 20000; i++) {
                uint64_t off = rng_next(&x) % a->size;
                check_extent(a->r, &a->e[find_extent(a->e, a->n, off)], off);
        }
        return NULL;
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
        pthread_t t[4];
        ThreadArgs args[4];

        mem_init(&m);
        build(&m, e, 30000, root, &height, &size);
        size_t n = merge_extents(e, 30000);
        ASSERT_OK(bv_map_reader_new(root, height, size, mem_fetch, &m, 8, &r));
        for (int i = 0; i < 4; i++) {
                args[i] = (ThreadArgs){.r = r, .e = e, .n = n, .size = size, .seed = 1000 + i};
                ASSERT_EQ(pthread_create(&t[i], NULL, reader_thread, &args[i]), 0);
        }
        for (int i = 0; i < 4; i++)
                ASSERT_EQ(pthread_join(t[i], NULL), 0);
        bv_map_reader_free(r);
        mem_done(&m);
        free(e);
}

int main(void)
{
        RUN(empty);
        RUN(one_extent);
        RUN(thousand_extents);
        RUN(many_extents);
        RUN(merges_zero_and_hole_runs);
        RUN(deterministic);
        RUN(change_costs_one_path);
        RUN(insert_resyncs);
        RUN(node_parse_errors);
        RUN(reader_errors);
        RUN(builder_errors);
        RUN(walk);
        RUN(leaf_starts);
        RUN(prefetch);
        RUN(lookup_reads_one_path);
        RUN(threads);
        return 0;
}
