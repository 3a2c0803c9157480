/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bvtest.h"
#include "lock.h"
#include "macro.h"

/* Takes KIND (waiting for it with WAIT), which must succeed; returns the lock's fd. */
static int take(int dfd, BvLockKind kind, bool wait)
{
        int fd = bv_lock_take(dfd, kind, wait);

        ASSERT_OK(fd);
        return fd;
}

/* KIND is free: taken without waiting, and let go again. */
static void assert_free(int dfd, BvLockKind kind)
{
        safe_close(take(dfd, kind, false));
}

/* Waits for PID, which must have been killed by SIGKILL or else exited 0. */
static void reap(pid_t pid, bool killed)
{
        int status;

        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (killed)
                ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        else
                ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(exclusive_write_lock)
{
        BvTestDir d = bvtest_dir_new();
        struct stat st;
        int a;

        a = take(d.dfd, BV_LOCK_WRITE, false);
        ASSERT_TRUE(fstatat(d.dfd, "locks/write", &st, 0) == 0 && S_ISREG(st.st_mode));
        ASSERT_TRUE(fcntl(a, F_GETFD) & FD_CLOEXEC);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_WRITE, false), EBUSY);
        /* readers never block on the writer */
        assert_free(d.dfd, BV_LOCK_READ);
        safe_close(a);
        assert_free(d.dfd, BV_LOCK_WRITE);
        bvtest_dir_done(&d);
}

TEST(read_shared_gc_exclusive)
{
        BvTestDir d = bvtest_dir_new();
        int r1, r2, gc;

        r1 = take(d.dfd, BV_LOCK_READ, false);
        r2 = take(d.dfd, BV_LOCK_READ, true);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_GC, false), EBUSY);
        safe_close(r1);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_GC, false), EBUSY);
        safe_close(r2);

        gc = take(d.dfd, BV_LOCK_GC, false);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_READ, false), EBUSY);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_GC, false), EBUSY);
        /* GC and the writer are independent locks */
        assert_free(d.dfd, BV_LOCK_WRITE);
        safe_close(gc);
        bvtest_dir_done(&d);
}

/* locks/commit: one holder at a time, independent of locks/gc */
TEST(commit_lock)
{
        BvTestDir d = bvtest_dir_new();
        int c, gc;

        c = take(d.dfd, BV_LOCK_COMMIT, false);
        gc = take(d.dfd, BV_LOCK_GC, false);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_COMMIT, false), EBUSY);
        safe_close(c);
        assert_free(d.dfd, BV_LOCK_COMMIT);
        safe_close(gc);
        bvtest_dir_done(&d);
}

/* An index compaction is locks/gc: it keeps a gc out and a gc keeps it out; its holder record says
 * it is a compaction (1), a gc's does not (0). */
TEST(compaction)
{
        BvTestDir d = bvtest_dir_new();
        char who[256];

        int c = bv_lock_take(d.dfd, BV_LOCK_COMPACT, false);
        ASSERT_OK(c);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_GC, false), EBUSY);
        ASSERT_EQ(bv_lock_holder(d.dfd, BV_LOCK_GC, who, sizeof(who)), 1);
        safe_close(c);
        int gc = bv_lock_take(d.dfd, BV_LOCK_GC, false);
        ASSERT_OK(gc);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_COMPACT, false), EBUSY);
        ASSERT_EQ(bv_lock_holder(d.dfd, BV_LOCK_GC, who, sizeof(who)), 0);
        safe_close(gc);
        bvtest_dir_done(&d);
}

TEST(bad_arguments)
{
        BvTestDir d = bvtest_dir_new();
        _cleanup_close_ int file = -EBADF;

        ASSERT_ERROR(bv_lock_take(d.dfd, 0, false), EINVAL);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_COMPACT + 1, false), EINVAL);
        ASSERT_ERROR(bv_lock_take(-1, BV_LOCK_WRITE, false), EBADF);
        /* locks/ is a file: the lock cannot be created */
        file = openat(d.dfd, "locks", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        ASSERT_TRUE(file >= 0);
        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_WRITE, false), ENOTDIR);
        bvtest_dir_done(&d);
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
        BvTestDir d = bvtest_dir_new();
        pid_t pid = child_holding(d.dfd, BV_LOCK_WRITE, 0);

        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_WRITE, false), EBUSY);
        ASSERT_TRUE(kill(pid, SIGKILL) == 0);
        reap(pid, true);
        assert_free(d.dfd, BV_LOCK_WRITE);
        bvtest_dir_done(&d);
}

TEST(wait_for_holder)
{
        BvTestDir d = bvtest_dir_new();
        pid_t pid = child_holding(d.dfd, BV_LOCK_GC, 200);
        int fd;

        ASSERT_ERROR(bv_lock_take(d.dfd, BV_LOCK_READ, false), EBUSY);
        fd = take(d.dfd, BV_LOCK_READ, true); /* returns once the child exits */
        reap(pid, false);
        safe_close(fd);
        bvtest_dir_done(&d);
}

int main(void)
{
        RUN(exclusive_write_lock);
        RUN(read_shared_gc_exclusive);
        RUN(commit_lock);
        RUN(compaction);
        RUN(bad_arguments);
        RUN(killed_holder_releases);
        RUN(wait_for_holder);
        return 0;
}
