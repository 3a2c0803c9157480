/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Leases and the gc epoch: a lease carries the epoch read before it became visible; a scan
 * counts live leases and their lowest epoch and reaps those whose holder ended. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bvtest.h"
#include "json-util.h"
#include "lease.h"
#include "macro.h"

/* A scan that reaps finds REAPED leases of ended holders and LIVE others, the lowest epoch MIN
 * and the highest MAX. */
static void expect_scan(BvBackend *bk, int reaped, size_t live, uint64_t min, uint64_t max)
{
        uint64_t m, x;
        size_t l;

        ASSERT_EQ(bv_leases_scan(bk, true, &m, &x, &l, NULL), reaped);
        ASSERT_EQ(l, live);
        ASSERT_EQ(m, min);
        ASSERT_EQ(x, max);
}

TEST(epoch_and_scan)
{
        BvTestDir d = bvtest_dir_new();
        int dfd = d.dfd;
        BvBackend *bk = NULL;
        ASSERT_OK(bv_backend_open(d.dir, false, &bk));
        BvLease *a = NULL, *b = NULL;
        uint64_t e;

        ASSERT_OK(bv_gc_epoch_read(bk, &e));
        ASSERT_EQ(e, 0u);
        expect_scan(bk, 0, 0, UINT64_MAX, 0);

        ASSERT_OK(bv_lease_take(bk, BV_LEASE_WRITE, &a, &e, NULL));
        ASSERT_EQ(e, 0u);
        ASSERT_OK(bv_gc_epoch_write(bk, 5));
        ASSERT_OK(bv_gc_epoch_read(bk, &e));
        ASSERT_EQ(e, 5u);
        ASSERT_OK(bv_lease_take(bk, BV_LEASE_EXPORT, &b, &e, NULL));
        ASSERT_EQ(e, 5u);
        expect_scan(bk, 0, 2, 0, 5);
        bv_lease_release(a);
        expect_scan(bk, 0, 1, 5, 5);

        /* a holder that dies leaves its file, unlocked: the scan reaps it */
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                BvLease *c = NULL;
                _exit(bv_lease_take(bk, BV_LEASE_READ, &c, NULL, NULL) < 0 ? 1 : 0);
        }
        int status;
        ASSERT_TRUE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        expect_scan(bk, 1, 1, 5, 5);
        bv_lease_release(b);
        expect_scan(bk, 0, 0, UINT64_MAX, 0);

        /* a damaged epoch file is refused */
        _cleanup_close_ int gfd = openat(dfd, "gc/epoch", O_WRONLY | O_TRUNC | O_CLOEXEC);
        ASSERT_TRUE(gfd >= 0 && write(gfd, "x\n", 2) == 2);
        ASSERT_ERROR(bv_gc_epoch_read(bk, &e), EBADMSG);
        bv_backend_close(bk);
        bvtest_dir_done(&d);
}

/* A lease that is a FIFO or a symbolic link fails the scan, named (a dry run's too); so does
 * a gc/epoch that is a FIFO when a lease is taken. */
TEST(scan_refuses_and_names)
{
        BvTestDir d = bvtest_dir_new();
        int dfd = d.dfd;
        BvBackend *bk = NULL;
        ASSERT_OK(bv_backend_open(d.dir, false, &bk));
        BvRepoProblem p;
        uint64_t min;
        size_t live;

        ASSERT_TRUE(mkdirat(dfd, "leases", 0700) == 0);
        ASSERT_TRUE(mkfifoat(dfd, "leases/00112233445566aa.lease", 0600) == 0);
        for (int reap = 0; reap <= 1; reap++) {
                ASSERT_ERROR(bv_leases_scan(bk, reap, &min, NULL, &live, &p), EBADFD);
                ASSERT_STREQ(p.path, "leases/00112233445566aa.lease");
                ASSERT_EQ(p.mode, (uint32_t)S_IFIFO);
                ASSERT_EQ(p.error, -EBADFD);
        }
        ASSERT_TRUE(unlinkat(dfd, "leases/00112233445566aa.lease", 0) == 0);
        ASSERT_TRUE(symlinkat("/dev/null", dfd, "leases/00112233445566bb.lease") == 0);
        ASSERT_ERROR(bv_leases_scan(bk, true, &min, NULL, &live, &p), ELOOP);
        ASSERT_STREQ(p.path, "leases/00112233445566bb.lease");
        ASSERT_EQ(p.mode, (uint32_t)S_IFLNK);
        /* what is not named like a lease is not looked at */
        ASSERT_TRUE(unlinkat(dfd, "leases/00112233445566bb.lease", 0) == 0);
        ASSERT_TRUE(mkfifoat(dfd, "leases/not-a-lease", 0600) == 0);
        ASSERT_EQ(bv_leases_scan(bk, true, &min, NULL, &live, &p), 0);
        ASSERT_EQ(live, 0u);
        /* a lease is taken after reading gc/epoch: an epoch that is a FIFO is named */
        BvLease *l = NULL;
        ASSERT_TRUE(mkdirat(dfd, "gc", 0700) == 0 && mkfifoat(dfd, "gc/epoch", 0600) == 0);
        ASSERT_ERROR(bv_lease_take(bk, BV_LEASE_READ, &l, NULL, &p), EBADFD);
        ASSERT_STREQ(p.path, "gc/epoch");
        ASSERT_EQ(p.mode, (uint32_t)S_IFIFO);
        ASSERT_TRUE(l == NULL);
        bv_backend_close(bk);
        bvtest_dir_done(&d);
}

/* A lease file is one JSON object that docs/LIFECYCLE.md describes: kind, epoch, pid and an
 * empty snapshot, read back as written. */
TEST(file_format)
{
        BvTestDir d = bvtest_dir_new();
        (void)d.dfd;
        BvBackend *bk = NULL;
        ASSERT_OK(bv_backend_open(d.dir, false, &bk));
        _cleanup_(json_object_putp) struct json_object *o = NULL;
        _cleanup_free_ char *snapshot = NULL;
        BvLease *l = NULL;
        char path[PATH_MAX], buf[4096];
        uint64_t e = 0;
        struct dirent *de;

        ASSERT_OK(bv_gc_epoch_write(bk, 7));
        ASSERT_OK(bv_lease_take(bk, BV_LEASE_EXPORT, &l, NULL, NULL));
        snprintf(path, sizeof(path), "%s/leases", d.dir);
        DIR *ld = opendir(path);
        ASSERT_TRUE(ld != NULL);
        while ((de = readdir(ld)) && de->d_name[0] == '.')
                ;
        ASSERT_TRUE(de != NULL);
        snprintf(path, sizeof(path), "%s/leases/%s", d.dir, de->d_name);
        closedir(ld);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
        ASSERT_TRUE(n > 0 && buf[n - 1] == '\n');
        ASSERT_OK(bv_json_parse_object(buf, (size_t)n, 2, &o));
        ASSERT_OK(bv_json_get_string(o, "snapshot", &snapshot));
        ASSERT_STREQ(snapshot, "");
        _cleanup_free_ char *kind = NULL;
        ASSERT_OK(bv_json_get_string(o, "kind", &kind));
        ASSERT_STREQ(kind, "export");
        uint64_t pid = 0;
        ASSERT_OK(bv_json_get_u64(o, "pid", &pid));
        ASSERT_EQ(pid, (uint64_t)getpid());
        ASSERT_OK(bv_json_get_u64(o, "epoch", &e));
        ASSERT_EQ(e, 7u);
        bv_lease_release(l);
        bv_backend_close(bk);
        bvtest_dir_done(&d);
}

int main(void)
{
        RUN(epoch_and_scan);
        RUN(scan_refuses_and_names);
        RUN(file_format);
        return 0;
}
