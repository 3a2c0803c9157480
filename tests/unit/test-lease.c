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

TEST(epoch_and_scan)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        BvLease *a = NULL, *b = NULL;
        uint64_t e, min;
        size_t live;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_gc_epoch_read(dfd, &e));
        ASSERT_EQ(e, 0u);
        ASSERT_EQ(bv_leases_scan(dfd, true, &min, &live, NULL), 0);
        ASSERT_EQ(live, 0u);
        ASSERT_EQ(min, UINT64_MAX);

        ASSERT_OK(bv_lease_take(dfd, BV_LEASE_WRITE, NULL, &a, &e));
        ASSERT_EQ(e, 0u);
        ASSERT_OK(bv_gc_epoch_write(dfd, 5));
        ASSERT_OK(bv_gc_epoch_read(dfd, &e));
        ASSERT_EQ(e, 5u);
        ASSERT_OK(bv_lease_take(dfd, BV_LEASE_EXPORT, "00112233445566778899aabbccddeeff", &b, &e));
        ASSERT_EQ(e, 5u);
        ASSERT_EQ(bv_leases_scan(dfd, true, &min, &live, NULL), 0);
        ASSERT_EQ(live, 2u);
        ASSERT_EQ(min, 0u);
        bv_lease_release(a);
        ASSERT_EQ(bv_leases_scan(dfd, true, &min, &live, NULL), 0);
        ASSERT_EQ(live, 1u);
        ASSERT_EQ(min, 5u);

        /* a holder that dies leaves its file, unlocked: the scan reaps it */
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                BvLease *c = NULL;
                _exit(bv_lease_take(dfd, BV_LEASE_READ, NULL, &c, NULL) < 0 ? 1 : 0);
        }
        int status;
        ASSERT_TRUE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ASSERT_EQ(bv_leases_scan(dfd, true, &min, &live, NULL), 1);
        ASSERT_EQ(live, 1u);
        ASSERT_EQ(min, 5u);
        bv_lease_release(b);
        ASSERT_EQ(bv_leases_scan(dfd, true, &min, &live, NULL), 0);
        ASSERT_EQ(live, 0u);

        /* a damaged epoch file is refused */
        _cleanup_close_ int gfd = openat(dfd, "gc/epoch", O_WRONLY | O_TRUNC | O_CLOEXEC);
        ASSERT_TRUE(gfd >= 0 && write(gfd, "x\n", 2) == 2);
        ASSERT_ERROR(bv_gc_epoch_read(dfd, &e), EBADMSG);
        bvtest_rm_rf(dir);
}

/* A lease that is a FIFO or a symbolic link fails the scan, named (a dry run's too). */
TEST(scan_refuses_and_names)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        BvRepoProblem p;
        uint64_t min;
        size_t live;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_TRUE(mkdirat(dfd, "leases", 0700) == 0);
        ASSERT_TRUE(mkfifoat(dfd, "leases/00112233445566aa.lease", 0600) == 0);
        for (int reap = 0; reap <= 1; reap++) {
                ASSERT_ERROR(bv_leases_scan(dfd, reap, &min, &live, &p), EBADFD);
                ASSERT_STREQ(p.path, "leases/00112233445566aa.lease");
                ASSERT_EQ(p.mode, (uint32_t)S_IFIFO);
                ASSERT_EQ(p.error, -EBADFD);
        }
        ASSERT_TRUE(unlinkat(dfd, "leases/00112233445566aa.lease", 0) == 0);
        ASSERT_TRUE(symlinkat("/dev/null", dfd, "leases/00112233445566bb.lease") == 0);
        ASSERT_ERROR(bv_leases_scan(dfd, true, &min, &live, &p), ELOOP);
        ASSERT_STREQ(p.path, "leases/00112233445566bb.lease");
        ASSERT_EQ(p.mode, (uint32_t)S_IFLNK);
        /* what is not named like a lease is not looked at */
        ASSERT_TRUE(unlinkat(dfd, "leases/00112233445566bb.lease", 0) == 0);
        ASSERT_TRUE(mkfifoat(dfd, "leases/not-a-lease", 0600) == 0);
        ASSERT_EQ(bv_leases_scan(dfd, true, &min, &live, &p), 0);
        ASSERT_EQ(live, 0u);
        bvtest_rm_rf(dir);
}

/* The snapshot's name is a JSON string however it is spelt: a quote and a backslash read back
 * as they were, and the epoch with them (the name was copied unescaped: the file did not parse). */
TEST(snapshot_escaped)
{
        static const char name[] = "a\"b\\c\"}";
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_(json_object_putp) struct json_object *o = NULL;
        _cleanup_free_ char *snapshot = NULL;
        BvLease *l = NULL;
        char path[PATH_MAX], buf[4096];
        uint64_t e = 0;
        struct dirent *de;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_gc_epoch_write(dfd, 7));
        ASSERT_OK(bv_lease_take(dfd, BV_LEASE_EXPORT, name, &l, NULL));
        snprintf(path, sizeof(path), "%s/leases", dir);
        DIR *d = opendir(path);
        ASSERT_TRUE(d != NULL);
        while ((de = readdir(d)) && de->d_name[0] == '.')
                ;
        ASSERT_TRUE(de != NULL);
        snprintf(path, sizeof(path), "%s/leases/%s", dir, de->d_name);
        closedir(d);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
        ASSERT_TRUE(n > 0 && buf[n - 1] == '\n');
        ASSERT_OK(bv_json_parse_object(buf, (size_t)n, 2, &o));
        ASSERT_OK(bv_json_get_string(o, "snapshot", &snapshot));
        ASSERT_STREQ(snapshot, name);
        ASSERT_OK(bv_json_get_u64(o, "epoch", &e));
        ASSERT_EQ(e, 7u);
        bv_lease_release(l);
        bvtest_rm_rf(dir);
}

int main(void)
{
        RUN(epoch_and_scan);
        RUN(scan_refuses_and_names);
        RUN(snapshot_escaped);
        return 0;
}
