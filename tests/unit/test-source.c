/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "bvtest.h"
#include "fileio.h"
#include "macro.h"
#include "source.h"

#define MIB (1024u * 1024u)

/* Everything a pass over a source produced: the image rebuilt in memory and extent counts. */
typedef struct Pass {
        uint8_t *image;
        uint64_t size;
        unsigned n_data, n_hole;
        uint64_t hole_bytes;
        BvExtent ext[64]; /* the first extents, for exact checks */
        unsigned n_ext;
} Pass;

static void pass_done(Pass *p)
{
        free(p->image);
}

/* Reads a whole source, checking the extent invariants: contiguous from 0, DATA at most
 * read_size, no two HOLE extents in a row, total = size. */
static void read_all(const char *path, const BvSourceOptions *opts, Pass *ret)
{
        BvSource *s = NULL;
        Pass p = {};
        BvExtent e;
        int r;
        bool last_hole = false;
        uint64_t cap = 0;
        size_t rs = opts && opts->read_size ? opts->read_size : MIB;

        ASSERT_OK(bv_source_open(path, opts, &s));
        while ((r = bv_source_next(s, &e)) > 0) {
                ASSERT_EQ(e.offset, p.size);
                ASSERT_TRUE(e.length > 0);
                while (p.size + e.length > cap) {
                        cap = MAX(cap * 2, (uint64_t)MIB);
                        p.image = realloc(p.image, cap);
                        ASSERT_TRUE(p.image != NULL);
                }
                if (e.kind == BV_EXTENT_DATA) {
                        ASSERT_TRUE(e.length <= rs);
                        memcpy(p.image + p.size, e.data, e.length);
                        p.n_data++;
                        last_hole = false;
                } else {
                        ASSERT_EQ(e.kind, BV_EXTENT_HOLE);
                        ASSERT_TRUE(!last_hole);
                        ASSERT_TRUE(e.data == NULL);
                        memset(p.image + p.size, 0, e.length);
                        p.n_hole++;
                        p.hole_bytes += e.length;
                        last_hole = true;
                }
                if (p.n_ext < ELEMENTSOF(p.ext))
                        p.ext[p.n_ext++] = e;
                p.size += e.length;
        }
        ASSERT_OK(r);
        ASSERT_EQ(bv_source_size(s), p.size);
        /* the end is sticky */
        ASSERT_EQ(bv_source_next(s, &e), 0);
        bv_source_free(s);
        *ret = p;
}

static char *path_in(const char *dir, const char *name)
{
        char *p;
        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) >= 0);
        return p;
}

/* Creates (or empties) dir/name for reading and writing; *ret_path gets the path. */
static int create_in(const char *dir, const char *name, char **ret_path)
{
        *ret_path = path_in(dir, name);
        int fd = open(*ret_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        return fd;
}

static void write_at(int fd, uint64_t offset, size_t len, uint64_t seed)
{
        _cleanup_free_ uint8_t *buf = malloc(len);
        ASSERT_TRUE(buf != NULL);
        bvtest_fill_random(buf, len, seed);
        ASSERT_OK(bv_pwrite_all(fd, buf, len, offset));
}

static uint8_t *slurp(const char *path, uint64_t *ret_size)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint64_t size;
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_fd_size(fd, &size));
        uint8_t *buf = malloc(size ? size : 1);
        ASSERT_TRUE(buf != NULL);
        ASSERT_EQ(bv_pread_all(fd, buf, size, 0), (long long)size);
        *ret_size = size;
        return buf;
}

/* Data at 0 (64 KiB), 5 MiB (3 MiB), 20 MiB (4 KiB), a hole at the end: 40 MiB in all. */
static void make_sparse(const char *path)
{
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        write_at(fd, 0, 64 * 1024, 1);
        write_at(fd, 5 * MIB, 3 * MIB, 2);
        write_at(fd, 20 * MIB, 4096, 3);
        ASSERT_TRUE(ftruncate(fd, 40 * MIB) == 0);
        ASSERT_TRUE(fsync(fd) == 0);
}

static void check_extent(const BvExtent *e, BvExtentKind kind, uint64_t offset, uint64_t length)
{
        ASSERT_EQ(e->kind, kind);
        ASSERT_EQ(e->offset, offset);
        ASSERT_EQ(e->length, length);
}

static void check_same_as_file(const char *path, const Pass *p)
{
        uint64_t size;
        _cleanup_free_ uint8_t *want = slurp(path, &size);
        ASSERT_EQ(p->size, size);
        ASSERT_MEMEQ(p->image, want, size);
}

TEST(sparse_file_extents)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = path_in(dir, "sparse");
        Pass p;

        make_sparse(f);
        read_all(f, NULL, &p);
        check_same_as_file(f, &p);
        ASSERT_EQ(p.n_ext, 8);
        check_extent(&p.ext[0], BV_EXTENT_DATA, 0, 64 * 1024);
        check_extent(&p.ext[1], BV_EXTENT_HOLE, 64 * 1024, 5 * MIB - 64 * 1024);
        check_extent(&p.ext[2], BV_EXTENT_DATA, 5 * MIB, MIB);
        check_extent(&p.ext[3], BV_EXTENT_DATA, 6 * MIB, MIB);
        check_extent(&p.ext[4], BV_EXTENT_DATA, 7 * MIB, MIB);
        check_extent(&p.ext[5], BV_EXTENT_HOLE, 8 * MIB, 12 * MIB);
        check_extent(&p.ext[6], BV_EXTENT_DATA, 20 * MIB, 4096);
        check_extent(&p.ext[7], BV_EXTENT_HOLE, 20 * MIB + 4096, 20 * MIB - 4096);
        ASSERT_EQ(p.hole_bytes, 40 * MIB - (64 * 1024 + 3 * MIB + 4096));
        pass_done(&p);
        bvtest_rm_rf(dir);
}

/* How many DATA reads a pass over path with opts queued ahead at most, checking that the
 * extents alternate: 64 KiB of data at every 128 KiB, holes between. */
static unsigned reads_ahead(const char *path, const BvSourceOptions *opts, unsigned n_regions)
{
        BvSource *s = NULL;
        BvSourceReadStats st;
        BvExtent e;
        unsigned i = 0;
        int r;

        ASSERT_OK(bv_source_open(path, opts, &s));
        while ((r = bv_source_next(s, &e)) > 0) {
                ASSERT_EQ(e.kind, i % 2 == 0 ? BV_EXTENT_DATA : BV_EXTENT_HOLE);
                ASSERT_EQ(e.offset, (uint64_t)i * 64 * 1024);
                ASSERT_EQ(e.length, 64 * 1024);
                i++;
        }
        ASSERT_OK(r);
        ASSERT_EQ(i, 2 * n_regions);
        bv_source_read_stats(s, &st);
        bv_source_free(s);
        return st.reads_ahead_max;
}

/* Holes do not take the place of reads: on an image of small data regions between holes (an
 * installed system's), queue_depth reads are queued ahead, not half as many (a hole had a slot
 * of its own; this failed with 8 of 16 and 2 of 4 before). A file is read 16 deep by default. */
TEST(holes_keep_reads_in_flight)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = NULL;
        _cleanup_close_ int fd = create_in(dir, "gappy", &f);
        const unsigned n = 40;

        for (unsigned i = 0; i < n; i++)
                write_at(fd, (uint64_t)i * 128 * 1024, 64 * 1024, i + 1);
        ASSERT_TRUE(ftruncate(fd, (uint64_t)n * 128 * 1024) == 0);
        ASSERT_TRUE(fsync(fd) == 0);

        ASSERT_EQ(reads_ahead(f, NULL, n), BV_SOURCE_FILE_QUEUE_DEPTH);
        ASSERT_EQ(reads_ahead(f, &(BvSourceOptions){ .queue_depth = 4 }, n), 4);
        ASSERT_EQ(reads_ahead(f, &(BvSourceOptions){ .queue_depth = 4, .no_direct = true }, n), 4);
        ASSERT_EQ(reads_ahead(f, &(BvSourceOptions){ .no_uring = true }, n), 1);
        bvtest_rm_rf(dir);
}

TEST(unaligned_size)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = NULL;
        _cleanup_close_ int fd = create_in(dir, "odd", &f);
        BvSource *s = NULL;
        Pass p;

        write_at(fd, 0, 3 * MIB + 1234, 7);
        ASSERT_OK(bv_source_open(f, NULL, &s));
        ASSERT_EQ(bv_source_kind(s), BV_SOURCE_FILE);
        ASSERT_STREQ(bv_source_kind_name(bv_source_kind(s)), "file");
        ASSERT_STREQ(bv_source_path(s), f);
        ASSERT_EQ(bv_source_size(s), 3 * MIB + 1234);
        ASSERT_TRUE(bv_source_uses_direct(s)); /* ext4 under /var/tmp takes O_DIRECT */
        ASSERT_TRUE(bv_source_uses_uring(s));
        bv_source_free(s);

        read_all(f, NULL, &p);
        check_same_as_file(f, &p);
        ASSERT_EQ(p.n_data, 4);
        ASSERT_EQ(p.ext[3].length, 1234);
        pass_done(&p);

        /* an unaligned size that ends inside a hole */
        ASSERT_TRUE(ftruncate(fd, 9 * MIB + 1) == 0);
        read_all(f, NULL, &p);
        check_same_as_file(f, &p);
        ASSERT_EQ(p.ext[p.n_ext - 1].kind, BV_EXTENT_HOLE);
        pass_done(&p);
        bvtest_rm_rf(dir);
}

TEST(empty_file)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = NULL;
        _cleanup_close_ int fd = create_in(dir, "empty", &f);
        BvSource *s = NULL;
        BvExtent e;

        for (int no_uring = 0; no_uring <= 1; no_uring++) {
                BvSourceOptions o = { .no_uring = no_uring };
                ASSERT_OK(bv_source_open(f, &o, &s));
                ASSERT_EQ(bv_source_size(s), 0);
                ASSERT_EQ(bv_source_next(s, &e), 0);
                ASSERT_EQ(bv_source_next(s, &e), 0);
                bv_source_free(s);
        }
        bvtest_rm_rf(dir);
}

/* Every mode gives the same extents and bytes. */
static void check_modes(const char *f)
{
        static const BvSourceOptions modes[] = {
                { .no_direct = true },
                { .no_uring = true },
                { .no_uring = true, .no_direct = true },
                { .read_size = 4096 },
                { .read_size = 64 * 1024, .queue_depth = 1 },
                { .read_size = 192 * 1024, .queue_depth = 3, .no_direct = true },
        };
        Pass ref, p;

        read_all(f, NULL, &ref);
        check_same_as_file(f, &ref);
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                read_all(f, &modes[i], &p);
                ASSERT_EQ(p.size, ref.size);
                ASSERT_EQ(p.hole_bytes, ref.hole_bytes);
                ASSERT_EQ(p.n_hole, ref.n_hole);
                ASSERT_MEMEQ(p.image, ref.image, ref.size);
                pass_done(&p);
        }
        pass_done(&ref);
}

TEST(modes_agree)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = path_in(dir, "sparse");
        make_sparse(f);
        check_modes(f);

        _cleanup_free_ char *g = NULL;
        _cleanup_close_ int fd = create_in(dir, "dense", &g);
        ASSERT_TRUE(fd >= 0);
        write_at(fd, 0, 11 * MIB + 555, 9);
        check_modes(g);
        bvtest_rm_rf(dir);
}

TEST(tmpfs_file)
{
        char dir[] = "/dev/shm/bvtest-XXXXXX";
        ASSERT_TRUE(mkdtemp(dir) != NULL);
        _cleanup_free_ char *f = path_in(dir, "sparse");
        make_sparse(f);
        check_modes(f);

        Pass p;
        read_all(f, NULL, &p);
        ASSERT_EQ(p.hole_bytes, 40 * MIB - (64 * 1024 + 3 * MIB + 4096));
        pass_done(&p);
        bvtest_rm_rf(dir);
}

/* Runs a child that writes len pseudo-random bytes (seed) into a pipe in uneven pieces;
 * returns the read end. */
static int spawn_writer(size_t len, uint64_t seed, pid_t *ret_pid)
{
        int pfd[2];
        ASSERT_TRUE(pipe2(pfd, O_CLOEXEC) == 0);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                uint8_t *buf = malloc(len);
                if (!buf)
                        _exit(1);
                bvtest_fill_random(buf, len, seed);
                for (size_t done = 0, piece = 1000; done < len; piece = piece * 3 % 70001 + 1) {
                        size_t n = MIN(piece, len - done);
                        if (bv_write_all(pfd[1], buf + done, n) < 0)
                                _exit(1);
                        done += n;
                }
                _exit(0);
        }
        close(pfd[1]);
        *ret_pid = pid;
        return pfd[0];
}

static void check_stream(const char *path, size_t len, uint64_t seed, pid_t pid)
{
        BvSourceOptions o = { .read_size = 256 * 1024 };
        BvSource *s = NULL;
        BvExtent e;
        uint64_t pos = 0;
        int r, status;
        _cleanup_free_ uint8_t *want = malloc(len);

        ASSERT_TRUE(want != NULL);
        bvtest_fill_random(want, len, seed);
        ASSERT_OK(bv_source_open(path, &o, &s));
        ASSERT_EQ(bv_source_kind(s), BV_SOURCE_STREAM);
        ASSERT_TRUE(bv_source_size(s) == UINT64_MAX);
        ASSERT_TRUE(!bv_source_uses_direct(s));
        while ((r = bv_source_next(s, &e)) > 0) {
                ASSERT_EQ(e.kind, BV_EXTENT_DATA);
                ASSERT_EQ(e.offset, pos);
                ASSERT_TRUE(e.length <= o.read_size);
                ASSERT_TRUE(pos + e.length <= len);
                ASSERT_MEMEQ(e.data, want + pos, e.length);
                pos += e.length;
        }
        ASSERT_OK(r);
        ASSERT_EQ(pos, len);
        ASSERT_EQ(bv_source_size(s), len);
        ASSERT_EQ(bv_source_next(s, &e), 0);
        bv_source_free(s);
        ASSERT_TRUE(waitpid(pid, &status, 0) == pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(stdin_stream)
{
        const size_t len = 5 * MIB + 17;
        pid_t pid;
        int rfd = spawn_writer(len, 11, &pid);
        int saved = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);

        ASSERT_TRUE(saved >= 0);
        ASSERT_TRUE(dup2(rfd, STDIN_FILENO) == STDIN_FILENO);
        close(rfd);
        check_stream("-", len, 11, pid);
        ASSERT_TRUE(dup2(saved, STDIN_FILENO) == STDIN_FILENO);
        close(saved);
}

TEST(pipe_path_stream)
{
        const size_t len = 3 * MIB + 4097;
        pid_t pid;
        int rfd = spawn_writer(len, 12, &pid);
        _cleanup_free_ char *path = NULL;

        ASSERT_TRUE(asprintf(&path, "/proc/self/fd/%d", rfd) >= 0);
        check_stream(path, len, 12, pid);
        close(rfd);
}

TEST(open_errors)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *missing = path_in(dir, "missing");
        _cleanup_free_ char *f = NULL;
        _cleanup_close_ int fd = create_in(dir, "f", &f);
        BvSource *s = NULL;

        ASSERT_ERROR(bv_source_open(missing, NULL, &s), ENOENT);
        ASSERT_ERROR(bv_source_open(dir, NULL, &s), EISDIR);
        ASSERT_ERROR(bv_source_open("/dev/null", NULL, &s), ENODEV);
        ASSERT_ERROR(bv_source_open(f, &(BvSourceOptions){ .read_size = 1000 }, &s), EINVAL);
        ASSERT_ERROR(bv_source_open(f, &(BvSourceOptions){ .read_size = 128 * MIB }, &s), EINVAL);
        ASSERT_ERROR(bv_source_open(f, &(BvSourceOptions){ .queue_depth = 1000 }, &s), EINVAL);
        ASSERT_TRUE(s == NULL);
        bvtest_rm_rf(dir);
}

/* A file that shrinks while it is read: -ENODATA, and it stays failed. */
TEST(shrinking_file)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = NULL;
        _cleanup_close_ int fd = create_in(dir, "shrink", &f);
        static const BvSourceOptions modes[] = {
                { .no_uring = true },
                { .no_uring = true, .no_direct = true },
                { .queue_depth = 2 },
                { .queue_depth = 2, .no_direct = true },
        };

        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                BvSource *s = NULL;
                BvExtent e;
                int r;

                write_at(fd, 0, 16 * MIB, 5);
                ASSERT_OK(bv_source_open(f, &modes[i], &s));
                ASSERT_EQ(bv_source_next(s, &e), 1);
                ASSERT_TRUE(ftruncate(fd, 2 * MIB + 100) == 0);
                while ((r = bv_source_next(s, &e)) > 0)
                        ASSERT_TRUE(e.offset + e.length <= 6 * MIB);
                ASSERT_EQ(r, -ENODATA);
                ASSERT_EQ(bv_source_next(s, &e), -ENODATA);
                bv_source_free(s);
        }
        bvtest_rm_rf(dir);
}

/* A qcow2 with a dirty bitmap, read through qemu-nbd: the changed ranges, asked before the pass,
 * are the bitmap's dirty granules (64 KiB), merged, to the end; asked once; none for a whole
 * read or without a bitmap. */
TEST(changed_ranges)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *img = NULL, *cmd = NULL;
        const BvByteRange *r = NULL, *again = NULL;
        size_t n = 0, n_again = 0;
        BvSource *s = NULL;

        ASSERT_TRUE(asprintf(&img, "%s/d.qcow2", dir) >= 0);
        ASSERT_TRUE(asprintf(&cmd, "qemu-img create -q -f qcow2 '%s' 8M && qemu-img bitmap --add --enable -f qcow2 "
                                   "'%s' b0 && qemu-io -f qcow2 -c 'write -P 1 1M 4k' -c 'write -P 2 3M 128k' "
                                   "-c 'write -P 3 3200k 64k' -c 'write -P 4 7M 1M' '%s' >/dev/null",
                     img, img, img) >= 0);
        ASSERT_TRUE(system(cmd) == 0);

        BvSourceOptions o = { .image_format = "qcow2", .dirty_bitmap = "b0" };
        ASSERT_OK(bv_source_open_image(img, &o, &s));
        ASSERT_OK(bv_source_changed_ranges(s, &r, &n));
        ASSERT_EQ(n, 3);
        ASSERT_TRUE(r[0].offset == 1 * MIB && r[0].length == 64 * 1024);
        ASSERT_TRUE(r[1].offset == 3 * MIB && r[1].length == 192 * 1024); /* 128k and the next 64k */
        ASSERT_TRUE(r[2].offset == 7 * MIB && r[2].length == 1 * MIB);
        ASSERT_OK(bv_source_changed_ranges(s, &again, &n_again));
        ASSERT_TRUE(again == r && n_again == n);
        bv_source_free(s);

        ASSERT_OK(bv_source_open_image(img, &o, &s));
        ASSERT_OK(bv_source_read_all(s));
        ASSERT_ERROR(bv_source_changed_ranges(s, &r, &n), EOPNOTSUPP);
        bv_source_free(s);
        o.dirty_bitmap = NULL;
        ASSERT_OK(bv_source_open_image(img, &o, &s));
        ASSERT_ERROR(bv_source_changed_ranges(s, &r, &n), EOPNOTSUPP);
        bv_source_free(s);
        bvtest_rm_rf(dir);
}

/* Returns false (with a reason) when not root. */
static bool block_device(void)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ char *f = NULL;
        _cleanup_free_ char *cmd = NULL;
        BvSource *s = NULL;

        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: block_device needs root for losetup\n");
                bvtest_rm_rf(dir);
                return false;
        }
        _cleanup_close_ int fd = create_in(dir, "backing", &f);
        write_at(fd, 0, 64 * MIB, 21);
        ASSERT_TRUE(fsync(fd) == 0);

        _cleanup_free_ char *dev = bvtest_loop_attach(f);

        /* hold the device open and detach at once: the kernel drops it at the last close,
         * so an aborted test leaves no loop device behind */
        _cleanup_close_ int holder = open(dev, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(holder >= 0);
        ASSERT_TRUE(asprintf(&cmd, "losetup -d '%s'", dev) >= 0);
        ASSERT_TRUE(system(cmd) == 0);

        ASSERT_OK(bv_source_open(dev, NULL, &s));
        ASSERT_EQ(bv_source_kind(s), BV_SOURCE_BLOCKDEV);
        ASSERT_STREQ(bv_source_kind_name(BV_SOURCE_BLOCKDEV), "blockdev");
        ASSERT_EQ(bv_source_size(s), 64 * MIB);
        ASSERT_TRUE(bv_source_uses_direct(s));
        bv_source_free(s);

        Pass p;
        read_all(dev, NULL, &p);
        check_same_as_file(f, &p);
        ASSERT_EQ(p.n_hole, 0);
        ASSERT_EQ(p.n_data, 64);
        pass_done(&p);
        check_modes(dev);
        bvtest_rm_rf(dir);
        return true;
}

int main(void)
{
        RUN(sparse_file_extents);
        RUN(holes_keep_reads_in_flight);
        RUN(unaligned_size);
        RUN(empty_file);
        RUN(modes_agree);
        RUN(tmpfs_file);
        RUN(stdin_stream);
        RUN(pipe_path_stream);
        RUN(open_errors);
        RUN(shrinking_file);
        RUN(changed_ranges);
        if (!block_device())
                return 77;
        printf("ok - block_device\n");
        return 0;
}
