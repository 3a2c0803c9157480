/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "bvtest.h"
#include "endian.h"
#include "fileio.h"
#include "hash.h"
#include "index.h"
#include "../fuzz/index-segment-sums.h"
#include "macro.h"

/* Header fields of a segment file (docs/FORMAT.md, "Index"). */
#define H_VERSION 8
#define H_FLAGS 12
#define H_COUNT 16
#define H_PACK_COUNT 32
#define H_ENTRIES_OFF 72

static void make_id(uint8_t id[BV_ID_SIZE], uint64_t n)
{
        bvtest_fill_random(id, BV_ID_SIZE, n * 0x9e3779b97f4a7c15ull + 1);
}

static void make_pack(uint8_t pack[BV_PACK_ID_SIZE], uint64_t n)
{
        bvtest_fill_random(pack, BV_PACK_ID_SIZE, n + 0x5151);
}

/* Every fourth id is a group member, numbered from its id number: the member byte must survive
 * the pending table, segments and compaction. */
static uint8_t type_of(uint64_t n)
{
        return n % 4 == 0 ? BV_OBJ_GROUP : BV_OBJ_CHUNK;
}

static uint8_t member_of(uint64_t n)
{
        return n % 4 == 0 ? (uint8_t)(n / 4 % 255) : 0;
}

/* Records ids [first, first + n) as one pack, with offsets derived from the id number. */
static void add_ids(BvIndex *x, uint64_t pack, uint64_t first, size_t n, uint32_t salt)
{
        BvPackEntry *e = calloc(n, sizeof(*e));
        uint8_t pid[BV_PACK_ID_SIZE];

        ASSERT_TRUE(e);
        for (size_t i = 0; i < n; i++) {
                make_id(e[i].id, first + i);
                e[i].type = type_of(first + i);
                e[i].member = member_of(first + i);
                e[i].offset = (uint32_t)(first + i) * 7 + salt;
                e[i].length = (uint32_t)(first + i) % 1000 + 1;
                e[i].raw_length = 65536;
        }
        make_pack(pid, pack);
        ASSERT_OK(bv_index_add_pack(x, pid, e, n));
        free(e);
}

static void expect_id(BvIndex *x, uint64_t pack, uint64_t n, uint32_t salt)
{
        uint8_t id[BV_ID_SIZE], pid[BV_PACK_ID_SIZE];
        BvLocation loc;

        make_id(id, n);
        make_pack(pid, pack);
        ASSERT_OK(bv_index_lookup(x, id, &loc));
        ASSERT_MEMEQ(loc.pack_id, pid, BV_PACK_ID_SIZE);
        ASSERT_EQ(loc.offset, (uint32_t)n * 7 + salt);
        ASSERT_EQ(loc.length, (uint32_t)n % 1000 + 1);
        ASSERT_EQ(loc.type, type_of(n));
        ASSERT_EQ(loc.member, member_of(n));
}

static void expect_absent(BvIndex *x, uint64_t n)
{
        uint8_t id[BV_ID_SIZE];
        BvLocation loc = { .offset = 4242 };

        make_id(id, n);
        ASSERT_ERROR(bv_index_lookup(x, id, &loc), ENOENT);
        ASSERT_EQ(loc.offset, 4242); /* untouched on failure */
}

/* The index maps SEGMENTS segments holding ENTRIES entries; returns all its stats. */
static BvIndexStats expect_stats(BvIndex *x, uint64_t segments, uint64_t entries)
{
        BvIndexStats st = { .entries = 99, .segments = 99 };

        ASSERT_OK(bv_index_stats(x, &st));
        ASSERT_EQ(st.segments, segments);
        ASSERT_EQ(st.entries, entries);
        return st;
}

static size_t count_segments(int dfd)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fdopendir(fd);
        struct dirent *de;
        size_t n = 0;

        ASSERT_TRUE(d);
        while ((de = readdir(d)))
                if (strlen(de->d_name) == 20 && strcmp(de->d_name + 16, ".idx") == 0)
                        n++;
        closedir(d);
        return n;
}

/* The name of the only (or some) segment file. */
static void segment_name(int dfd, char out[32])
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fdopendir(fd);
        struct dirent *de;

        ASSERT_TRUE(d);
        out[0] = '\0';
        while ((de = readdir(d)))
                if (strlen(de->d_name) == 20 && strcmp(de->d_name + 16, ".idx") == 0) {
                        memcpy(out, de->d_name, 20);
                        out[20] = '\0';
                }
        closedir(d);
        ASSERT_TRUE(out[0]);
}

/* Reads a whole segment file, lets fix() change it, optionally repairs the checksums, writes
 * it back. */
static void rewrite_segment(int dfd, void (*fix)(uint8_t *data, size_t *len), bool fix_header, bool fix_body)
{
        char name[32];
        void *data;
        size_t len;

        segment_name(dfd, name);
        ASSERT_OK(bv_read_file(dfd, name, 1 << 26, &data, &len));
        fix(data, &len);
        index_segment_fix_sums(data, len, fix_header, fix_body);
        ASSERT_TRUE(unlinkat(dfd, name, 0) == 0);
        ASSERT_OK(bv_write_file_durable(dfd, name, data, len, false));
        free(data);
}

/* A repository holding one segment of ids 0..99 in pack 1. */
static void write_one_segment(BvTestDir *r)
{
        BvIndex *x = NULL;

        ASSERT_OK(bv_index_open(r->dfd, &x));
        add_ids(x, 1, 0, 100, 0);
        ASSERT_OK(bv_index_flush(x));
        bv_index_free(x);
}

TEST(empty_repository)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;

        ASSERT_OK(bv_index_open(r.dfd, &x));
        expect_absent(x, 1);
        expect_stats(x, 0, 0);
        ASSERT_EQ(bv_index_pending(x), 0);
        ASSERT_OK(bv_index_flush(x)); /* nothing to write */
        ASSERT_OK(bv_index_compact(x, 0));
        ASSERT_OK(bv_index_refresh(x));
        ASSERT_OK(bv_index_check(x, NULL, NULL));
        ASSERT_EQ(count_segments(r.dfd), 0);
        bv_index_free(x);

        ASSERT_ERROR(bv_index_open(-1, &x), EINVAL);
        bvtest_dir_done(&r);
}

TEST(claim_semantics)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        uint8_t id[BV_ID_SIZE], other[BV_ID_SIZE];

        ASSERT_OK(bv_index_open(r.dfd, &x));
        make_id(id, 1);
        make_id(other, 2);
        ASSERT_EQ(bv_index_claim(x, id), 1);
        ASSERT_EQ(bv_index_claim(x, id), 0);
        ASSERT_EQ(bv_index_claim(x, other), 1);
        expect_absent(x, 1); /* claimed, not located */
        bv_index_unclaim(x, id);
        ASSERT_EQ(bv_index_claim(x, id), 1);
        ASSERT_EQ(bv_index_claim(x, other), 0);

        /* Located ids stay claimed, before and after the flush; unclaim does not drop them. */
        add_ids(x, 1, 1, 1, 0);
        ASSERT_EQ(bv_index_pending(x), 1);
        bv_index_unclaim(x, id);
        ASSERT_EQ(bv_index_claim(x, id), 0);
        ASSERT_OK(bv_index_flush(x));
        ASSERT_EQ(bv_index_pending(x), 0);
        ASSERT_EQ(bv_index_claim(x, id), 0);
        /* A claim survives a flush it was not part of. */
        ASSERT_EQ(bv_index_claim(x, other), 0);
        bv_index_unclaim(x, other);
        ASSERT_EQ(bv_index_claim(x, other), 1);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

/* Many claims and unclaims exercise growth and backward-shift deletion. */
TEST(claim_table_growth)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        uint8_t id[BV_ID_SIZE];

        ASSERT_OK(bv_index_open(r.dfd, &x));
        for (uint64_t i = 0; i < 20000; i++) {
                make_id(id, i);
                ASSERT_EQ(bv_index_claim(x, id), 1);
        }
        for (uint64_t i = 0; i < 20000; i += 2) {
                make_id(id, i);
                bv_index_unclaim(x, id);
        }
        for (uint64_t i = 0; i < 20000; i++) {
                make_id(id, i);
                ASSERT_EQ(bv_index_claim(x, id), i % 2 == 0 ? 1 : 0);
        }
        bv_index_free(x);
        bvtest_dir_done(&r);
}

TEST(add_lookup_flush_reopen)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL, *y = NULL;
        BvIndexStats st;

        ASSERT_OK(bv_index_open(r.dfd, &x));
        add_ids(x, 1, 0, 3000, 0);
        add_ids(x, 2, 3000, 2000, 0);
        ASSERT_EQ(bv_index_pending(x), 5000);
        expect_id(x, 1, 10, 0);
        expect_id(x, 2, 4999, 0);
        expect_absent(x, 5000);

        ASSERT_OK(bv_index_flush(x));
        ASSERT_EQ(bv_index_pending(x), 0);
        ASSERT_EQ(count_segments(r.dfd), 1);
        for (uint64_t i = 0; i < 5000; i++)
                expect_id(x, i < 3000 ? 1 : 2, i, 0);
        for (uint64_t i = 5000; i < 6000; i++)
                expect_absent(x, i);
        st = expect_stats(x, 1, 5000);
        ASSERT_TRUE(st.bytes > 5000 * 48 && st.filter_bytes >= 5000 * 12 / 8);

        /* Entries added after a flush land in a second segment. */
        add_ids(x, 3, 6000, 10, 0);
        ASSERT_OK(bv_index_flush(x));
        ASSERT_EQ(count_segments(r.dfd), 2);
        bv_index_free(x);

        ASSERT_OK(bv_index_open(r.dfd, &y));
        for (uint64_t i = 0; i < 5000; i++)
                expect_id(y, i < 3000 ? 1 : 2, i, 0);
        expect_id(y, 3, 6005, 0);
        expect_absent(y, 5005);
        ASSERT_OK(bv_index_check(y, NULL, NULL));
        bv_index_free(y);
        bvtest_dir_done(&r);
}

/* A newer location of an id wins: in the pending table, across segments and after merging. */
TEST(compaction)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL, *y = NULL;

        ASSERT_OK(bv_index_open(r.dfd, &x));
        for (uint64_t s = 0; s < 10; s++) {
                add_ids(x, s, s * 1000, 1000, 0);
                ASSERT_OK(bv_index_flush(x));
        }
        /* ids 500..1499 again, in pack 100 with other offsets */
        add_ids(x, 100, 500, 1000, 3);
        expect_id(x, 100, 600, 3);
        ASSERT_OK(bv_index_flush(x));
        expect_id(x, 100, 600, 3);
        ASSERT_EQ(count_segments(r.dfd), 11);

        ASSERT_OK(bv_index_compact(x, 16)); /* under the limit: nothing happens */
        ASSERT_EQ(count_segments(r.dfd), 11);
        ASSERT_OK(bv_index_compact(x, 4));
        ASSERT_EQ(count_segments(r.dfd), 1);
        expect_stats(x, 1, 10000);
        for (uint64_t i = 0; i < 10000; i++) {
                if (i >= 500 && i < 1500)
                        expect_id(x, 100, i, 3);
                else
                        expect_id(x, i / 1000, i, 0);
        }
        expect_absent(x, 10000);
        ASSERT_OK(bv_index_check(x, NULL, NULL));
        bv_index_free(x);

        ASSERT_OK(bv_index_open(r.dfd, &y));
        expect_id(y, 100, 1499, 3);
        expect_id(y, 1, 1500, 0);
        expect_id(y, 9, 9999, 0);
        bv_index_free(y);
        bvtest_dir_done(&r);
}

TEST(refresh_sees_other_handle)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *writer = NULL, *reader = NULL;

        ASSERT_OK(bv_index_open(r.dfd, &writer));
        ASSERT_OK(bv_index_open(r.dfd, &reader));
        add_ids(writer, 1, 0, 100, 0);
        ASSERT_OK(bv_index_flush(writer));
        expect_absent(reader, 5);
        ASSERT_OK(bv_index_refresh(reader));
        expect_id(reader, 1, 5, 0);

        /* The writer compacts: the reader still holds the old mapping, and after a refresh it
         * drops the unlinked segments and maps the merged one. */
        add_ids(writer, 2, 100, 100, 0);
        ASSERT_OK(bv_index_flush(writer));
        ASSERT_OK(bv_index_refresh(reader));
        ASSERT_OK(bv_index_compact(writer, 1));
        ASSERT_EQ(count_segments(r.dfd), 1);
        expect_id(reader, 2, 150, 0);
        expect_stats(reader, 2, 200);
        ASSERT_OK(bv_index_refresh(reader));
        expect_stats(reader, 1, 200);
        expect_id(reader, 1, 50, 0);
        expect_id(reader, 2, 150, 0);
        bv_index_free(writer);
        bv_index_free(reader);
        bvtest_dir_done(&r);
}

typedef struct CheckCount {
        uint64_t n;
        uint64_t offsets;
        int fail_at;
} CheckCount;

static int count_cb(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud)
{
        CheckCount *c = ud;

        c->n++;
        c->offsets += loc->offset;
        if (c->fail_at > 0 && c->n == (uint64_t)c->fail_at)
                return -ECANCELED;
        return 0;
}

TEST(check_visits_every_entry)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        CheckCount c = {};
        uint64_t want = 0;

        ASSERT_OK(bv_index_open(r.dfd, &x));
        add_ids(x, 1, 0, 300, 0);
        ASSERT_OK(bv_index_flush(x));
        add_ids(x, 2, 300, 200, 0);
        ASSERT_OK(bv_index_flush(x));
        ASSERT_OK(bv_index_check(x, count_cb, &c));
        ASSERT_EQ(c.n, 500);
        for (uint64_t i = 0; i < 500; i++)
                want += (uint32_t)i * 7;
        ASSERT_EQ(c.offsets, want);

        c = (CheckCount){ .fail_at = 10 };
        ASSERT_ERROR(bv_index_check(x, count_cb, &c), ECANCELED);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

static void flip_count(uint8_t *data, size_t *len)
{
        data[H_COUNT] ^= 1;
}

static void flip_magic(uint8_t *data, size_t *len)
{
        data[0] = 'X';
}

static void flip_body(uint8_t *data, size_t *len)
{
        data[*len - 10] ^= 0x40; /* inside the last entry */
}

static void set_version_2(uint8_t *data, size_t *len)
{
        put_le32(data + H_VERSION, 2);
}

static void set_flags(uint8_t *data, size_t *len)
{
        put_le32(data + H_FLAGS, 1);
}

static void truncate_end(uint8_t *data, size_t *len)
{
        *len -= 48;
}

static void truncate_header(uint8_t *data, size_t *len)
{
        *len = 100;
}

static void truncate_and_fix_size(uint8_t *data, size_t *len)
{
        /* A file that says it is shorter than its sections: the entries run past its end. */
        *len -= 48;
        put_le64(data + 80, *len);
}

/* Every entry of the only segment names pack position 7 of a one-pack table. */
static void bad_pack_position(uint8_t *data, size_t *len)
{
        uint64_t n = get_le64(data + H_COUNT), off = get_le64(data + H_ENTRIES_OFF);

        ASSERT_EQ(get_le32(data + H_PACK_COUNT), 1);
        for (uint64_t i = 0; i < n; i++)
                put_le32(data + off + i * 48 + 32, 7);
}

/* A segment that does not read is left out at open and named with its error: the index opens
 * without it. */
static void expect_open_error(void (*fix)(uint8_t *, size_t *), bool fix_header, int err)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        BvIndexDamage *d = NULL;
        size_t n = 0;

        write_one_segment(&r);
        rewrite_segment(r.dfd, fix, fix_header, true);
        ASSERT_OK(bv_index_open(r.dfd, &x));
        ASSERT_OK(bv_index_damaged(x, &d, &n));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(d[0].error, -err);
        ASSERT_EQ(strlen(d[0].name), 20);
        expect_stats(x, 0, 0);
        free(d);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

TEST(corrupt_segments_at_open)
{
        expect_open_error(flip_count, false, EBADMSG);     /* header checksum */
        expect_open_error(flip_magic, true, EBADMSG);      /* magic */
        expect_open_error(set_version_2, true, EPROTONOSUPPORT);
        expect_open_error(set_version_2, false, EPROTONOSUPPORT); /* version before checksum */
        expect_open_error(set_flags, true, EPROTONOSUPPORT);
        expect_open_error(truncate_end, true, EBADMSG);    /* file size differs from the header */
        expect_open_error(truncate_header, false, EBADMSG);
        expect_open_error(truncate_and_fix_size, true, EBADMSG);
        expect_open_error(flip_count, true, EBADMSG); /* fan-out no longer ends at the count */
}

TEST(corrupt_body_found_by_check)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;

        write_one_segment(&r);
        rewrite_segment(r.dfd, flip_body, true, false);
        ASSERT_OK(bv_index_open(r.dfd, &x)); /* the body is not read at open */
        ASSERT_ERROR(bv_index_check(x, NULL, NULL), EBADMSG);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

TEST(pack_position_out_of_range)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL, *y = NULL;
        uint8_t id[BV_ID_SIZE];
        BvLocation loc;

        write_one_segment(&r);
        rewrite_segment(r.dfd, bad_pack_position, true, true);
        ASSERT_OK(bv_index_open(r.dfd, &x));
        make_id(id, 42);
        ASSERT_ERROR(bv_index_lookup(x, id, &loc), EBADMSG);
        ASSERT_ERROR(bv_index_claim(x, id), EBADMSG);
        ASSERT_ERROR(bv_index_check(x, NULL, NULL), EBADMSG);
        /* A merge refuses the segment too, and leaves it in place. */
        ASSERT_OK(bv_index_open(r.dfd, &y));
        add_ids(y, 2, 1000, 10, 0);
        ASSERT_OK(bv_index_flush(y));
        ASSERT_ERROR(bv_index_compact(y, 1), EBADMSG);
        ASSERT_EQ(count_segments(r.dfd), 2);
        bv_index_free(x);
        bv_index_free(y);
        bvtest_dir_done(&r);
}

/* Segment files the index did not write are ignored; a non-directory fd fails. */
TEST(foreign_files)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        int fd;

        ASSERT_OK(bv_write_file_durable(r.dfd, ".tmp-0123456789abcdef", "x", 1, false));
        ASSERT_OK(bv_write_file_durable(r.dfd, "README", "x", 1, false));
        ASSERT_OK(bv_write_file_durable(r.dfd, "zzzzzzzzzzzzzzzz.idx", "x", 1, false));
        ASSERT_OK(bv_index_open(r.dfd, &x));
        bv_index_free(x);

        x = NULL;
        fd = openat(r.dfd, "README", O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_ERROR(bv_index_open(fd, &x), ENOTDIR);
        close(fd);
        bvtest_dir_done(&r);
}

static int named_cb(const uint8_t pack_id[BV_PACK_ID_SIZE], void *ud)
{
        (*(size_t *)ud)++;
        return 0;
}

/* Entries located in a missing pack are absent for lookups and claims (so a writer stores them
 * again); a newer location wins; the pack tables list what the segments name. */
TEST(missing_packs)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        uint8_t lost[BV_PACK_ID_SIZE], id[BV_ID_SIZE];
        size_t named = 0;

        ASSERT_OK(bv_index_open(r.dfd, &x));
        add_ids(x, 1, 0, 100, 0);
        ASSERT_OK(bv_index_flush(x));
        add_ids(x, 2, 100, 100, 0);
        ASSERT_OK(bv_index_flush(x));
        ASSERT_OK(bv_index_packs(x, named_cb, &named));
        ASSERT_EQ(named, 2);

        make_pack(lost, 1);
        ASSERT_OK(bv_index_set_missing_packs(x, (const uint8_t(*)[BV_PACK_ID_SIZE])lost, 1));
        expect_absent(x, 5);
        expect_id(x, 2, 150, 0);
        make_id(id, 5);
        ASSERT_EQ(bv_index_claim(x, id), 1); /* to be stored again */
        add_ids(x, 3, 5, 1, 9);
        ASSERT_OK(bv_index_flush(x));
        expect_id(x, 3, 5, 9);
        expect_absent(x, 6);
        ASSERT_OK(bv_index_set_missing_packs(x, NULL, 0));
        expect_id(x, 1, 6, 0);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

#define THREADS 4
#define THREAD_IDS 20000

typedef struct ClaimWorker {
        BvIndex *x;
        unsigned seed;
        unsigned *wins; /* per id, updated atomically */
} ClaimWorker;

static void *claim_worker(void *p)
{
        ClaimWorker *w = p;
        uint8_t id[BV_ID_SIZE];

        for (uint64_t k = 0; k < THREAD_IDS; k++) {
                /* every thread walks all ids, each in its own order */
                uint64_t i = (k * 7919 + w->seed * 4099) % THREAD_IDS;
                int r;

                make_id(id, i);
                r = bv_index_claim(w->x, id);
                ASSERT_TRUE(r == 0 || r == 1);
                if (r == 1)
                        __atomic_add_fetch(&w->wins[i], 1, __ATOMIC_RELAXED);
        }
        return NULL;
}

TEST(concurrent_claims)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        pthread_t t[THREADS];
        ClaimWorker w[THREADS];
        unsigned *wins = calloc(THREAD_IDS, sizeof(unsigned));

        ASSERT_TRUE(wins);
        ASSERT_OK(bv_index_open(r.dfd, &x));
        /* a third of the ids are stored already: nobody wins those */
        add_ids(x, 1, 0, THREAD_IDS / 3, 0);
        ASSERT_OK(bv_index_flush(x));
        for (unsigned i = 0; i < THREADS; i++) {
                w[i] = (ClaimWorker){ .x = x, .seed = i, .wins = wins };
                ASSERT_EQ(pthread_create(&t[i], NULL, claim_worker, &w[i]), 0);
        }
        for (unsigned i = 0; i < THREADS; i++)
                ASSERT_EQ(pthread_join(t[i], NULL), 0);
        for (unsigned i = 0; i < THREAD_IDS; i++)
                ASSERT_EQ(wins[i], i < THREAD_IDS / 3 ? 0 : 1);
        free(wins);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

typedef struct LookupWorker {
        BvIndex *x;
        int stop;
        uint64_t lookups;
} LookupWorker;

static void *lookup_worker(void *p)
{
        LookupWorker *w = p;

        while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
                for (uint64_t i = 0; i < 1000; i += 37)
                        expect_id(w->x, 1, i, 0);
                w->lookups++;
        }
        return NULL;
}

/* Lookups keep finding old entries while another thread flushes, compacts and refreshes. */
TEST(lookups_during_updates)
{
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        LookupWorker w = {};
        pthread_t t;

        ASSERT_OK(bv_index_open(r.dfd, &x));
        add_ids(x, 1, 0, 1000, 0);
        ASSERT_OK(bv_index_flush(x));
        w.x = x;
        ASSERT_EQ(pthread_create(&t, NULL, lookup_worker, &w), 0);
        for (uint64_t s = 2; s < 12; s++) {
                add_ids(x, s, s * 1000, 500, 0);
                ASSERT_OK(bv_index_flush(x));
                ASSERT_OK(bv_index_compact(x, 3));
                ASSERT_OK(bv_index_refresh(x));
        }
        __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
        ASSERT_EQ(pthread_join(t, NULL), 0);
        ASSERT_TRUE(w.lookups > 0);
        expect_id(x, 11, 11499, 0);
        bv_index_free(x);
        bvtest_dir_done(&r);
}

/* The seed corpus doubles as golden files: a segment written by the first version must keep
 * decoding (tests/fuzz/gen-index-corpus.c wrote it: ids make_id(0..n-1), pack make_pack(1)).
 * Returns false if SOURCE_ROOT (set by meson test) does not say where the corpus is. */
static bool golden_segment(void)
{
        const char *root = getenv("SOURCE_ROOT");
        char *path = NULL;
        BvTestDir r = bvtest_dir_new();
        BvIndex *x = NULL;
        void *data;
        size_t len;
        int src;

        if (!root) {
                printf("skip - golden_segment: SOURCE_ROOT unset\n");
                bvtest_dir_done(&r);
                return false;
        }
        ASSERT_TRUE(asprintf(&path, "%s/tests/fuzz/corpus/index-segment", root) > 0);
        src = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(src >= 0);
        ASSERT_OK(bv_read_file(src, "seed-100", 1 << 20, &data, &len));
        ASSERT_OK(bv_write_file_durable(r.dfd, "0000000000000001.idx", data, len, false));
        ASSERT_OK(bv_index_open(r.dfd, &x));
        for (uint64_t i = 0; i < 100; i++) {
                uint8_t id[BV_ID_SIZE], pid[BV_PACK_ID_SIZE];
                BvLocation loc;

                make_id(id, i);
                make_pack(pid, 1);
                ASSERT_OK(bv_index_lookup(x, id, &loc));
                ASSERT_MEMEQ(loc.pack_id, pid, BV_PACK_ID_SIZE);
                ASSERT_EQ(loc.offset, (uint32_t)i * 7);
                ASSERT_EQ(loc.length, (uint32_t)i % 1000 + 1);
                ASSERT_EQ(loc.type, BV_OBJ_CHUNK); /* written before groups: every entry a chunk */
                ASSERT_EQ(loc.member, 0);
        }
        expect_absent(x, 100);
        ASSERT_OK(bv_index_check(x, NULL, NULL));
        bv_index_free(x);
        free(data);
        close(src);
        free(path);
        bvtest_dir_done(&r);
        return true;
}

int main(void)
{
        RUN(empty_repository);
        RUN(claim_semantics);
        RUN(claim_table_growth);
        RUN(add_lookup_flush_reopen);
        RUN(compaction);
        RUN(refresh_sees_other_handle);
        RUN(check_visits_every_entry);
        RUN(corrupt_segments_at_open);
        RUN(corrupt_body_found_by_check);
        RUN(pack_position_out_of_range);
        RUN(foreign_files);
        RUN(missing_packs);
        RUN(concurrent_claims);
        RUN(lookups_during_updates);
        if (!golden_segment())
                return 77;
        printf("ok - golden_segment\n");
        return 0;
}
