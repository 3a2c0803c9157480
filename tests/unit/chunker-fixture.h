/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the chunker tests share: a Run collects the extents a splitter emits (with restarts and
 * failures on demand), split() feeds data in steps, check_tiling() checks the extents tile it. */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockscan.h"
#include "bvtest.h"
#include "chunker.h"
#include "hash.h"
#include "macro.h"

#define KiB (1024u)
#define MiB (1024u * 1024u)

typedef struct Ext {
        BvExtentKind kind;
        uint64_t off, len;
        uint8_t id[BV_HASH_SIZE]; /* SHA-256 of DATA */
} Ext;

/* A forced-end chunk the dedup simulation may take as a prefix of a later chunk. */
typedef struct Forced {
        const uint8_t *data;
        size_t len;
} Forced;

typedef struct Run {
        Ext *v;
        size_t n, cap;
        size_t n_data;
        /* control: restart the data chunk with index restart_at (restart_count times in a row) */
        size_t restart_at, restart_count;
        uint64_t restart_len;
        size_t fail_at; /* extent index at which to return fail_ret */
        int fail_ret;
        int zero_ret; /* returned for ZERO/HOLE extents */
        const Forced *forced;
        size_t n_forced;
        uint64_t restarts;
} Run;

static inline void run_init(Run *r)
{
        *r = (Run){ .restart_at = SIZE_MAX, .fail_at = SIZE_MAX };
}

static inline void run_done(Run *r)
{
        free(r->v);
        r->v = NULL;
        r->n = r->cap = 0;
}

static inline int forced_prefix(Run *r, const BvExtent *e)
{
        for (size_t i = 0; i < r->n_forced; i++)
                if (r->forced[i].len < e->length &&
                    memcmp(r->forced[i].data, e->data, r->forced[i].len) == 0)
                        return (int)r->forced[i].len;
        return 0;
}

static inline int collect_cb(const BvExtent *e, void *userdata)
{
        Run *r = userdata;
        uint64_t len = e->length;
        int ret = 0;

        if (r->n == r->fail_at)
                return r->fail_ret;
        if (e->kind == BV_EXTENT_DATA) {
                ASSERT_TRUE(e->data && len > 0);
                if (r->n_data >= r->restart_at && r->n_data < r->restart_at + r->restart_count) {
                        ASSERT_TRUE(r->restart_len < len);
                        ret = (int)r->restart_len;
                } else if (r->forced)
                        ret = forced_prefix(r, e);
                if (ret > 0) {
                        len = (uint64_t)ret;
                        r->restarts++;
                }
        } else {
                ASSERT_TRUE(!e->data);
                if (r->zero_ret)
                        return r->zero_ret;
        }
        if (r->n == r->cap) {
                r->cap = r->cap ? 2 * r->cap : 256;
                r->v = realloc(r->v, r->cap * sizeof(Ext));
                ASSERT_TRUE(r->v);
        }
        Ext *x = &r->v[r->n++];
        *x = (Ext){ .kind = e->kind, .off = e->offset, .len = len };
        if (e->kind == BV_EXTENT_DATA) {
                bv_sha256(e->data, len, x->id);
                r->n_data++;
        }
        return ret;
}

static inline BvChunkerParams params(BvChunkerKind kind, uint32_t min, uint32_t avg, uint32_t max)
{
        BvChunkerParams p = { .kind = kind, .min = min, .avg = avg, .max = max };
        for (unsigned i = 0; i < 32; i++)
                p.key[i] = (uint8_t)i;
        return p;
}

static inline BvChunkerParams defaults(BvChunkerKind kind)
{
        return params(kind, BV_CHUNK_MIN_DEFAULT, BV_CHUNK_AVG_DEFAULT, BV_CHUNK_MAX_DEFAULT);
}

/* Splits data as one stream; feed sizes are `step` bytes, or random in [1, -step] if negative. */
static inline void split(const BvChunkerParams *p, const uint8_t *data, size_t len, long step, Run *r)
{
        BvSplitter *s = NULL;
        uint64_t x = 12345;

        ASSERT_OK(bv_splitter_new(p, &s));
        for (size_t off = 0; off < len;) {
                size_t n = (size_t)step;
                if (step < 0) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        n = 1 + (size_t)(x % (uint64_t)-step);
                }
                n = MIN(n, len - off);
                ASSERT_OK(bv_splitter_feed(s, off, data + off, n, collect_cb, r));
                off += n;
        }
        ASSERT_OK(bv_splitter_finish(s, collect_cb, r));
        bv_splitter_free(s);
}

/* Extents tile the image in order; DATA extents hold the image's bytes. */
static inline void check_tiling(const Run *r, const uint8_t *data, size_t len)
{
        uint64_t off = 0;
        for (size_t i = 0; i < r->n; i++) {
                const Ext *e = &r->v[i];
                ASSERT_EQ(e->off, off);
                ASSERT_TRUE(e->len > 0);
                if (e->kind == BV_EXTENT_DATA) {
                        uint8_t id[BV_HASH_SIZE];
                        bv_sha256(data + off, e->len, id);
                        ASSERT_MEMEQ(id, e->id, sizeof(id));
                } else if (e->kind == BV_EXTENT_ZERO)
                        ASSERT_TRUE(bv_is_zero(data + off, e->len));
                if (i > 0) /* runs are coalesced */
                        ASSERT_TRUE(e->kind == BV_EXTENT_DATA || e->kind != r->v[i - 1].kind);
                off += e->len;
        }
        ASSERT_EQ(off, len);
}

static inline void assert_same(const Run *a, const Run *b)
{
        ASSERT_EQ(a->n, b->n);
        for (size_t i = 0; i < a->n; i++) {
                ASSERT_EQ(a->v[i].kind, b->v[i].kind);
                ASSERT_EQ(a->v[i].off, b->v[i].off);
                ASSERT_EQ(a->v[i].len, b->v[i].len);
                ASSERT_MEMEQ(a->v[i].id, b->v[i].id, BV_HASH_SIZE);
        }
}

static inline uint8_t *random_image(size_t len, uint64_t seed)
{
        uint8_t *d = malloc(len);
        ASSERT_TRUE(d);
        bvtest_fill_random(d, len, seed);
        return d;
}
