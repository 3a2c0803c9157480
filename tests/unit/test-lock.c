/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bvtest.h"
#include "lock.h"
#include "macro.h"

TEST(exclusive_write_lock)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        int a, b;

        ASSERT_TRUE(dfd >= 0);
        a = bv_lock_take(dfd, BV_LOCK_WRITE, false);
        ASSERT_OK(a);
        ASSERT_TRUE(fstatat(dfd, "locks/write", &st, 0) == 0 && S_ISREG(st.st_mode));
        ASSERT_TRUE(fcntl(a, F_GETFD) & FD_CLOEXEC);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_WRITE, false), EBUSY);

        /* readers never block on the writer */
        b = bv_lock_take(dfd, BV_LOCK_READ, false);
        ASSERT_OK(b);
        safe_close(b);

        safe_close(a);
        a = bv_lock_take(dfd, BV_LOCK_WRITE, false);
        ASSERT_OK(a);
        safe_close(a);
        bvtest_rm_rf(dir);
}

TEST(read_shared_gc_exclusive)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r1, r2, gc;

        r1 = bv_lock_take(dfd, BV_LOCK_READ, false);
        ASSERT_OK(r1);
        r2 = bv_lock_take(dfd, BV_LOCK_READ, true);
        ASSERT_OK(r2);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_GC, false), EBUSY);
        safe_close(r1);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_GC, false), EBUSY);
        safe_close(r2);

        gc = bv_lock_take(dfd, BV_LOCK_GC, false);
        ASSERT_OK(gc);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_READ, false), EBUSY);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_GC, false), EBUSY);
        /* GC and the writer are independent locks */
        r1 = bv_lock_take(dfd, BV_LOCK_WRITE, false);
        ASSERT_OK(r1);
        safe_close(r1);
        safe_close(gc);
        bvtest_rm_rf(dir);
}

/* locks/commit: one holder at a time, independent of locks/gc */
TEST(commit_lock)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int c = bv_lock_take(dfd, BV_LOCK_COMMIT, false);
        _cleanup_close_ int gc = bv_lock_take(dfd, BV_LOCK_GC, false);

        ASSERT_TRUE(c >= 0);
        ASSERT_TRUE(gc >= 0);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_COMMIT, false), EBUSY);
        c = safe_close(c);
        c = bv_lock_take(dfd, BV_LOCK_COMMIT, false);
        ASSERT_TRUE(c >= 0);
        bvtest_rm_rf(dir);
}

TEST(bad_arguments)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int file = -EBADF;

        ASSERT_ERROR(bv_lock_take(dfd, 0, false), EINVAL);
        ASSERT_ERROR(bv_lock_take(dfd, 5, false), EINVAL);
        ASSERT_ERROR(bv_lock_take(-1, BV_LOCK_WRITE, false), EBADF);
        /* locks/ is a file: the lock cannot be created */
        file = openat(dfd, "locks", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ASSERT_TRUE(file >= 0);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_WRITE, false), ENOTDIR);
        bvtest_rm_rf(dir);
}

/* Forks a child that takes the lock, reports it on a pipe, then waits to be killed or sleeps
 * hold_ms and exits. Returns its pid once it holds the lock. */
static pid_t child_holding(int dfd, BvLockKind kind, int hold_ms)
{
        int p[2];
        char c;
        pid_t pid;

        ASSERT_TRUE(pipe2(p, O_CLOEXEC) == 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int fd = bv_lock_take(dfd, kind, true);
                if (fd < 0 || write(p[1], "x", 1) != 1)
                        _exit(1);
                if (hold_ms > 0) {
                        usleep((useconds_t)hold_ms * 1000);
                        _exit(0);
                }
                for (;;)
                        pause();
        }
        safe_close(p[1]);
        ASSERT_EQ(read(p[0], &c, 1), 1);
        safe_close(p[0]);
        return pid;
}

TEST(killed_holder_releases)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int status, fd;
        pid_t pid;

        pid = child_holding(dfd, BV_LOCK_WRITE, 0);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_WRITE, false), EBUSY);
        ASSERT_TRUE(kill(pid, SIGKILL) == 0);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        fd = bv_lock_take(dfd, BV_LOCK_WRITE, false);
        ASSERT_OK(fd);
        safe_close(fd);
        bvtest_rm_rf(dir);
}

TEST(wait_for_holder)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int status, fd;
        pid_t pid;

        pid = child_holding(dfd, BV_LOCK_GC, 200);
        ASSERT_ERROR(bv_lock_take(dfd, BV_LOCK_READ, false), EBUSY);
        fd = bv_lock_take(dfd, BV_LOCK_READ, true); /* returns once the child exits */
        ASSERT_OK(fd);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        safe_close(fd);
        bvtest_rm_rf(dir);
}

int main(void)
{
        RUN(exclusive_write_lock);
        RUN(read_shared_gc_exclusive);
        RUN(commit_lock);
        RUN(bad_arguments);
        RUN(killed_holder_releases);
        RUN(wait_for_holder);
        return 0;
}
