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
#include <limits.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "lock.h"
#include "macro.h"
#include "timeutil.h"

/* locks/<name>, resolved beneath the repository: neither locks/ nor the file may be a symbolic
 * link, and the file must be a regular one (a FIFO must not hang the open). Whoever can create
 * one lock file creates both, so that a reader finds locks/gc on a read-only mount of a drive that
 * only ever saw backups (which take locks/write). */
static int lock_open(int repo_dirfd, const char *path, const char *sibling)
{
        int fd, made = mkdirat(repo_dirfd, "locks", 0700) < 0 ? negative_errno() : 0;

        if (made < 0 && made != -EEXIST && made != -EROFS)
                return made;
        fd = bv_open_file_beneath(repo_dirfd, path, O_RDONLY | O_CREAT);
        if (fd == -ENOENT && made == -EROFS) /* no locks/, and it cannot be made */
                return -EROFS;
        if (fd == -EROFS || fd == -EACCES) {
                /* a file that is not there and cannot be made: why it cannot (a read-only mount,
                 * no permission), not "no such file", which would read as "no repository" */
                int r = bv_open_file_beneath(repo_dirfd, path, O_RDONLY);
                return r == -ENOENT ? fd : r;
        }
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
        if (fd != -EROFS || fstatvfs(repo_dirfd, &st) < 0 || !(st.f_flag & ST_RDONLY))
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
        [BV_LOCK_COMPACT] = { "locks/gc", "locks/write", LOCK_EX },
};

static const char *holder_name(BvLockKind kind)
{
        return kind == BV_LOCK_WRITE                              ? "write.holder"
               : kind == BV_LOCK_GC || kind == BV_LOCK_COMPACT ? "gc.holder"
                                                                  : NULL;
}

/* This process's command line, its arguments joined by spaces (/proc files have no size to
 * read by: one read). */
static void own_command(char *buf, size_t size)
{
        _cleanup_close_ int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);
        if (n < 0)
                n = 0;
        while (n > 0 && buf[n - 1] == '\0')
                n--;
        buf[n] = '\0';
        for (ssize_t i = 0; i < n; i++)
                if (buf[i] == '\0' || buf[i] == '\n')
                        buf[i] = ' ';
}

/* Best effort: a lock taken on a read-only mount, or in a full filesystem, names no holder. */
static void holder_record(int repo_dirfd, BvLockKind kind)
{
        char host[256] = "", cmd[512], text[1024];
        int dfd = bv_open_dir_beneath(repo_dirfd, "locks");
        if (dfd < 0)
                return;
        (void)gethostname(host, sizeof(host) - 1);
        own_command(cmd, sizeof(cmd));
        int n = snprintf(text, sizeof(text), "pid=%d\nhost=%s\nsince=%llu\n%scommand=%s\n", (int)getpid(), host,
                         (unsigned long long)(bv_now_realtime_ns() / 1000000000ull),
                         kind == BV_LOCK_COMPACT ? "purpose=compaction\n" : "", cmd);
        if (n > 0 && (size_t)n < sizeof(text))
                (void)bv_write_file_durable(dfd, holder_name(kind), text, (size_t)n, true);
        close(dfd);
}

int bv_lock_holder(int repo_dirfd, BvLockKind kind, char *buf, size_t size)
{
        _cleanup_free_ char *data = NULL, *path = NULL;
        char when[32] = "?";
        const char *pid = "", *host = "", *cmd = "";
        bool compaction = false;
        size_t len;

        if (!holder_name(kind))
                return -EINVAL;
        if (asprintf(&path, "locks/%s", holder_name(kind)) < 0)
                return -ENOMEM;
        int r = bv_read_file_beneath(repo_dirfd, path, 64 * 1024, (void **)&data, &len);
        if (r < 0)
                return r;
        for (char *save = NULL, *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *v = strchr(l, '=');
                if (!v)
                        continue;
                *v++ = '\0';
                if (strcmp(l, "pid") == 0)
                        pid = v;
                else if (strcmp(l, "host") == 0)
                        host = v;
                else if (strcmp(l, "command") == 0)
                        cmd = v;
                else if (strcmp(l, "since") == 0)
                        bv_format_time_utc(strtoull(v, NULL, 10), when);
                else if (strcmp(l, "purpose") == 0)
                        compaction = strcmp(v, "compaction") == 0;
        }
        if (!*pid)
                return -ENOENT;
        /* A record that outlived its process (the lock's holder now is one that records none): on
         * this host a pid that no longer runs names nobody. */
        char self[256] = "";
        (void)gethostname(self, sizeof(self) - 1);
        char *end = NULL;
        long p = strtol(pid, &end, 10);
        if (strcmp(host, self) == 0 && end && !*end && p > 0 && p <= INT_MAX && kill((pid_t)p, 0) < 0 && errno == ESRCH)
                return -ESTALE;
        snprintf(buf, size, "pid %s on %s since %s: %s", pid, *host ? host : "?", when, cmd);
        return compaction;
}

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
        if (holder_name(kind))
                holder_record(repo_dirfd, kind);
        return TAKE_FD(fd);
}
