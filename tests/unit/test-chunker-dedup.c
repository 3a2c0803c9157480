/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The chunker's dedup properties (HashBackup's concatenation tests, in-place edits), apart from
 * test-chunker.c: they simulate a repository over tens of MiB. */
#include "chunker-fixture.h"

/* A set of chunk ids (SHA-256), open addressing. */
typedef struct IdSet {
        uint8_t (*ids)[BV_HASH_SIZE];
        size_t cap, n;
} IdSet;

static bool idset_has(const IdSet *s, const uint8_t id[BV_HASH_SIZE])
{
        static const uint8_t empty[BV_HASH_SIZE];
        uint64_t h;
        memcpy(&h, id, sizeof(h));
        for (size_t i = h % s->cap;; i = (i + 1) % s->cap) {
                if (memcmp(s->ids[i], id, BV_HASH_SIZE) == 0)
                        return true;
                if (memcmp(s->ids[i], empty, BV_HASH_SIZE) == 0)
                        return false;
        }
}

static void idset_add_run(IdSet *s, const Run *r)
{
        for (size_t j = 0; j < r->n; j++) {
                if (r->v[j].kind != BV_EXTENT_DATA || idset_has(s, r->v[j].id))
                        continue;
                ASSERT_TRUE(2 * ++s->n < s->cap);
                uint64_t h;
                memcpy(&h, r->v[j].id, sizeof(h));
                size_t i = h % s->cap;
                while (!bv_is_zero(s->ids[i], BV_HASH_SIZE))
                        i = (i + 1) % s->cap;
                memcpy(s->ids[i], r->v[j].id, BV_HASH_SIZE);
        }
}

/* Bytes of a run's DATA extents whose chunk is in the set; all of them in *all. */
static uint64_t seen_bytes(const IdSet *s, const Run *r, uint64_t *all_out)
{
        uint64_t seen = 0, all = 0;
        for (size_t j = 0; j < r->n; j++) {
                if (r->v[j].kind != BV_EXTENT_DATA)
                        continue;
                all += r->v[j].len;
                if (idset_has(s, r->v[j].id))
                        seen += r->v[j].len;
        }
        *all_out += all;
        return seen;
}

static double seen_fraction(const IdSet *s, const Run *r)
{
        uint64_t all = 0, seen = seen_bytes(s, r, &all);
        return all ? (double)seen / (double)all : 0;
}

/* 16 files of 8 MiB one by one, then their concatenation; with the restart trick when
 * `restart`: a chunk whose prefix is a chunk that ended at an end of stream is restarted. */
static double dedup_concat_after_files(const BvChunkerParams *p, bool restart)
{
        const size_t nfiles = 16, flen = 8 * MiB;
        uint8_t *d = random_image(nfiles * flen, 1001);
        IdSet set = { .cap = 1 << 16 };
        Forced forced[16];
        Run r;

        set.ids = calloc(set.cap, BV_HASH_SIZE);
        ASSERT_TRUE(set.ids);
        for (size_t f = 0; f < nfiles; f++) {
                run_init(&r);
                split(p, d + f * flen, flen, 1 * MiB, &r);
                idset_add_run(&set, &r);
                const Ext *last = &r.v[r.n - 1];
                forced[f] = (Forced){ .data = d + f * flen + last->off, .len = last->len };
                run_done(&r);
        }
        run_init(&r);
        if (restart) {
                r.forced = forced;
                r.n_forced = nfiles;
        }
        split(p, d, nfiles * flen, 1 * MiB, &r);
        check_tiling(&r, d, nfiles * flen);
        double frac = seen_fraction(&set, &r);
        run_done(&r);
        free(set.ids);
        free(d);
        return frac;
}

/* 101 files of 1 MiB (d): the concatenation first, then each file. */
#define CONCAT_FILES 101
static double dedup_files_after_concat(const BvChunkerParams *p, const uint8_t *d)
{
        const size_t nfiles = CONCAT_FILES, flen = 1 * MiB;
        IdSet set = { .cap = 1 << 16 };
        uint64_t seen = 0, all = 0;
        Run r;

        set.ids = calloc(set.cap, BV_HASH_SIZE);
        ASSERT_TRUE(set.ids);
        run_init(&r);
        split(p, d, nfiles * flen, 4 * MiB, &r);
        idset_add_run(&set, &r);
        run_done(&r);
        for (size_t f = 0; f < nfiles; f++) {
                run_init(&r);
                split(p, d + f * flen, flen, 1 * MiB, &r);
                seen += seen_bytes(&set, &r, &all);
                run_done(&r);
        }
        free(set.ids);
        return (double)seen / (double)all;
}

/* 64 MiB image, one random 4 KiB block per MiB rewritten: the fraction of new bytes. */
static double inplace_new_fraction(const BvChunkerParams *p)
{
        const size_t len = 64 * MiB;
        uint8_t *d = random_image(len, 3003);
        IdSet set = { .cap = 1 << 16 };
        uint64_t x = 99;
        Run r;

        set.ids = calloc(set.cap, BV_HASH_SIZE);
        ASSERT_TRUE(set.ids);
        run_init(&r);
        split(p, d, len, 4 * MiB, &r);
        idset_add_run(&set, &r);
        run_done(&r);
        for (size_t m = 0; m < len / MiB; m++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                size_t blk = (size_t)(x >> 33) % (MiB / BV_BLOCK_SIZE);
                bvtest_fill_random(d + m * MiB + blk * BV_BLOCK_SIZE, BV_BLOCK_SIZE, x | 1);
        }
        run_init(&r);
        split(p, d, len, 4 * MiB, &r);
        double frac = 1.0 - seen_fraction(&set, &r);
        run_done(&r);
        free(set.ids);
        free(d);
        return frac;
}

TEST(dedup_properties)
{
        BvChunkerParams h = defaults(BV_CHUNKER_HYBRID), c = defaults(BV_CHUNKER_CDC);
        BvChunkerParams f = defaults(BV_CHUNKER_FIXED);

        uint8_t *d = random_image(CONCAT_FILES * MiB, 2002);
        double h1 = dedup_concat_after_files(&h, false), h1r = dedup_concat_after_files(&h, true);
        double c1 = dedup_concat_after_files(&c, false), c1r = dedup_concat_after_files(&c, true);
        double h2 = 1, h2sum = 0, c2 = dedup_files_after_concat(&c, d);
        double hi = inplace_new_fraction(&h), fi = inplace_new_fraction(&f);

        /* cut points are keyed: (b) must hold for every key, not on average */
        const unsigned nkeys = 8;
        for (unsigned k = 0; k < nkeys; k++) {
                BvChunkerParams hk = h;
                for (unsigned i = 0; i < 32; i++)
                        hk.key[i] = (uint8_t)(i + 32 * k); /* key 0: the default test key */
                double v = dedup_files_after_concat(&hk, d);
                printf("# 101 x 1 MiB files after their concat, hybrid, key %u: %.2f%%\n", k, 100 * v);
                ASSERT_TRUE(v >= 0.90);
                h2 = MIN(h2, v);
                h2sum += v;
        }
        free(d);

        printf("# concat after 16 x 8 MiB files: hybrid %.2f%% (restart %.2f%%), "
               "cdc %.2f%% (restart %.2f%%)\n",
               100 * h1, 100 * h1r, 100 * c1, 100 * c1r);
        printf("# 101 x 1 MiB files after their concat: hybrid min %.2f%% mean %.2f%% over %u keys, "
               "cdc %.2f%%\n",
               100 * h2, 100 * h2sum / nkeys, nkeys, 100 * c2);
        printf("# 1 block per MiB rewritten, new bytes: hybrid %.2f%%, fixed-64K %.2f%%\n", 100 * hi,
               100 * fi);
        ASSERT_TRUE(h1 > 0.975);
        ASSERT_TRUE(h1r >= 0.995);
        ASSERT_TRUE(c1 > 0.975);
        ASSERT_TRUE(c1r >= 0.995);
        ASSERT_TRUE(h2 >= 0.90);
        ASSERT_TRUE(c2 >= 0.80);
        ASSERT_TRUE(hi < 0.15);
        ASSERT_TRUE(fi < 0.07);
}

int main(void)
{
        RUN(dedup_properties);
        return 0;
}
