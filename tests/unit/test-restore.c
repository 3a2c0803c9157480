/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "repo-fixture.h"
#include "restore.h"

static bool exists(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0;
}

/* Backs up a layout, restores it, and compares; returns the restore's stats. */
static BvRestoreStats round_trip(const char *layout, unsigned threads)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *src = fixture_image(&f, "src.img", layout, 7);
        _cleanup_free_ char *dst = fixture_path(&f, "dst.img");
        _cleanup_free_ char *id = fixture_backup(&f, src);
        _cleanup_free_ void *a = NULL, *b = NULL;
        BvRestoreOptions o = { .threads = threads };
        BvRestoreStats st;
        const BvSnapshot *snap;
        BvRepo *r = NULL;
        size_t la, lb;

        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_repo_find_snapshot(r, id, &snap));
        ASSERT_OK(bv_restore(r, snap, dst, &o, &st));
        a = fixture_read_file(src, &la);
        b = fixture_read_file(dst, &lb);
        ASSERT_EQ(la, lb);
        ASSERT_MEMEQ(a, b, la);
        ASSERT_EQ(st.size, la);
        ASSERT_EQ(st.bytes_written + st.bytes_zero, la);

        /* never over an existing file */
        ASSERT_ERROR(bv_restore(r, snap, dst, &o, &st), EEXIST);
        bv_repo_close(r);
        fixture_free(&f);
        return st;
}

TEST(round_trip_random)
{
        BvRestoreStats st = round_trip("rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr", 0);
        ASSERT_EQ(st.bytes_zero, 0);
}

TEST(round_trip_zeros)
{
        BvRestoreStats st = round_trip("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", 2);
        ASSERT_EQ(st.bytes_written, 0);
}

TEST(round_trip_sparse_and_mixed)
{
        BvRestoreStats st = round_trip("hhhhrrhhhhzzdrrhhhhhhhhrdzzrhh", 3);
        ASSERT_TRUE(st.bytes_zero >= 20 * 64 * 1024);
        round_trip("r", 1);
        round_trip("", 1);
}

TEST(restored_file_is_sparse)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *src = fixture_image(&f, "src.img", "hhhhhhhhhhhhhhhhzzzzzzzzzzzzzzzzr", 9);
        _cleanup_free_ char *dst = fixture_path(&f, "dst.img");
        _cleanup_free_ char *id = fixture_backup(&f, src);
        const BvSnapshot *snap;
        BvRepo *r = NULL;
        struct stat st;

        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_repo_find_snapshot(r, "latest", &snap));
        ASSERT_OK(bv_restore(r, snap, dst, NULL, NULL));
        ASSERT_TRUE(stat(dst, &st) == 0);
        ASSERT_EQ(st.st_size, 33 * 64 * 1024);
        ASSERT_TRUE((uint64_t)st.st_blocks * 512 <= 4 * 64 * 1024); /* only the data region */
        bv_repo_close(r);
        fixture_free(&f);
}

/* A backup of random data, and one of its chunks: the pack holding it and its image offset. */
typedef struct Damage {
        RepoFixture f;
        char *src, *dst, *id, *pack;
        BvRepo *r;
        const BvSnapshot *snap;
        BvPackEntry e;
        uint64_t at;
} Damage;

static Damage damage_new(uint64_t seed)
{
        Damage d = { .f = fixture_repo() };

        d.src = fixture_image(&d.f, "src.img", "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr", seed);
        d.dst = fixture_path(&d.f, "dst.img");
        d.id = fixture_backup(&d.f, d.src);
        ASSERT_OK(bv_repo_open(d.f.repo, &d.f.secret, BV_OPEN_READ, &d.r));
        ASSERT_OK(bv_repo_find_snapshot(d.r, d.id, &d.snap));
        d.pack = fixture_chunk_pack(&d.f, d.r, &d.e);
        d.at = fixture_offset_of(d.r, d.snap, d.e.id);
        ASSERT_TRUE(d.at < d.snap->size);
        return d;
}

/* Opens the repository again (the pack set must not keep a deleted pack open). */
static void damage_reopen(Damage *d)
{
        bv_repo_close(d->r);
        ASSERT_OK(bv_repo_open(d->f.repo, &d->f.secret, BV_OPEN_READ, &d->r));
        ASSERT_OK(bv_repo_find_snapshot(d->r, d->id, &d->snap));
}

/* Restores with one thread (image order) and checks the failure. */
static void damage_expect(Damage *d, int error, bool exact)
{
        BvRestoreOptions o = { .threads = 1 };
        BvRestoreStats st = {};

        ASSERT_EQ(bv_restore(d->r, d->snap, d->dst, &o, &st), -error);
        if (exact)
                ASSERT_EQ(st.bad_offset, d->at);
        else
                ASSERT_TRUE(st.bad_offset <= d->at);
        ASSERT_TRUE(!exists(d->dst)); /* no partial file */

        /* with several workers the damage is still found and nothing is left behind */
        o.threads = 3;
        ASSERT_EQ(bv_restore(d->r, d->snap, d->dst, &o, &st), -error);
        ASSERT_TRUE(!exists(d->dst));
}

static void damage_free(Damage *d)
{
        bv_repo_close(d->r);
        fixture_free(&d->f);
        free(d->src);
        free(d->dst);
        free(d->id);
        free(d->pack);
}

TEST(damaged_chunk)
{
        Damage d = damage_new(11);
        fixture_flip_byte(d.pack, d.e.offset + d.e.length / 2);
        damage_expect(&d, EBADMSG, true);
        damage_free(&d);
}

TEST(truncated_pack)
{
        Damage d = damage_new(12);
        /* cut the pack in the middle of that chunk: it and whatever follows are gone */
        ASSERT_TRUE(truncate(d.pack, (off_t)(d.e.offset + d.e.length / 2)) == 0);
        damage_expect(&d, EBADMSG, false);
        damage_free(&d);
}

TEST(missing_pack)
{
        Damage d = damage_new(13);
        ASSERT_TRUE(unlink(d.pack) == 0);
        damage_reopen(&d);
        damage_expect(&d, EUCLEAN, false);
        damage_free(&d);
}

/* Attaches a loop device over a new file of size bytes filled with 0xff; NULL if not root: the
 * caller then skips visibly. */
static char *loop_attach(const char *backing, uint64_t size)
{
        _cleanup_free_ uint8_t *ff = malloc(64 * 1024);
        _cleanup_close_ int fd = open(backing, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        ASSERT_TRUE(ff && fd >= 0);
        memset(ff, 0xff, 64 * 1024);
        for (uint64_t off = 0; off < size; off += 64 * 1024)
                ASSERT_OK(bv_pwrite_all(fd, ff, 64 * 1024, off));
        return bvtest_loop_attach(backing);
}

static void loop_detach(char *dev)
{
        char *cmd;
        ASSERT_TRUE(asprintf(&cmd, "losetup -d '%s'", dev) > 0);
        if (system(cmd) != 0)
                fprintf(stderr, "warning: could not detach %s, ignoring\n", dev);
        free(cmd);
        free(dev);
}

/* Restores onto loop devices; false if none can be attached here (the caller skips visibly after
 * running everything else). */
static bool test_block_device(void)
{
        RepoFixture f = fixture_repo();
        _cleanup_free_ char *src = fixture_image(&f, "src.img", "rrzzhhrrrzzzzhhhhdrr", 14);
        _cleanup_free_ char *id = fixture_backup(&f, src);
        _cleanup_free_ char *big = fixture_path(&f, "big.img"), *small = fixture_path(&f, "small.img");
        _cleanup_free_ void *a = NULL, *b = NULL;
        const uint64_t size = 20 * 64 * 1024;
        BvRestoreStats st;
        const BvSnapshot *snap;
        BvRepo *r = NULL;
        char *dev, *dev_small;
        size_t la;

        dev = loop_attach(big, size + 128 * 1024);
        if (!dev) {
                printf("# not root: no loop device over %s\n", big);
                fixture_free(&f);
                return false;
        }
        ASSERT_OK(bv_repo_open(f.repo, &f.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_repo_find_snapshot(r, id, &snap));
        ASSERT_OK(bv_restore(r, snap, dev, NULL, &st));
        ASSERT_EQ(st.bytes_zero, 12 * 64 * 1024);
        loop_detach(dev);

        /* the zero and hole ranges were zeroed, the rest of the device left alone */
        a = fixture_read_file(src, &la);
        _cleanup_close_ int fd = open(big, O_RDONLY | O_CLOEXEC);
        b = malloc(size + 128 * 1024);
        ASSERT_TRUE(fd >= 0 && b);
        ASSERT_EQ(bv_pread_all(fd, b, size + 128 * 1024, 0), (ssize_t)(size + 128 * 1024));
        ASSERT_EQ(la, size);
        ASSERT_MEMEQ(a, b, size);
        ASSERT_EQ(((uint8_t *)b)[size], 0xff);

        /* a device smaller than the image */
        dev_small = loop_attach(small, size - 64 * 1024);
        ASSERT_TRUE(dev_small != NULL);
        ASSERT_ERROR(bv_restore(r, snap, dev_small, NULL, &st), ENOSPC);
        loop_detach(dev_small);
        bv_repo_close(r);
        fixture_free(&f);
        return true;
}

int main(void)
{
        RUN(round_trip_random);
        RUN(round_trip_zeros);
        RUN(round_trip_sparse_and_mixed);
        RUN(restored_file_is_sparse);
        RUN(damaged_chunk);
        RUN(truncated_pack);
        RUN(missing_pack);
        if (!test_block_device()) {
                printf("skip - block_device: cannot attach a loop device (needs root and /dev/loop*)\n");
                return 77;
        }
        printf("ok - block_device\n");
        return 0;
}
