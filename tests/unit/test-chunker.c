/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "chunker-fixture.h"

TEST(kind_names)
{
        BvChunkerKind k = 0;

        ASSERT_STREQ(bv_chunker_kind_name(BV_CHUNKER_HYBRID), "hybrid");
        ASSERT_STREQ(bv_chunker_kind_name(BV_CHUNKER_CDC), "cdc");
        ASSERT_STREQ(bv_chunker_kind_name(BV_CHUNKER_FIXED), "fixed");
        ASSERT_TRUE(bv_chunker_kind_name((BvChunkerKind)0) == NULL);
        ASSERT_TRUE(bv_chunker_kind_name((BvChunkerKind)4) == NULL);
        for (BvChunkerKind i = BV_CHUNKER_HYBRID; i <= BV_CHUNKER_FIXED; i++) {
                ASSERT_OK(bv_chunker_kind_from_name(bv_chunker_kind_name(i), &k));
                ASSERT_EQ(k, i);
        }
        k = BV_CHUNKER_CDC;
        ASSERT_ERROR(bv_chunker_kind_from_name("Hybrid", &k), EINVAL);
        ASSERT_ERROR(bv_chunker_kind_from_name("", &k), EINVAL);
        ASSERT_ERROR(bv_chunker_kind_from_name(NULL, &k), EINVAL);
        ASSERT_ERROR(bv_chunker_kind_from_name("cdc", NULL), EINVAL);
        ASSERT_EQ(k, BV_CHUNKER_CDC);
}

TEST(params_check)
{
        const uint32_t M = BV_CHUNK_MAX_LIMIT;
        static const struct {
                BvChunkerKind kind;
                uint32_t min, avg, max;
                int ret;
        } cases[] = {
                { BV_CHUNKER_HYBRID, 16 * KiB, 64 * KiB, 256 * KiB, 0 },
                { BV_CHUNKER_HYBRID, 4 * KiB, 12 * KiB, 16 * KiB, 0 },
                { BV_CHUNKER_HYBRID, 8 * KiB, 16 * KiB, 20 * KiB, 0 },   /* min = avg/2 */
                { BV_CHUNKER_HYBRID, 4 * KiB, 1020 * KiB, M, 0 },        /* look-back 126, ahead 127 */
                { BV_CHUNKER_HYBRID, 4 * KiB, M - 4 * KiB, M, 0 },      /* the largest windows */
                { BV_CHUNKER_HYBRID, 16 * KiB, 24 * KiB, 28 * KiB, -EINVAL }, /* min > avg/2 */
                { BV_CHUNKER_HYBRID, 36 * KiB, 64 * KiB, 256 * KiB, -EINVAL }, /* min > avg/2 */
                { BV_CHUNKER_HYBRID, 4 * KiB, 8 * KiB, 256 * KiB, -EINVAL }, /* avg < min + 8 KiB */
                { BV_CHUNKER_HYBRID, 16 * KiB + 1, 64 * KiB, 256 * KiB, -EINVAL },
                { BV_CHUNKER_HYBRID, 16 * KiB, 64 * KiB + 512, 256 * KiB, -EINVAL },
                { BV_CHUNKER_HYBRID, 16 * KiB, 64 * KiB, 256 * KiB - 1, -EINVAL },
                { BV_CHUNKER_HYBRID, 0, 64 * KiB, 256 * KiB, -EINVAL },
                { BV_CHUNKER_HYBRID, 16 * KiB, 64 * KiB, 64 * KiB, -EINVAL },
                { BV_CHUNKER_HYBRID, 16 * KiB, 64 * KiB, M + 4 * KiB, -EINVAL },
                { BV_CHUNKER_HYBRID, 1 * MiB, 2 * MiB, M, 0 },
                { BV_CHUNKER_CDC, 16 * KiB, 64 * KiB, 256 * KiB, 0 },
                { BV_CHUNKER_CDC, 5000, 20000, 70001, 0 },
                { BV_CHUNKER_CDC, 4095, 20000, 70000, -EINVAL },
                { BV_CHUNKER_CDC, 20000, 20000, 70000, -EINVAL },
                { BV_CHUNKER_CDC, 5000, 70000, 70000, -EINVAL },
                { BV_CHUNKER_CDC, 5000, 70000, M + 1, -EINVAL },
                { BV_CHUNKER_FIXED, 0, 64 * KiB, 0, 0 },
                { BV_CHUNKER_FIXED, 0, 4 * KiB, 0, 0 },
                { BV_CHUNKER_FIXED, 0, M, 0, 0 },
                { BV_CHUNKER_FIXED, 0, 0, 0, -EINVAL },
                { BV_CHUNKER_FIXED, 0, 6000, 0, -EINVAL },
                { BV_CHUNKER_FIXED, 0, M + 4 * KiB, 0, -EINVAL },
                { (BvChunkerKind)0, 16 * KiB, 64 * KiB, 256 * KiB, -EINVAL },
                { (BvChunkerKind)4, 16 * KiB, 64 * KiB, 256 * KiB, -EINVAL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                BvChunkerParams p = params(cases[i].kind, cases[i].min, cases[i].avg, cases[i].max);
                BvSplitter *s = (BvSplitter *)&p; /* must stay untouched on failure */
                ASSERT_EQ(bv_chunker_params_check(&p), cases[i].ret);
                ASSERT_EQ(bv_splitter_new(&p, &s), cases[i].ret);
                if (cases[i].ret < 0)
                        ASSERT_TRUE(s == (BvSplitter *)&p);
                else
                        bv_splitter_free(s);
        }
        ASSERT_ERROR(bv_chunker_params_check(NULL), EINVAL);
        BvChunkerParams p = defaults(BV_CHUNKER_HYBRID);
        ASSERT_ERROR(bv_splitter_new(NULL, NULL), EINVAL);
        ASSERT_ERROR(bv_splitter_new(&p, NULL), EINVAL);
        bv_splitter_free(NULL);
}

/* Known answers: the first 20 chunk lengths of 4 MiB of bvtest_fill_random(seed 42) with the
 * key 00 01 .. 1f and default sizes. docs/FORMAT.md's rules must reproduce these. */
static const uint32_t kat_hybrid[20] = {
        8192, 36864, 45056, 94208, 73728, 45056, 69632, 40960, 57344, 77824,
        57344, 49152, 69632, 49152, 49152, 57344, 36864, 53248, 53248, 69632,
};
static const uint32_t kat_cdc[20] = {
        117355, 74418, 55773, 103531, 63606, 59517, 54110, 55494, 59027, 35813,
        22854, 61564, 58192, 55014, 54459, 60313, 79924, 83302, 78505, 117330,
};

TEST(known_answers)
{
        static const struct {
                BvChunkerKind kind;
                const uint32_t *lens;
        } kinds[] = { { BV_CHUNKER_HYBRID, kat_hybrid }, { BV_CHUNKER_CDC, kat_cdc } };
        uint8_t *d = random_image(4 * MiB, 42);

        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                BvChunkerParams p = defaults(kinds[k].kind);
                Run r;
                run_init(&r);
                split(&p, d, 4 * MiB, 1 * MiB, &r);
                check_tiling(&r, d, 4 * MiB);
                ASSERT_TRUE(r.n >= 20);
                for (size_t i = 0; i < 20; i++) {
                        if (getenv("BV_PRINT_KAT"))
                                printf("%s %zu: %llu\n", bv_chunker_kind_name(kinds[k].kind), i,
                                       (unsigned long long)r.v[i].len);
                        else
                                ASSERT_EQ(r.v[i].len, kinds[k].lens[i]);
                }
                run_done(&r);
        }

        /* fixed: every chunk avg bytes, the last one the rest */
        BvChunkerParams p = defaults(BV_CHUNKER_FIXED);
        p.avg = 96 * KiB;
        Run r;
        run_init(&r);
        split(&p, d, 1 * MiB + 100, 70000, &r);
        check_tiling(&r, d, 1 * MiB + 100);
        ASSERT_EQ(r.n, 11);
        for (size_t i = 0; i < 10; i++)
                ASSERT_EQ(r.v[i].len, 96 * KiB);
        ASSERT_EQ(r.v[10].len, 1 * MiB + 100 - 10 * 96 * KiB);
        run_done(&r);
        free(d);
}

static void size_stats(BvChunkerKind kind, const uint8_t *d, size_t len)
{
        BvChunkerParams p = defaults(kind);
        Run r;
        run_init(&r);
        split(&p, d, len, 4 * MiB + 3, &r);
        check_tiling(&r, d, len);

        for (size_t i = 0; i < r.n; i++) {
                ASSERT_EQ(r.v[i].kind, BV_EXTENT_DATA);
                ASSERT_TRUE(r.v[i].len <= p.max);
                if (i + 1 == r.n)
                        continue;
                if (kind == BV_CHUNKER_HYBRID) {
                        ASSERT_EQ(r.v[i].len % BV_BLOCK_SIZE, 0);
                        /* content cuts are at least look-back + 1 = avg/8 KiB blocks apart */
                        if (i > 0 && r.v[i - 1].len < p.max)
                                ASSERT_TRUE(r.v[i].len >= p.avg / 2 && r.v[i].len >= p.min);
                } else
                        ASSERT_TRUE(r.v[i].len >= p.min);
        }
        double mean = (double)len / (double)r.n;
        printf("# %s: %zu chunks over %zu MiB, mean %.1f KiB\n", bv_chunker_kind_name(kind), r.n,
               len / MiB, mean / 1024);
        ASSERT_TRUE(mean > 0.85 * p.avg && mean < 1.15 * p.avg);
        run_done(&r);
}

TEST(sizes_and_averages)
{
        size_t len = 64 * MiB;
        uint8_t *d = random_image(len, 5);
        size_stats(BV_CHUNKER_HYBRID, d, len);
        size_stats(BV_CHUNKER_CDC, d, len);
        free(d);
}

TEST(empty_input)
{
        for (BvChunkerKind k = BV_CHUNKER_HYBRID; k <= BV_CHUNKER_FIXED; k++) {
                BvChunkerParams p = defaults(k);
                Run r;
                run_init(&r);
                split(&p, NULL, 0, 1, &r);
                ASSERT_EQ(r.n, 0);
                run_done(&r);
        }
}

static void expect(const Run *r, size_t i, BvExtentKind kind, uint64_t off, uint64_t len)
{
        ASSERT_TRUE(i < r->n);
        ASSERT_EQ(r->v[i].kind, kind);
        ASSERT_EQ(r->v[i].off, off);
        ASSERT_EQ(r->v[i].len, len);
}

/* Hybrid, a run of n < look-back + look-ahead + 1 full data blocks between barriers is
 * shorter than the cut window: content never cuts it, it is one chunk. Checks the extent at
 * index *i. (d is unused: kept so the call sites read alike for every run.) */
static void expect_short_run(const Run *r, size_t *i, const uint8_t *d, uint64_t off, size_t n)
{
        (void)d;
        expect(r, (*i)++, BV_EXTENT_DATA, off, n * BV_BLOCK_SIZE);
}

TEST(zero_blocks)
{
        /* data [0, 10000), zeros [10000, 30000), data [30000, 40000), zeros to 60000 */
        size_t len = 60000;
        uint8_t *d = random_image(len, 3);
        memset(d + 10000, 0, 20000);
        memset(d + 40000, 0, 20000);

        for (BvChunkerKind k = BV_CHUNKER_HYBRID; k <= BV_CHUNKER_FIXED; k++) {
                BvChunkerParams p = defaults(k);
                Run r;
                size_t i = 0;
                run_init(&r);
                split(&p, d, len, -5000, &r);
                check_tiling(&r, d, len);
                if (k == BV_CHUNKER_HYBRID)
                        expect_short_run(&r, &i, d, 0, 3); /* cell 2 holds data bytes */
                else
                        expect(&r, i++, BV_EXTENT_DATA, 0, 12288);
                expect(&r, i++, BV_EXTENT_ZERO, 12288, 28672 - 12288); /* cells 3..6 */
                if (k == BV_CHUNKER_HYBRID)
                        expect_short_run(&r, &i, d + 28672, 28672, 3);
                else
                        expect(&r, i++, BV_EXTENT_DATA, 28672, 40960 - 28672);
                expect(&r, i++, BV_EXTENT_ZERO, 40960, len - 40960); /* the partial last cell too */
                ASSERT_EQ(r.n, i);
                run_done(&r);
        }
        free(d);
}

TEST(zero_run_forces_cut_and_never_hits)
{
        /* hybrid: whatever precedes a zero run is cut there; zero blocks take no part in the
         * windows, so the blocks after a run are judged as at a stream start */
        size_t len = 8 * MiB;
        uint8_t *d = random_image(len, 11);
        for (size_t off = 1 * MiB; off < len; off += 1 * MiB)
                memset(d + off - 64 * KiB, 0, 64 * KiB);

        BvChunkerParams p = defaults(BV_CHUNKER_HYBRID);
        Run r;
        run_init(&r);
        split(&p, d, len, -300000, &r);
        check_tiling(&r, d, len);
        size_t zeros = 0;
        for (size_t i = 0; i < r.n; i++)
                if (r.v[i].kind == BV_EXTENT_ZERO) {
                        zeros++;
                        ASSERT_EQ(r.v[i].len, 64 * KiB);
                        ASSERT_EQ((r.v[i].off + r.v[i].len) % MiB, 0);
                        ASSERT_EQ(r.v[i - 1].kind, BV_EXTENT_DATA);
                }
        ASSERT_EQ(zeros, 7);
        run_done(&r);
        free(d);
}

TEST(partial_last_block)
{
        uint8_t *d = random_image(20000, 4);
        for (BvChunkerKind k = BV_CHUNKER_HYBRID; k <= BV_CHUNKER_FIXED; k++) {
                BvChunkerParams p = defaults(k);
                Run r;

                run_init(&r);
                split(&p, d, 10000, 777, &r);
                check_tiling(&r, d, 10000); /* hybrid may cut after block 0 or 1 */
                ASSERT_EQ(r.v[r.n - 1].kind, BV_EXTENT_DATA);
                ASSERT_EQ(r.v[r.n - 1].off % BV_BLOCK_SIZE, 0);
                ASSERT_TRUE(r.v[r.n - 1].len > 10000 % BV_BLOCK_SIZE);
                if (k != BV_CHUNKER_HYBRID)
                        ASSERT_EQ(r.n, 1);
                run_done(&r);

                memset(d + 8192, 0, 1000); /* a zero partial block at the end is a ZERO extent */
                run_init(&r);
                split(&p, d, 9192, 9192, &r);
                check_tiling(&r, d, 9192);
                ASSERT_TRUE(r.n >= 2);
                ASSERT_EQ(r.v[r.n - 2].kind, BV_EXTENT_DATA);
                expect(&r, r.n - 1, BV_EXTENT_ZERO, 8192, 1000);
                run_done(&r);
                bvtest_fill_random(d, 20000, 4);
        }
        free(d);
}

TEST(holes)
{
        uint8_t *d = random_image(64 * KiB, 8);
        BvChunkerParams p = defaults(BV_CHUNKER_HYBRID);
        BvSplitter *s = NULL;
        Run r;

        memset(d + 12 * KiB, 0, 8 * KiB);
        run_init(&r);
        ASSERT_OK(bv_splitter_new(&p, &s));
        ASSERT_OK(bv_splitter_feed(s, 0, d, 8 * KiB, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 8 * KiB, 3 * KiB, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 11 * KiB, 0, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 11 * KiB, 1 * KiB, collect_cb, &r)); /* coalesced */
        ASSERT_OK(bv_splitter_feed(s, 12 * KiB, d + 12 * KiB, 8 * KiB, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 20 * KiB, 4 * KiB, collect_cb, &r)); /* not merged into zeros */
        /* unaligned: data 5000 bytes, hole 3000, then data again ending mid-cell before a hole */
        ASSERT_OK(bv_splitter_feed(s, 24 * KiB, d, 5000, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 24 * KiB + 5000, 3000, collect_cb, &r));
        ASSERT_OK(bv_splitter_feed(s, 24 * KiB + 8000, d + 100, 5000, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 24 * KiB + 13000, 40 * KiB - 37576, collect_cb, &r));
        /* a zero piece cut short by a hole */
        ASSERT_OK(bv_splitter_feed(s, 40 * KiB, d + 12 * KiB, 100, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 40 * KiB + 100, 10, collect_cb, &r));
        ASSERT_OK(bv_splitter_finish(s, collect_cb, &r));
        bv_splitter_free(s);

        /* a run of full data blocks ends at every hole and partial piece; runs this short are
         * never cut by content, so data between two holes is one chunk */
        size_t i = 0;
        expect_short_run(&r, &i, d, 0, 2);
        expect(&r, i++, BV_EXTENT_HOLE, 8 * KiB, 4 * KiB);
        expect(&r, i++, BV_EXTENT_ZERO, 12 * KiB, 8 * KiB);
        expect(&r, i++, BV_EXTENT_HOLE, 20 * KiB, 4 * KiB);
        expect(&r, i++, BV_EXTENT_DATA, 24 * KiB, 5000); /* a partial piece is never a cut */
        expect(&r, i++, BV_EXTENT_HOLE, 24 * KiB + 5000, 3000);
        expect(&r, i++, BV_EXTENT_DATA, 24 * KiB + 8000, 5000);
        expect(&r, i++, BV_EXTENT_HOLE, 37576, 40 * KiB - 37576);
        expect(&r, i++, BV_EXTENT_ZERO, 40 * KiB, 100);
        expect(&r, i++, BV_EXTENT_HOLE, 40 * KiB + 100, 10);
        ASSERT_EQ(r.n, i);
        run_done(&r);
        free(d);
}

/* Content cuts (ends of chunks shorter than max, but the last) of a run, as image offsets. */
static size_t content_cuts(const Run *r, uint32_t max, uint64_t *cuts)
{
        size_t n = 0;
        for (size_t i = 0; i + 1 < r->n; i++)
                if (r->v[i].len < max)
                        cuts[n++] = r->v[i].off + r->v[i].len;
        return n;
}

/* Content cuts of a, mapped to the image without ins bytes inserted at x (ins 0: the original),
 * leaving out those whose windows may see the change: the cuts after cells x/4K - ahead ..
 * x/4K + back (both images agree there on every other cut). */
static size_t cuts_away_from(const Run *r, const BvChunkerParams *p, uint64_t x, uint64_t ins,
                             uint64_t *cuts)
{
        uint64_t back = p->avg / 2 / BV_BLOCK_SIZE - 1, ahead = p->avg / 2 / BV_BLOCK_SIZE;
        size_t n = content_cuts(r, p->max, cuts), m = 0;

        for (size_t i = 0; i < n; i++) {
                if (cuts[i] + ahead * BV_BLOCK_SIZE <= x)
                        cuts[m++] = cuts[i];
                else if (cuts[i] >= x + ins + (back + 1) * BV_BLOCK_SIZE)
                        cuts[m++] = cuts[i] - ins;
        }
        return m;
}

/* Hybrid resynchronises both ways around a change: a cut after cell c depends only on cells
 * c - back .. c + ahead, never on where the previous cut fell. */
static void check_resync(const uint8_t *orig, size_t len, uint64_t x, uint64_t ins)
{
        uint8_t *e = malloc(len + ins);
        BvChunkerParams p = defaults(BV_CHUNKER_HYBRID);
        uint64_t *a = calloc(len / BV_BLOCK_SIZE, sizeof(uint64_t));
        uint64_t *b = calloc((len + ins) / BV_BLOCK_SIZE, sizeof(uint64_t));
        Run rd, re;

        ASSERT_TRUE(e && a && b);
        memcpy(e, orig, x);
        bvtest_fill_random(e + x, ins, x + ins + 1);
        memcpy(e + x + ins, orig + x, len - x);
        run_init(&rd);
        run_init(&re);
        split(&p, orig, len, -150000, &rd);
        split(&p, e, len + ins, -150000, &re);
        size_t na = cuts_away_from(&rd, &p, x, 0, a), nb = cuts_away_from(&re, &p, x, ins, b);
        size_t before = 0;
        while (before < na && a[before] < x)
                before++;
        ASSERT_TRUE(na - before > 20);
        ASSERT_TRUE(x == 0 || before > 10);
        ASSERT_EQ(na, nb);
        for (size_t i = 0; i < na; i++)
                ASSERT_EQ(a[i], b[i]);
        run_done(&rd);
        run_done(&re);
        free(a);
        free(b);
        free(e);
}

TEST(hybrid_resynchronises_after_insert)
{
        const size_t len = 4 * MiB;
        uint8_t *d = random_image(len, 61);

        check_resync(d, len, 0, 3 * BV_BLOCK_SIZE);        /* blocks inserted at the start */
        check_resync(d, len, 2 * MiB, 3 * BV_BLOCK_SIZE);  /* in the middle */
        check_resync(d, len, 1 * MiB + 40 * KiB, 1 * MiB); /* a whole MiB */
        free(d);
}

/* An image with every feature: data, zero runs (aligned and not), a partial last block. */
static uint8_t *mixed_image(size_t len, uint64_t seed)
{
        uint8_t *d = random_image(len, seed);
        uint64_t x = seed;
        for (int i = 0; i < 40; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = (size_t)(x >> 20) % len, n = (size_t)(x >> 40) % (300 * KiB);
                memset(d + at, 0, MIN(n, len - at));
        }
        return d;
}

TEST(feed_sizes_do_not_matter)
{
        size_t len = 6 * MiB + 1234;
        uint8_t *d = mixed_image(len, 21);

        for (BvChunkerKind k = BV_CHUNKER_HYBRID; k <= BV_CHUNKER_FIXED; k++) {
                BvChunkerParams p = defaults(k);
                Run whole, rnd, small;
                run_init(&whole);
                run_init(&rnd);
                run_init(&small);
                split(&p, d, len, (long)len, &whole);
                check_tiling(&whole, d, len);
                split(&p, d, len, -200000, &rnd);
                assert_same(&whole, &rnd);
                /* against a prefix: ends differ, for hybrid also the cuts whose look-ahead
                 * reaches the prefix's end */
                split(&p, d, 1 * MiB + 17, -9000, &small);
                uint64_t same = 1 * MiB + 17;
                if (k == BV_CHUNKER_HYBRID)
                        same -= (p.avg / 2 + BV_BLOCK_SIZE);
                ASSERT_TRUE(small.n > 5);
                for (size_t i = 0; i + 1 < small.n && small.v[i].off + small.v[i].len <= same; i++) {
                        ASSERT_EQ(small.v[i].len, whole.v[i].len);
                        ASSERT_EQ(small.v[i].kind, whole.v[i].kind);
                }
                run_done(&small);
                run_init(&small);
                split(&p, d, 512 * KiB + 5, -17, &small);
                check_tiling(&small, d, 512 * KiB + 5);
                run_done(&whole);
                run_init(&whole);
                split(&p, d, 512 * KiB + 5, 512 * KiB + 5, &whole);
                assert_same(&whole, &small);
                run_done(&whole);
                run_done(&rnd);
                run_done(&small);
        }
        free(d);
}

/* Restarting at offset+L equals chunking the rest as a fresh stream that begins there (after a
 * hole, so that zero blocks stay aligned to image offsets). */
static void check_restart(BvChunkerKind kind, const uint8_t *d, size_t len, size_t at, uint64_t l,
                          size_t count)
{
        BvChunkerParams p = defaults(kind);
        Run plain, re, fresh;

        run_init(&plain);
        split(&p, d, len, -100000, &plain);
        run_init(&re);
        re.restart_at = at;
        re.restart_len = l;
        re.restart_count = count;
        split(&p, d, len, -100000, &re);
        check_tiling(&re, d, len);
        ASSERT_EQ(re.restarts, count);

        /* the extents before the restart are unchanged */
        size_t i = 0, data = 0;
        for (; data < at || re.v[i].kind != BV_EXTENT_DATA; i++) {
                ASSERT_EQ(re.v[i].len, plain.v[i].len);
                data += re.v[i].kind == BV_EXTENT_DATA;
        }
        for (size_t c = 0; c < count; c++) {
                ASSERT_EQ(re.v[i].kind, BV_EXTENT_DATA);
                ASSERT_EQ(re.v[i++].len, l);
        }
        uint64_t base = re.v[i].off;
        BvSplitter *s = NULL;
        run_init(&fresh);
        ASSERT_OK(bv_splitter_new(&p, &s));
        ASSERT_OK(bv_splitter_hole(s, 0, base, collect_cb, &fresh));
        ASSERT_OK(bv_splitter_feed(s, base, d + base, len - base, collect_cb, &fresh));
        ASSERT_OK(bv_splitter_finish(s, collect_cb, &fresh));
        bv_splitter_free(s);
        expect(&fresh, 0, BV_EXTENT_HOLE, 0, base);
        ASSERT_EQ(fresh.n - 1, re.n - i);
        for (size_t j = 1; j < fresh.n; j++) {
                ASSERT_EQ(fresh.v[j].kind, re.v[i + j - 1].kind);
                ASSERT_EQ(fresh.v[j].off, re.v[i + j - 1].off);
                ASSERT_EQ(fresh.v[j].len, re.v[i + j - 1].len);
        }
        run_done(&plain);
        run_done(&re);
        run_done(&fresh);
}

TEST(restart)
{
        size_t len = 4 * MiB;
        uint8_t *d = random_image(len, 31);

        check_restart(BV_CHUNKER_HYBRID, d, len, 3, 8 * KiB, 1);
        check_restart(BV_CHUNKER_HYBRID, d, len, 1, 4 * KiB, 3); /* restarts in a row (each
                                                                 * restarted chunk > 4 KiB) */
        check_restart(BV_CHUNKER_CDC, d, len, 2, 1000, 1);
        check_restart(BV_CHUNKER_CDC, d, len, 5, 4096, 2);
        check_restart(BV_CHUNKER_FIXED, d, len, 1, 12 * KiB, 1);

        /* a restart in a chunk cut short by a zero run and in the last chunk */
        memset(d + 1 * MiB, 0, 64 * KiB);
        for (BvChunkerKind k = BV_CHUNKER_HYBRID; k <= BV_CHUNKER_FIXED; k++) {
                BvChunkerParams p = defaults(k);
                Run r;
                run_init(&r);
                split(&p, d, len, 1 * MiB, &r);
                size_t before_zero = 0, last = r.n_data - 1, n = 0;
                for (size_t i = 0; i < r.n; i++) {
                        if (r.v[i].kind == BV_EXTENT_ZERO)
                                before_zero = n - 1; /* the data chunk the zero run cut short */
                        n += r.v[i].kind == BV_EXTENT_DATA;
                }
                run_done(&r);
                check_restart(k, d, len, before_zero, 4 * KiB, 1);
                check_restart(k, d, len, last, 4 * KiB, 1);
        }
        free(d);
}

/* collect_cb with restarts by offset: a DATA extent longer than 8 KiB whose offset in blocks
 * is `rest` modulo `mod` is cut after 4 KiB (mod 0: never). */
typedef struct ModRun {
        Run run;
        uint64_t mod, rest;
} ModRun;

static int mod_cb(const BvExtent *e, void *userdata)
{
        ModRun *m = userdata;

        m->run.restart_at = SIZE_MAX;
        if (e->kind == BV_EXTENT_DATA && m->mod && e->length > 8 * KiB &&
            (e->offset / BV_BLOCK_SIZE) % m->mod == m->rest) {
                m->run.restart_at = m->run.n_data;
                m->run.restart_count = 1;
                m->run.restart_len = 4 * KiB;
        }
        return collect_cb(e, &m->run);
}

/* The batch callback over mod_cb: extents in order up to the first restart. */
static int batch_collect(const BvExtent *e, size_t n, size_t *ret_taken, void *userdata)
{
        for (size_t i = 0; i < n; i++) {
                int r = mod_cb(&e[i], userdata);
                if (r != 0) {
                        *ret_taken = i;
                        return r;
                }
        }
        *ret_taken = n;
        return 0;
}

/* Splits d with random feed sizes and batches of `bytes` (0: one by one); a hole of hole_len
 * at hole_at (none when 0). */
static void split_batched(const BvChunkerParams *p, const uint8_t *d, size_t len, size_t bytes, size_t hole_at,
                          size_t hole_len, ModRun *m)
{
        BvSplitter *s = NULL;
        uint64_t x = 99;

        ASSERT_OK(bv_splitter_new(p, &s));
        if (bytes)
                ASSERT_OK(bv_splitter_set_batch(s, bytes, batch_collect, m));
        for (size_t off = 0; off < len;) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t n = MIN(1 + (size_t)(x % 300000), len - off);
                if (hole_len && off == hole_at) {
                        ASSERT_OK(bv_splitter_hole(s, off, hole_len, mod_cb, m));
                        off += hole_len;
                        continue;
                }
                if (hole_len && off < hole_at)
                        n = MIN(n, hole_at - off);
                ASSERT_OK(bv_splitter_feed(s, off, d + off, n, mod_cb, m));
                off += n;
        }
        ASSERT_OK(bv_splitter_finish(s, mod_cb, m));
        bv_splitter_free(s);
}

/* Batches hand over exactly the extents, cuts and restarts of the one-by-one callback, with
 * restarts anywhere in a batch, for all three chunkers, across zero runs and a hole. */
TEST(batches_are_one_by_one)
{
        size_t len = 6 * MiB + 777, hole_at = 3 * MiB + 5, hole_len = 200 * KiB + 3;
        uint8_t *d = mixed_image(len, 41);
        static const size_t sizes[] = { 1, 4 * KiB, 100 * KiB, 1 * MiB, 64 * MiB };
        static const uint64_t mods[][2] = { { 0, 0 }, { 5, 2 }, { 2, 1 }, { 11, 0 } };

        for (BvChunkerKind k = BV_CHUNKER_HYBRID; k <= BV_CHUNKER_FIXED; k++)
                for (size_t mi = 0; mi < ELEMENTSOF(mods); mi++)
                        for (size_t hole = 0; hole < 2; hole++) {
                                BvChunkerParams p = defaults(k);
                                ModRun one = { .mod = mods[mi][0], .rest = mods[mi][1] };
                                run_init(&one.run);
                                split_batched(&p, d, len, 0, hole_at, hole ? hole_len : 0, &one);
                                check_tiling(&one.run, d, len);
                                ASSERT_TRUE(mods[mi][0] == 0 ? one.run.restarts == 0 : one.run.restarts >= 3);
                                for (size_t si = 0; si < ELEMENTSOF(sizes); si++) {
                                        ModRun b = { .mod = one.mod, .rest = one.rest };
                                        run_init(&b.run);
                                        split_batched(&p, d, len, sizes[si], hole_at, hole ? hole_len : 0, &b);
                                        assert_same(&one.run, &b.run);
                                        ASSERT_EQ(b.run.restarts, one.run.restarts);
                                        run_done(&b.run);
                                }
                                run_done(&one.run);
                        }
        free(d);
}

static int feed_all(BvSplitter *s, const uint8_t *d, size_t len, Run *r)
{
        int ret = bv_splitter_feed(s, 0, d, len, collect_cb, r);
        if (ret < 0)
                return ret;
        return bv_splitter_finish(s, collect_cb, r);
}

TEST(callback_errors)
{
        size_t len = 1 * MiB;
        uint8_t *d = random_image(len, 77);
        memset(d + 512 * KiB, 0, 8 * KiB);
        BvChunkerParams p = defaults(BV_CHUNKER_HYBRID);
        BvSplitter *s = NULL;
        Run r;

        /* an error stops the feed, is returned, and sticks */
        run_init(&r);
        r.fail_at = 2;
        r.fail_ret = -EIO;
        ASSERT_OK(bv_splitter_new(&p, &s));
        ASSERT_ERROR(bv_splitter_feed(s, 0, d, len, collect_cb, &r), EIO);
        ASSERT_EQ(r.n, 2);
        ASSERT_ERROR(bv_splitter_feed(s, len, d, 1, collect_cb, &r), EIO);
        ASSERT_ERROR(bv_splitter_hole(s, len, 1, collect_cb, &r), EIO);
        ASSERT_ERROR(bv_splitter_finish(s, collect_cb, &r), EIO);
        bv_splitter_free(s);
        run_done(&r);

        /* from finish (the last chunk), and from a hole's flush */
        run_init(&r);
        ASSERT_OK(bv_splitter_new(&p, &s));
        ASSERT_OK(bv_splitter_feed(s, 0, d, 100 * KiB, collect_cb, &r));
        r.fail_at = r.n; /* the pending last chunk */
        r.fail_ret = -ENOSPC;
        ASSERT_ERROR(bv_splitter_finish(s, collect_cb, &r), ENOSPC);
        bv_splitter_free(s);
        run_done(&r);
        run_init(&r);
        ASSERT_OK(bv_splitter_new(&p, &s));
        ASSERT_OK(bv_splitter_feed(s, 0, d, 100, collect_cb, &r));
        r.fail_at = 0;
        r.fail_ret = -EBADMSG;
        ASSERT_ERROR(bv_splitter_hole(s, 100, 4096, collect_cb, &r), EBADMSG);
        bv_splitter_free(s);
        run_done(&r);

        /* protocol violations by the callback: L >= length, hybrid L not a block multiple,
         * a prefix of a ZERO extent */
        static const struct {
                size_t fail_at;
                int fail_ret;
                size_t restart_at;
                int zero_ret;
        } bad[] = {
                { 0, 256 * KiB + 1, SIZE_MAX, 0 },   /* L >= length */
                { SIZE_MAX, 0, 1, 0 },               /* 5000: not a block multiple */
                { SIZE_MAX, 0, SIZE_MAX, 4096 },     /* a prefix of a ZERO extent */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                run_init(&r);
                r.fail_at = bad[i].fail_at;
                r.fail_ret = bad[i].fail_ret;
                r.restart_at = bad[i].restart_at;
                r.restart_count = 1;
                r.restart_len = 5000;
                r.zero_ret = bad[i].zero_ret;
                ASSERT_OK(bv_splitter_new(&p, &s));
                ASSERT_ERROR(feed_all(s, d, len, &r), EINVAL);
                bv_splitter_free(s);
                run_done(&r);
        }
        free(d);
}

TEST(usage_errors)
{
        uint8_t d[8192] = { 1 };
        BvChunkerParams p = defaults(BV_CHUNKER_CDC);
        BvSplitter *s = NULL;
        Run r;

        run_init(&r);
        ASSERT_OK(bv_splitter_new(&p, &s));
        ASSERT_ERROR(bv_splitter_feed(s, 1, d, 10, collect_cb, &r), EINVAL); /* must start at 0 */
        ASSERT_ERROR(bv_splitter_feed(s, 0, NULL, 10, collect_cb, &r), EINVAL);
        ASSERT_ERROR(bv_splitter_feed(s, 0, d, 10, NULL, &r), EINVAL);
        ASSERT_ERROR(bv_splitter_feed(NULL, 0, d, 10, collect_cb, &r), EINVAL);
        ASSERT_OK(bv_splitter_feed(s, 0, d, 100, collect_cb, &r));
        ASSERT_ERROR(bv_splitter_hole(s, 99, 10, collect_cb, &r), EINVAL);
        ASSERT_ERROR(bv_splitter_hole(s, 100, UINT64_MAX, collect_cb, &r), EINVAL);
        ASSERT_ERROR(bv_splitter_hole(NULL, 100, 1, collect_cb, &r), EINVAL);
        ASSERT_OK(bv_splitter_feed(s, 100, d, 0, collect_cb, &r));
        ASSERT_OK(bv_splitter_hole(s, 100, 10, collect_cb, &r));
        ASSERT_ERROR(bv_splitter_feed(s, 100, d, 1, collect_cb, &r), EINVAL);
        ASSERT_ERROR(bv_splitter_finish(NULL, collect_cb, &r), EINVAL);
        ASSERT_ERROR(bv_splitter_finish(s, NULL, &r), EINVAL);
        ASSERT_OK(bv_splitter_finish(s, collect_cb, &r));
        ASSERT_EQ(r.n, 2);
        ASSERT_ERROR(bv_splitter_feed(s, 110, d, 1, collect_cb, &r), EINVAL); /* finished */
        ASSERT_ERROR(bv_splitter_finish(s, collect_cb, &r), EINVAL);
        bv_splitter_free(s);
        run_done(&r);
}

int main(void)
{
        RUN(kind_names);
        RUN(params_check);
        RUN(known_answers);
        RUN(sizes_and_averages);
        RUN(empty_input);
        RUN(zero_blocks);
        RUN(zero_run_forces_cut_and_never_hits);
        RUN(partial_last_block);
        RUN(holes);
        RUN(hybrid_resynchronises_after_insert);
        RUN(feed_sizes_do_not_matter);
        RUN(restart);
        RUN(batches_are_one_by_one);
        RUN(callback_errors);
        RUN(usage_errors);
        return 0;
}
