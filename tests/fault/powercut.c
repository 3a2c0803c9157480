/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * powercut.so: an LD_PRELOAD library that simulates a power cut at the Nth fsync.
 *
 * It counts fsync/fdatasync calls; when the count reaches $BV_POWERCUT_AT it throws away
 * everything a real power cut could throw away, then _exit()s with status 99:
 *   - bytes written to a regular file since its last fsync: the file is truncated back to
 *     its size at that fsync (writes here are appends, which is what blkvault does);
 *   - directory entries created, renamed or linked since the directory's last fsync: the
 *     operation is undone (links unlinked, renames renamed back, mkdirs removed).
 *     A rename over an existing file that is undone brings the replaced file back.
 * What survives is what a program that follows the durability recipe has made durable. The
 * recipe is the thing under test: a repository must reopen and verify after any cut.
 *
 * BV_POWERCUT_MODE=torn: unsynced appends are torn instead of dropped: half of them survives,
 * and the last 512 bytes of that half hold garbage (a sector the cut caught mid-write).
 * Not simulated: reordering inside one file (the pack and index formats check every byte
 * they read anyway).
 *
 * BV_MALLOC_FAIL_AT=N: the Nth call of malloc, calloc or realloc made directly by the program
 * itself (not by a library it uses) fails with ENOMEM; everything else is untouched. The
 * program must fail cleanly, leaving its repository as it was.
 */
/* Distinct pwrite and pwrite64 symbols: both are interposed. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_DIROPS 4096

typedef struct File {
        dev_t dev;
        ino_t ino;
        int fd;          /* our own dup, to truncate at the cut */
        off_t synced;    /* size at the last fsync */
} File;

typedef enum { OP_LINK, OP_RENAME, OP_MKDIR } OpKind;

typedef struct DirOp {
        OpKind kind;
        char dir[PATH_MAX];  /* directory whose fsync makes it durable */
        char from[PATH_MAX]; /* absolute paths */
        char to[PATH_MAX];
        char saved[PATH_MAX]; /* a rename's replaced file, kept under this name until durable */
        int done;            /* durable */
} DirOp;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static File files[MAX_FILES];
static size_t n_files;
static DirOp ops[MAX_DIROPS];
static size_t n_ops;
static long syncs, cut_at = -1;

#define REAL(name, ret, ...)                                                                               \
        static ret (*real_##name)(__VA_ARGS__);                                                            \
        if (!real_##name)                                                                                  \
                real_##name = dlsym(RTLD_NEXT, #name)

static void init(void)
{
        if (cut_at < 0) {
                const char *s = getenv("BV_POWERCUT_AT");
                cut_at = s ? atol(s) : 0;
        }
}

static int is_regular(int fd, struct stat *st)
{
        return fstat(fd, st) == 0 && S_ISREG(st->st_mode);
}

/* Called before a write to fd: remember the file's durable size the first time. */
static void track_write(int fd)
{
        struct stat st;
        if (!is_regular(fd, &st))
                return;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_files; i++)
                if (files[i].dev == st.st_dev && files[i].ino == st.st_ino) {
                        pthread_mutex_unlock(&lock);
                        return;
                }
        if (n_files < MAX_FILES) {
                /* A file we never saw written is durable at its current size. */
                files[n_files] = (File){ .dev = st.st_dev, .ino = st.st_ino, .fd = dup(fd),
                                         .synced = st.st_size };
                n_files++;
        }
        pthread_mutex_unlock(&lock);
}

static void path_of(int dirfd, const char *name, char out[PATH_MAX])
{
        char proc[64], dir[PATH_MAX];
        ssize_t n;
        if (name[0] == '/' || dirfd == AT_FDCWD) {
                if (name[0] == '/')
                        snprintf(out, PATH_MAX, "%s", name);
                else {
                        if (!getcwd(dir, sizeof(dir)))
                                dir[0] = '\0';
                        snprintf(out, PATH_MAX, "%s/%s", dir, name);
                }
                return;
        }
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
        n = readlink(proc, dir, sizeof(dir) - 1);
        dir[n > 0 ? n : 0] = '\0';
        snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

static void dirname_of(const char *path, char out[PATH_MAX])
{
        snprintf(out, PATH_MAX, "%s", path);
        char *slash = strrchr(out, '/');
        if (slash && slash != out)
                *slash = '\0';
}

static void record_op(OpKind kind, const char *from, const char *to, const char *saved)
{
        pthread_mutex_lock(&lock);
        if (n_ops < MAX_DIROPS) {
                DirOp *op = &ops[n_ops++];
                *op = (DirOp){ .kind = kind };
                snprintf(op->from, PATH_MAX, "%s", from);
                snprintf(op->to, PATH_MAX, "%s", to);
                snprintf(op->saved, PATH_MAX, "%s", saved);
                dirname_of(to, op->dir);
        }
        pthread_mutex_unlock(&lock);
}

/* Before a rename over `to`: keep the file it replaces (a hard link), so that a cut can bring
 * it back. Fills saved ("" when nothing is replaced). */
static void save_replaced(const char *to, char saved[PATH_MAX])
{
        static long seq;
        saved[0] = '\0';
        if (access(to, F_OK) != 0)
                return;
        pthread_mutex_lock(&lock);
        snprintf(saved, PATH_MAX, "%s.powercut-%d-%ld", to, (int)getpid(), seq++);
        pthread_mutex_unlock(&lock);
        if (link(to, saved) != 0)
                saved[0] = '\0';
}

/* A torn append: half of the unsynced bytes survive, the last 512 of them garbage. */
static void tear(File *f)
{
        struct stat st;
        char junk[512];
        if (fstat(f->fd, &st) != 0 || st.st_size <= f->synced) {
                (void)ftruncate(f->fd, f->synced);
                return;
        }
        off_t keep = f->synced + (st.st_size - f->synced) / 2;
        off_t from = keep - 512 > f->synced ? keep - 512 : f->synced;
        memset(junk, 0xa5, sizeof(junk));
        (void)ftruncate(f->fd, keep);
        if (keep > from)
                (void)syscall(SYS_pwrite64, f->fd, junk, (size_t)(keep - from), from); /* not our pwrite64 */
}

/* The cut: undo what is not durable, newest first, and die. */
static void power_cut(void)
{
        for (size_t i = n_ops; i-- > 0;) {
                DirOp *op = &ops[i];
                if (op->done)
                        continue;
                switch (op->kind) {
                case OP_LINK:
                        unlink(op->to);
                        break;
                case OP_RENAME: /* the raw call: our rename() would take the lock held here */
                        syscall(SYS_renameat, AT_FDCWD, op->to, AT_FDCWD, op->from);
                        if (op->saved[0])
                                syscall(SYS_renameat, AT_FDCWD, op->saved, AT_FDCWD, op->to);
                        break;
                case OP_MKDIR:
                        rmdir(op->to);
                        break;
                }
        }
        const char *mode = getenv("BV_POWERCUT_MODE");
        for (size_t i = 0; i < n_files; i++)
                if (files[i].fd >= 0 && mode && strcmp(mode, "torn") == 0)
                        tear(&files[i]);
                else if (files[i].fd >= 0)
                        (void)ftruncate(files[i].fd, files[i].synced);
        fprintf(stderr, "powercut: power cut at fsync #%ld\n", syncs);
        _exit(99);
}

static int on_sync(int fd)
{
        struct stat st;
        char dir[PATH_MAX], proc[64];
        ssize_t n;

        init();
        pthread_mutex_lock(&lock);
        syncs++;
        if (cut_at > 0 && syncs >= cut_at)
                power_cut(); /* does not return; the lock dies with the process */
        if (fstat(fd, &st) == 0) {
                if (S_ISDIR(st.st_mode)) {
                        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                        n = readlink(proc, dir, sizeof(dir) - 1);
                        dir[n > 0 ? n : 0] = '\0';
                        for (size_t i = 0; i < n_ops; i++)
                                if (!ops[i].done && strcmp(ops[i].dir, dir) == 0) {
                                        ops[i].done = 1;
                                        if (ops[i].saved[0])
                                                unlink(ops[i].saved);
                                }
                } else
                        for (size_t i = 0; i < n_files; i++)
                                if (files[i].dev == st.st_dev && files[i].ino == st.st_ino)
                                        files[i].synced = st.st_size;
        }
        pthread_mutex_unlock(&lock);
        return 0;
}

int fsync(int fd)
{
        REAL(fsync, int, int);
        on_sync(fd);
        return real_fsync(fd);
}

int fdatasync(int fd)
{
        REAL(fdatasync, int, int);
        on_sync(fd);
        return real_fdatasync(fd);
}

ssize_t write(int fd, const void *buf, size_t len)
{
        REAL(write, ssize_t, int, const void *, size_t);
        track_write(fd);
        return real_write(fd, buf, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
        REAL(pwrite, ssize_t, int, const void *, size_t, off_t);
        track_write(fd);
        return real_pwrite(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
        REAL(pwrite64, ssize_t, int, const void *, size_t, off_t);
        track_write(fd);
        return real_pwrite64(fd, buf, len, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
        REAL(writev, ssize_t, int, const struct iovec *, int);
        track_write(fd);
        return real_writev(fd, iov, cnt);
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
        REAL(linkat, int, int, const char *, int, const char *, int);
        int r = real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
        if (r == 0) {
                char to[PATH_MAX];
                path_of(newdirfd, newpath, to);
                record_op(OP_LINK, "", to, "");
        }
        return r;
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned flags)
{
        REAL(renameat2, int, int, const char *, int, const char *, unsigned);
        char from[PATH_MAX], to[PATH_MAX], saved[PATH_MAX];
        path_of(olddirfd, oldpath, from);
        path_of(newdirfd, newpath, to);
        save_replaced(to, saved);
        int r = real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
        if (r == 0)
                record_op(OP_RENAME, from, to, saved);
        else if (saved[0])
                unlink(saved);
        return r;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
        REAL(renameat, int, int, const char *, int, const char *);
        char from[PATH_MAX], to[PATH_MAX], saved[PATH_MAX];
        path_of(olddirfd, oldpath, from);
        path_of(newdirfd, newpath, to);
        save_replaced(to, saved);
        int r = real_renameat(olddirfd, oldpath, newdirfd, newpath);
        if (r == 0)
                record_op(OP_RENAME, from, to, saved);
        else if (saved[0])
                unlink(saved);
        return r;
}

int rename(const char *oldpath, const char *newpath)
{
        return renameat(AT_FDCWD, oldpath, AT_FDCWD, newpath);
}

int mkdirat(int dirfd, const char *path, mode_t mode)
{
        REAL(mkdirat, int, int, const char *, mode_t);
        int r = real_mkdirat(dirfd, path, mode);
        if (r == 0) {
                char to[PATH_MAX];
                path_of(dirfd, path, to);
                record_op(OP_MKDIR, "", to, "");
        }
        return r;
}
