/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A changed-block source behind the source ops table (what a qemu dirty bitmap or an LVM thin
 * delta will give): it reports the ranges that did not change since the parent snapshot as
 * UNCHANGED. The backup takes the parent's zero runs and the data chunks that lie wholly in
 * such a range from the parent's map without reading them, reads only the changed ranges and
 * the chunks that stick out of an unchanged one, and the snapshot restores bit-exact.
 */
#include "image.h"
#include "parent-map.h"
#include "repo-fixture.h"
#include "source.h"

#define MIB (1024u * 1024)
#define IMAGE (16 * MIB)

typedef struct Range {
        uint64_t offset, length;
} Range;

typedef struct FakeSource {
        const uint8_t *image;
        uint64_t size, pos;
        const Range *changed; /* sorted; everything else is unchanged */
        size_t n_changed;
        Range reads[256];     /* every range handed out as DATA or read with read_at */
        size_t n_reads;
        uint64_t bytes_read;
} FakeSource;

static void note_read(FakeSource *f, uint64_t offset, uint64_t length)
{
        ASSERT_TRUE(f->n_reads < ELEMENTSOF(f->reads));
        f->reads[f->n_reads++] = (Range){ offset, length };
        f->bytes_read += length;
}

/* The changed ranges as DATA extents of at most 1 MiB, the gaps between them as UNCHANGED. */
static int fake_next(void *impl, BvExtent *ret)
{
        FakeSource *f = impl;
        uint64_t end = f->size;

        if (f->pos >= f->size)
                return 0;
        for (size_t i = 0; i < f->n_changed; i++) {
                const Range *c = &f->changed[i];
                if (f->pos >= c->offset && f->pos < c->offset + c->length) {
                        uint64_t n = MIN(c->offset + c->length - f->pos, (uint64_t)MIB);
                        *ret = (BvExtent){ .kind = BV_EXTENT_DATA, .offset = f->pos, .length = n,
                                           .data = f->image + f->pos };
                        note_read(f, f->pos, n);
                        f->pos += n;
                        return 1;
                }
                if (c->offset > f->pos)
                        end = MIN(end, c->offset);
        }
        *ret = (BvExtent){ .kind = BV_EXTENT_UNCHANGED, .offset = f->pos, .length = end - f->pos };
        f->pos = end;
        return 1;
}

static int fake_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        FakeSource *f = impl;

        ASSERT_TRUE(offset + len <= f->size);
        memcpy(buf, f->image + offset, len);
        note_read(f, offset, len);
        return 0;
}

static uint64_t fake_size(void *impl)
{
        return ((FakeSource *)impl)->size;
}

static void fake_free(void *impl)
{
}

static const BvSourceOps fake_ops = {
        .next = fake_next, .read_at = fake_read_at, .size = fake_size, .free = fake_free,
};

static bool overlaps(const Range *a, uint64_t offset, uint64_t length)
{
        return a->offset < offset + length && offset < a->offset + a->length;
}

static void restore_compare(BvRepo *r, const BvSnapshot *snap, const uint8_t *expect)
{
        _cleanup_free_ uint8_t *got = malloc(IMAGE);
        BvImage *img = NULL;
        uint64_t bad = 0;

        ASSERT_TRUE(got != NULL);
        ASSERT_OK(bv_image_open(r, snap, NULL, &img));
        ASSERT_EQ(bv_image_size(img), IMAGE);
        ASSERT_OK(bv_image_pread(img, got, IMAGE, 0, &bad));
        ASSERT_MEMEQ(got, expect, IMAGE);
        bv_image_free(img);
}

TEST(reused_extents_are_not_read)
{
        RepoFixture fx = fixture_repo();
        _cleanup_free_ uint8_t *image = malloc(IMAGE);
        _cleanup_free_ char *path = fixture_path(&fx, "v1.img"), *v1_id = NULL;
        const Range changed[] = { { 3 * MIB + 12345, 200000 }, { 9 * MIB, 2 * MIB } };
        const BvSnapshot *parent, *child;
        FakeSource fake = { .size = IMAGE, .changed = changed, .n_changed = ELEMENTSOF(changed) };
        BvBackupOptions o = { .threads = 2, .name = "vm" };
        BvBackupStats st;
        BvSource *src = NULL;
        BvRepo *r = NULL;

        /* v1: random data with a zero run, backed up from a file as usual */
        ASSERT_TRUE(image != NULL);
        bvtest_fill_random(image, IMAGE, 7);
        memset(image + 5 * MIB, 0, 2 * MIB);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_pwrite_all(fd, image, IMAGE, 0));
        v1_id = fixture_backup(&fx, path);

        /* v2: the changed ranges are new random data, and come from the fake source */
        for (size_t i = 0; i < ELEMENTSOF(changed); i++)
                bvtest_fill_random(image + changed[i].offset, changed[i].length, 100 + i);
        fake.image = image;
        ASSERT_OK(bv_repo_open(fx.repo, &fx.secret, BV_OPEN_WRITE, &r));
        ASSERT_OK(bv_repo_find_snapshot(r, v1_id, &parent));
        o.parent = parent;
        /* the parent's map read ahead in a thread (as while libvirt begins a job), then joined;
         * no parent: no thread */
        BvParentWarm *warm = NULL;
        ASSERT_OK(bv_parent_warm_start(r, (const BvSnapshot *const[]){ parent }, 1, &warm));
        ASSERT_TRUE(warm != NULL);
        bv_parent_warm_join(warm);
        ASSERT_OK(bv_parent_warm_start(r, NULL, 0, &warm));
        ASSERT_TRUE(warm == NULL);
        bv_parent_warm_join(NULL);
        ASSERT_OK(bv_source_new(&fake_ops, &fake, BV_SOURCE_BLOCKDEV, "/dev/fake", &src));
        ASSERT_OK(bv_backup(r, src, &o, &st));
        bv_source_free(src);

        /* read: the changed ranges and at most a chunk (256 KiB) sticking out at each of their
         * ends; the bytes_read counter says the same */
        uint64_t changed_bytes = changed[0].length + changed[1].length;
        ASSERT_TRUE(fake.bytes_read >= changed_bytes);
        ASSERT_TRUE(fake.bytes_read <= changed_bytes + 4 * BV_CHUNK_MAX_DEFAULT);
        ASSERT_EQ(st.counts.bytes_read, fake.bytes_read);

        /* not one of the parent's data chunks that lie wholly in an unchanged range was read */
        FixtureFetch ff = { .repo = r };
        BvMapReader *m = NULL;
        uint64_t reused = 0;
        ASSERT_OK(bv_object_codec_new(bv_repo_keyring(r), 3, &ff.codec));
        ASSERT_OK(bv_map_reader_new(parent->root, parent->height, parent->size, fixture_fetch, &ff, 64, &m));
        for (uint64_t pos = 0; pos < parent->size;) {
                BvMapExtent e;
                bool inside_changed = false, was_read = false;
                ASSERT_OK(bv_map_reader_lookup(m, pos, &e));
                for (size_t i = 0; i < ELEMENTSOF(changed); i++)
                        inside_changed |= overlaps(&changed[i], e.offset, e.length);
                for (size_t i = 0; i < fake.n_reads; i++)
                        was_read |= overlaps(&fake.reads[i], e.offset, e.length);
                if (!inside_changed) {
                        ASSERT_TRUE(!was_read);
                        reused += e.length;
                }
                pos = e.offset + e.length;
        }
        ASSERT_TRUE(reused >= IMAGE - changed_bytes - 4 * BV_CHUNK_MAX_DEFAULT);
        bv_map_reader_free(m);
        bv_object_codec_free(ff.codec);

        /* the zero run stayed a zero run; the new snapshot restores bit-exact, the parent too */
        ASSERT_TRUE(st.counts.bytes_zero >= 2 * MIB - 2 * BV_CHUNK_MAX_DEFAULT);
        bv_repo_close(r);
        ASSERT_OK(bv_repo_open(fx.repo, &fx.secret, BV_OPEN_READ, &r));
        ASSERT_OK(bv_repo_find_snapshot(r, st.snapshot_id, &child));
        restore_compare(r, child, image);
        ASSERT_STREQ(child->source.path, "/dev/fake");
        bv_repo_close(r);
        fixture_free(&fx);
}

TEST(unchanged_without_parent)
{
        RepoFixture fx = fixture_repo();
        _cleanup_free_ uint8_t *image = calloc(1, MIB);
        const Range changed[] = { { 0, 4096 } };
        FakeSource fake = { .image = image, .size = MIB, .changed = changed, .n_changed = 1 };
        BvSource *src = NULL;
        BvBackupStats st;
        BvRepo *r = NULL;

        ASSERT_OK(bv_repo_open(fx.repo, &fx.secret, BV_OPEN_WRITE, &r));
        ASSERT_OK(bv_source_new(&fake_ops, &fake, BV_SOURCE_BLOCKDEV, "/dev/fake", &src));
        ASSERT_ERROR(bv_backup(r, src, NULL, &st), EINVAL);
        bv_source_free(src);
        bv_repo_close(r);
        fixture_free(&fx);
}

/* bv_backup refuses the names bv_backup_path refuses ("latest", a hex id would read as a
 * snapshot's id), whoever calls it (the appliance does, with a job's name), and publishes nothing. */
TEST(refused_names)
{
        static const char *const names[] = { "latest", "deadbeef" };
        RepoFixture fx = fixture_repo();
        _cleanup_free_ char *path = fixture_path(&fx, "plain.img");
        BvSnapshot *const *list;
        BvBackupStats st;
        BvRepo *r = NULL;
        size_t n;

        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0 && bv_pwrite_all(fd, "data", 4, 0) == 0);
        ASSERT_OK(bv_repo_open(fx.repo, &fx.secret, BV_OPEN_WRITE, &r));
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                BvSource *src = NULL;
                ASSERT_OK(bv_source_open(path, NULL, &src));
                ASSERT_ERROR(bv_backup(r, src, &(BvBackupOptions){ .name = names[i] }, &st), EINVAL);
                bv_source_free(src);
        }
        ASSERT_OK(bv_repo_snapshots(r, &list, &n));
        ASSERT_EQ(n, 0u);
        /* the same source under a name of its own is backed up */
        BvSource *src = NULL;
        ASSERT_OK(bv_source_open(path, NULL, &src));
        ASSERT_OK(bv_backup(r, src, &(BvBackupOptions){ .name = "vm" }, &st));
        bv_source_free(src);
        bv_repo_close(r);
        fixture_free(&fx);
}

int main(void)
{
        RUN(reused_extents_are_not_read);
        RUN(unchanged_without_parent);
        RUN(refused_names);
        return 0;
}
