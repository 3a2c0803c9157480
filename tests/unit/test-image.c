/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "image.h"
#include "repo-fixture.h"

#define LAYOUT "rrzzhhhhrdrrrrzrrrhhrrrrrrrrrrzzzzrrrrdrrrrrrrrrhh"

typedef struct Ctx {
        RepoFixture f;
        char *src, *id;
        uint8_t *data;
        size_t len;
        BvRepo *r;
        const BvSnapshot *snap;
} Ctx;

static Ctx ctx_new(const char *layout)
{
        Ctx c = { .f = fixture_repo() };

        c.src = fixture_image(&c.f, "src.img", layout, 21);
        c.id = fixture_backup(&c.f, c.src);
        c.data = fixture_read_file(c.src, &c.len);
        ASSERT_OK(bv_repo_open(c.f.repo, &c.f.secret, BV_OPEN_READ, &c.r));
        ASSERT_OK(bv_repo_find_snapshot(c.r, c.id, &c.snap));
        return c;
}

static void ctx_free(Ctx *c)
{
        bv_repo_close(c->r);
        fixture_free(&c->f);
        free(c->src);
        free(c->id);
        free(c->data);
}

typedef struct Reader {
        BvImage *img;
        const uint8_t *data;
        size_t len;
        uint64_t seed;
} Reader;

/* Random reads of random lengths compared with the source. */
static void *random_reads(void *userdata)
{
        Reader *rd = userdata;
        _cleanup_free_ uint8_t *buf = malloc(300 * 1024);
        uint64_t x = rd->seed;

        ASSERT_TRUE(buf != NULL);
        for (int i = 0; i < 300; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                uint64_t off = x % rd->len;
                size_t n = (size_t)MIN((uint64_t)(x >> 40) % (300 * 1024), rd->len - off);
                ASSERT_OK(bv_image_pread(rd->img, buf, n, off, NULL));
                ASSERT_MEMEQ(buf, rd->data + off, n);
        }
        return NULL;
}

TEST(random_reads_concurrent)
{
        Ctx c = ctx_new(LAYOUT);
        BvImageOptions o = { .cache_bytes = 256 * 1024, .readahead = 2 }; /* small: forces eviction */
        BvImage *img = NULL;
        pthread_t t[3];
        Reader rd[3];

        ASSERT_OK(bv_image_open(c.r, c.snap, &o, &img));
        ASSERT_EQ(bv_image_size(img), c.len);
        for (int i = 0; i < 3; i++) {
                rd[i] = (Reader){ .img = img, .data = c.data, .len = c.len, .seed = 77 + i };
                ASSERT_TRUE(pthread_create(&t[i], NULL, random_reads, &rd[i]) == 0);
        }
        for (int i = 0; i < 3; i++)
                pthread_join(t[i], NULL);
        bv_image_free(img);
        ctx_free(&c);
}

TEST(sequential_with_readahead)
{
        Ctx c = ctx_new(LAYOUT);
        BvImageOptions o = { .readahead = 8 };
        _cleanup_free_ uint8_t *buf = malloc(c.len);
        BvImage *img = NULL;

        ASSERT_OK(bv_image_open(c.r, c.snap, &o, &img));
        for (size_t off = 0; off < c.len; off += 4096)
                ASSERT_OK(bv_image_pread(img, buf + off, MIN((size_t)4096, c.len - off), off, NULL));
        ASSERT_MEMEQ(buf, c.data, c.len);
        /* again, from the cache */
        memset(buf, 0xaa, c.len);
        ASSERT_OK(bv_image_pread(img, buf, c.len, 0, NULL));
        ASSERT_MEMEQ(buf, c.data, c.len);

        ASSERT_OK(bv_image_pread(img, buf, 0, c.len, NULL));
        ASSERT_ERROR(bv_image_pread(img, buf, 1, c.len, NULL), ERANGE);
        ASSERT_ERROR(bv_image_pread(img, buf, 2, c.len - 1, NULL), ERANGE);
        bv_image_free(img);
        ctx_free(&c);
}

/* A lone sequential reader gets the next chunks decoded ahead of it: after a few small reads
 * inside the first chunk, more chunks than that one get decoded without being asked for. */
TEST(readahead_for_a_lone_reader)
{
        Ctx c = ctx_new(LAYOUT);
        BvImageOptions o = { .readahead = 8 };
        uint8_t buf[4096];
        BvImageStats st = {};
        BvImage *img = NULL;

        ASSERT_OK(bv_image_open(c.r, c.snap, &o, &img));
        for (size_t off = 0; off < 4 * sizeof(buf); off += sizeof(buf)) {
                ASSERT_OK(bv_image_pread(img, buf, sizeof(buf), off, NULL));
                ASSERT_MEMEQ(buf, c.data + off, sizeof(buf));
        }
        for (unsigned i = 0; i < 500 && st.decodes < 2; i++) {
                bv_image_stats(img, &st);
                if (st.decodes < 2)
                        usleep(10 * 1000);
        }
        ASSERT_TRUE(st.decodes >= 2);
        bv_image_free(img);
        ctx_free(&c);
}

/* A stream gets the map loaded ahead of it: reading an image of many map leaves from start to
 * end, leaves are loaded in the background before the reads reach them. */
TEST(map_ahead_of_a_stream)
{
        char layout[1201];
        BvImageOptions o = { .readahead = 0 };
        BvImage *img = NULL;
        BvImageStats st;
        uint8_t buf[16384];
        Ctx c;

        for (size_t i = 0; i < 1200; i++)
                layout[i] = i % 4 == 0 ? 'r' : i % 4 == 2 ? 'd' : 'z';
        layout[1200] = '\0';
        c = ctx_new(layout);
        ASSERT_TRUE(c.snap->height >= 2);

        ASSERT_OK(bv_image_open(c.r, c.snap, &o, &img));
        for (size_t off = 0; off < c.len; off += sizeof(buf)) {
                ASSERT_OK(bv_image_pread(img, buf, sizeof(buf), off, NULL));
                ASSERT_MEMEQ(buf, c.data + off, sizeof(buf));
        }
        for (unsigned i = 0; i < 500; i++) { /* the pool works in the background */
                bv_image_stats(img, &st);
                if (st.map_leaves_ahead > 0)
                        break;
                usleep(10 * 1000);
        }
        ASSERT_TRUE(st.map_leaves_ahead > 0);
        bv_image_free(img);
        ctx_free(&c);
}

/* Chunks read whole go to the cold end and only a sixty-fourth of the cache keeps them; chunks
 * read in parts stay cached. */
TEST(drop_behind)
{
        Ctx c = ctx_new(LAYOUT);
        BvImageOptions o = { .cache_bytes = 4u << 20, .readahead = 0 };
        _cleanup_free_ uint8_t *buf = malloc(c.len);
        BvImage *img = NULL;
        BvImageStats st;
        uint64_t decodes;

        ASSERT_TRUE(c.len < o.cache_bytes); /* everything would fit */
        ASSERT_OK(bv_image_open(c.r, c.snap, &o, &img));
        ASSERT_OK(bv_image_pread(img, buf, c.len, 0, NULL));
        ASSERT_MEMEQ(buf, c.data, c.len);
        bv_image_stats(img, &st);
        decodes = st.decodes;
        ASSERT_TRUE(decodes >= 10);
        ASSERT_TRUE(st.cached_bytes <= o.cache_bytes / 64);

        /* 4 KiB of the first region, twice: decoded once, and it stays */
        ASSERT_OK(bv_image_pread(img, buf, 4096, 8192, NULL));
        ASSERT_OK(bv_image_pread(img, buf + 4096, 4096, 8192, NULL));
        ASSERT_MEMEQ(buf, c.data + 8192, 4096);
        ASSERT_MEMEQ(buf + 4096, c.data + 8192, 4096);
        bv_image_stats(img, &st);
        ASSERT_TRUE(st.decodes <= decodes + 1);
        decodes = st.decodes;
        /* a part of another chunk, then the first part again: nothing decoded twice */
        ASSERT_OK(bv_image_pread(img, buf, 4096, 20 * 65536 + 4096, NULL));
        ASSERT_OK(bv_image_pread(img, buf, 4096, 8192, NULL));
        ASSERT_OK(bv_image_pread(img, buf + 4096, 4096, 20 * 65536 + 4096, NULL));
        ASSERT_MEMEQ(buf + 4096, c.data + 20 * 65536 + 4096, 4096);
        bv_image_stats(img, &st);
        ASSERT_TRUE(st.decodes <= decodes + 1);
        bv_image_free(img);
        ctx_free(&c);
}

typedef struct Walk {
        const uint8_t *data;
        uint64_t next, end;
        unsigned zero_runs;
} Walk;

static int on_extent(BvExtentKind kind, uint64_t off, uint64_t len, void *ud)
{
        Walk *w = ud;
        static const uint8_t zeros[64 * 1024];

        ASSERT_EQ(off, w->next);
        ASSERT_TRUE(len > 0 && off + len <= w->end);
        if (kind != BV_EXTENT_DATA) {
                for (uint64_t p = 0; p < len; p += sizeof(zeros))
                        ASSERT_MEMEQ(w->data + off + p, zeros, MIN(len - p, (uint64_t)sizeof(zeros)));
                w->zero_runs++;
        }
        w->next = off + len;
        return 0;
}

static int stop_at_first(BvExtentKind kind, uint64_t off, uint64_t len, void *ud)
{
        return -ECANCELED;
}

TEST(extents_clipped)
{
        Ctx c = ctx_new(LAYOUT);
        BvImage *img = NULL;
        Walk w;

        ASSERT_OK(bv_image_open(c.r, c.snap, NULL, &img));
        w = (Walk){ .data = c.data, .next = 0, .end = c.len };
        ASSERT_OK(bv_image_extents(img, 0, c.len, on_extent, &w));
        ASSERT_EQ(w.next, c.len);
        ASSERT_TRUE(w.zero_runs >= 3);

        /* an unaligned range inside: clipped at both ends */
        w = (Walk){ .data = c.data, .next = 100000, .end = 100000 + 777777 };
        ASSERT_OK(bv_image_extents(img, 100000, 777777, on_extent, &w));
        ASSERT_EQ(w.next, 100000 + 777777);

        ASSERT_ERROR(bv_image_extents(img, 0, c.len, stop_at_first, NULL), ECANCELED);
        ASSERT_ERROR(bv_image_extents(img, c.len, 1, on_extent, &w), ERANGE);
        bv_image_free(img);
        ctx_free(&c);
}

TEST(damaged_chunk_is_reported_not_returned)
{
        Ctx c = ctx_new(LAYOUT);
        _cleanup_free_ uint8_t *buf = malloc(c.len);
        _cleanup_free_ char *pack = NULL;
        BvImage *img = NULL;
        BvPackEntry e;
        uint64_t at, bad = UINT64_MAX;

        pack = fixture_chunk_pack(&c.f, c.r, &e);
        at = fixture_offset_of(c.r, c.snap, e.id);
        ASSERT_TRUE(at < c.len);
        fixture_flip_byte(pack, e.offset + e.length - 1); /* the tag */

        ASSERT_OK(bv_image_open(c.r, c.snap, NULL, &img));
        memset(buf, 0x55, c.len);
        ASSERT_ERROR(bv_image_pread(img, buf, c.len, 0, &bad), EBADMSG);
        ASSERT_EQ(bad, at);
        /* reads that do not touch it still work */
        if (at > 0)
                ASSERT_OK(bv_image_pread(img, buf, (size_t)at, 0, NULL));
        ASSERT_MEMEQ(buf, c.data, (size_t)at);
        bad = 0;
        ASSERT_ERROR(bv_image_pread(img, buf, 1, at + 1, &bad), EBADMSG);
        ASSERT_EQ(bad, at);
        bv_image_free(img);
        ctx_free(&c);
}

int main(void)
{
        RUN(random_reads_concurrent);
        RUN(sequential_with_readahead);
        RUN(readahead_for_a_lone_reader);
        RUN(drop_behind);
        RUN(map_ahead_of_a_stream);
        RUN(extents_clipped);
        RUN(damaged_chunk_is_reported_not_returned);
        return 0;
}
