/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Repository locks with flock(2): the kernel drops a lock when the last fd of its open file
 * description closes, so a crashed or killed process never leaves one behind. The lock
 * files are opened read-only (flock needs no write access), so a reader can lock a
 * repository on a read-only mount once the files exist: a writer creates the readers' file
 * too, so that a repository only ever backed up into (a drive of the appliance) can be read
 * from a read-only mount (a restore-only target).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fileio.h"
#include "lock.h"
#include "macro.h"

/* locks/<name>, resolved beneath the repository: neither locks/ nor the file may be a symbolic
 * link, and the file must be a regular one (a FIFO must not hang the open). Whoever can create
 * one lock file creates both, so that a reader finds locks/gc on a read-only mount of a drive that
 * only ever saw backups (which take locks/write). */
static int lock_open(int repo_dirfd, const char *path, const char *sibling)
{
        int fd;

        if (mkdirat(repo_dirfd, "locks", 0700) < 0 && errno != EEXIST && errno != EROFS)
                return negative_errno();
        fd = bv_open_file_beneath(repo_dirfd, path, O_RDONLY | O_CREAT);
        if (fd == -EROFS || fd == -EACCES)
                return bv_open_file_beneath(repo_dirfd, path, O_RDONLY);
        if (fd >= 0) {
                int s = bv_open_file_beneath(repo_dirfd, sibling, O_RDONLY | O_CREAT);
                if (s >= 0)
                        close(s);
        }
        return fd;
}

/* A shared lock on a read-only filesystem whose locks/gc was never made (a repository written
 * before lock_open made both files): nothing can collect garbage through a read-only mount, so
 * the reader goes on with a shared lock on the repository directory, which no one else takes. */
static int read_lock_readonly(int repo_dirfd, int fd)
{
        struct statvfs st;
        if (fd != -ENOENT || fstatvfs(repo_dirfd, &st) < 0 || !(st.f_flag & ST_RDONLY))
                return fd;
        fd = openat(repo_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

/* Each kind's file, the file made beside it (so that both exist once either was taken), and how. */
static const struct {
        const char *path, *sibling;
        int op;
} lock_kinds[] = {
        [BV_LOCK_WRITE] = { "locks/write", "locks/gc", LOCK_EX },
        [BV_LOCK_READ] = { "locks/gc", "locks/write", LOCK_SH },
        [BV_LOCK_GC] = { "locks/gc", "locks/write", LOCK_EX },
        [BV_LOCK_COMMIT] = { "locks/commit", "locks/gc", LOCK_EX },
};

int bv_lock_take(int repo_dirfd, BvLockKind kind, bool wait)
{
        _cleanup_close_ int fd = -EBADF;

        if ((unsigned)kind >= ELEMENTSOF(lock_kinds) || !lock_kinds[kind].path)
                return -EINVAL;
        const char *path = lock_kinds[kind].path, *sibling = lock_kinds[kind].sibling;
        int op = lock_kinds[kind].op;
        if (repo_dirfd < 0)
                return -EBADF;

        fd = lock_open(repo_dirfd, path, sibling);
        if (kind == BV_LOCK_READ)
                fd = read_lock_readonly(repo_dirfd, fd);
        if (fd < 0)
                return fd;
        if (!wait)
                op |= LOCK_NB;
        while (flock(fd, op) < 0) {
                if (errno == EINTR)
                        continue;
                return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
        }
        return TAKE_FD(fd);
}
