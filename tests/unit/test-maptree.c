/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The map tree against an in-memory node store: lookups, determinism, reuse, corruption. */
#include "maptree-mem.h"

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
        return 0;
}
