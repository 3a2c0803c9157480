/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "secmem.h"

#define AT_POSITION UINT64_MAX /* transfer_all's offset: at the file position (read, write) */

/* Reads (out false) or writes len bytes at offset, retrying after EINTR and short transfers.
 * Returns the bytes done: a read stops early at the end of the file, a write that makes no
 * progress fails with -EIO. */
static ssize_t transfer_all(int fd, void *buf, size_t len, uint64_t offset, bool out)
{
        size_t done = 0;

        while (done < len) {
                uint8_t *p = (uint8_t *)buf + done;
                size_t left = len - done;
                ssize_t n;

                if (offset == AT_POSITION)
                        n = out ? write(fd, p, left) : read(fd, p, left);
                else
                        n = out ? pwrite(fd, p, left, (off_t)(offset + done)) : pread(fd, p, left, (off_t)(offset + done));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0) {
                        if (out)
                                return -EIO;
                        break;
                }
                done += (size_t)n;
        }
        return (ssize_t)done;
}

ssize_t bv_pread_all(int fd, void *buf, size_t len, uint64_t offset)
{
        return transfer_all(fd, buf, len, offset, false);
}

int bv_pwrite_all(int fd, const void *buf, size_t len, uint64_t offset)
{
        ssize_t r = transfer_all(fd, (void *)buf, len, offset, true);
        return r < 0 ? (int)r : 0;
}

ssize_t bv_read_all(int fd, void *buf, size_t len)
{
        return transfer_all(fd, buf, len, AT_POSITION, false);
}

int bv_write_all(int fd, const void *buf, size_t len)
{
        ssize_t r = transfer_all(fd, (void *)buf, len, AT_POSITION, true);
        return r < 0 ? (int)r : 0;
}

int bv_fsync_dir(int dirfd)
{
        if (fsync(dirfd) < 0 && errno != EINVAL)
                return negative_errno();
        return 0;
}

int bv_mkdir_p(int dirfd, const char *path)
{
        char buf[4096];
        size_t len = strlen(path);
        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, path, len + 1);
        for (char *p = buf + 1;; p++) {
                if (*p == '/' || *p == '\0') {
                        char saved = *p;
                        *p = '\0';
                        if (mkdirat(dirfd, buf, 0700) < 0 && errno != EEXIST)
                                return negative_errno();
                        *p = saved;
                        if (saved == '\0')
                                break;
                }
        }
        return 0;
}

static bool group_readable(int dirfd)
{
        struct stat st;

        return fstat(dirfd, &st) == 0 && (st.st_mode & S_IRGRP);
}

int bv_mkdirat_shared(int dirfd, const char *name)
{
        bool shared = group_readable(dirfd);
        struct stat st;

        if (mkdirat(dirfd, name, shared ? 0750 : 0700) < 0)
                return negative_errno();
        if (!shared)
                return 0;
        /* the umask may have taken the group bits: put them back, keeping set-group-id */
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if ((st.st_mode & 0750) != 0750 &&
            fchmodat(dirfd, name, (st.st_mode & (07777 & ~S_IRWXO)) | 0750, AT_SYMLINK_NOFOLLOW) < 0 &&
            errno != EOPNOTSUPP)
                return negative_errno();
        return 0;
}

int bv_share_file(int dirfd, int fd)
{
        if (!group_readable(dirfd))
                return 0;
        return fchmod(fd, 0640) < 0 ? negative_errno() : 0;
}

int bv_tmpfile_open(int dirfd, int *ret_fd, char ret_tmpname[64])
{
        return bv_tmpfile_open_prefix(dirfd, ".tmp-", ret_fd, ret_tmpname);
}

int bv_tmpfile_open_prefix(int dirfd, const char *prefix, int *ret_fd, char ret_tmpname[64])
{
        int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
                ret_tmpname[0] = '\0';
                *ret_fd = fd;
                return 0;
        }
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
                return negative_errno();

        for (int attempt = 0; attempt < 16; attempt++) {
                uint64_t r;
                if (getrandom(&r, sizeof(r), 0) != sizeof(r))
                        return -EIO;
                if (snprintf(ret_tmpname, 64, "%s%016llx", prefix, (unsigned long long)r) >= 64)
                        return -ENAMETOOLONG;
                fd = openat(dirfd, ret_tmpname, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
                if (fd < 0 && errno != EEXIST)
                        return negative_errno();
                if (fd < 0)
                        continue;
                /* Locked while it lives: gc deletes only the ones it can lock (bv_tmpfile_reapable).
                 * One deleted before it was locked here has no link left: take another name. */
                struct stat st;
                if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
                        int e = negative_errno();
                        (void)unlinkat(dirfd, ret_tmpname, 0);
                        close(fd);
                        return e;
                }
                if (st.st_nlink > 0) {
                        *ret_fd = fd;
                        return 0;
                }
                close(fd);
        }
        return -EEXIST;
}

void bv_tmpfile_discard(int dirfd, const char *tmpname)
{
        if (tmpname && tmpname[0])
                (void)unlinkat(dirfd, tmpname, 0);
}

int bv_tmpfile_reap(int dirfd, const char *name, uint64_t *ret_bytes)
{
        struct stat st;

        /* Only a regular file is a writer's, and only that is opened: a device node on a nodev
         * mount does not even open (EACCES) */
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISREG(st.st_mode))
                return 0;
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ELOOP ? 0 : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode)) /* replaced since */
                return 0;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return errno == EWOULDBLOCK ? 0 : negative_errno(); /* its writer lives */
        if (unlinkat(dirfd, name, 0) < 0) /* EPERM: immutable or append-only, no writer made it so */
                return errno == ENOENT || errno == EPERM ? 0 : negative_errno();
        *ret_bytes = (uint64_t)st.st_blocks * 512;
        return 1;
}

int bv_tmpfile_link(int dirfd, int fd, const char *tmpname, const char *name, bool replace)
{
        int r;

        if (fsync(fd) < 0) {
                r = negative_errno();
                goto fail_discard;
        }

        if (tmpname[0] == '\0') {
                char proc[64];
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                if (replace) {
                        /* linkat cannot replace: link under a unique name, then rename over. */
                        char tmp[64];
                        uint64_t rnd;
                        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                                return -EIO;
                        snprintf(tmp, sizeof(tmp), ".tmp-%016llx", (unsigned long long)rnd);
                        if (flock(fd, LOCK_EX) < 0) /* named for a moment: not for gc (bv_tmpfile_reap) */
                                return negative_errno();
                        if (linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) < 0)
                                return negative_errno();
                        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                                r = negative_errno();
                                (void)unlinkat(dirfd, tmp, 0);
                                return r;
                        }
                } else if (linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) < 0)
                        return negative_errno();
        } else if (replace) {
                if (renameat(dirfd, tmpname, dirfd, name) < 0) {
                        r = negative_errno();
                        goto fail_discard;
                }
        } else if (renameat2(dirfd, tmpname, dirfd, name, RENAME_NOREPLACE) < 0) {
                r = negative_errno();
                if (r == -EINVAL || r == -ENOSYS) {
                        /* Filesystem without RENAME_NOREPLACE: link() fails on an existing name. */
                        if (linkat(dirfd, tmpname, dirfd, name, 0) < 0) {
                                r = negative_errno();
                                goto fail_discard;
                        }
                        (void)unlinkat(dirfd, tmpname, 0);
                } else
                        goto fail_discard;
        }
        return bv_fsync_dir(dirfd);

fail_discard:
        bv_tmpfile_discard(dirfd, tmpname);
        return r;
}

static int write_file_durable(int dirfd, const char *name, const void *data, size_t len, bool replace,
                              bool shared)
{
        _cleanup_close_ int fd = -EBADF;
        char tmpname[64];
        int r;

        r = bv_tmpfile_open(dirfd, &fd, tmpname);
        if (r < 0)
                return r;
        r = shared ? bv_share_file(dirfd, fd) : 0;
        if (r >= 0)
                r = bv_write_all(fd, data, len);
        if (r < 0) {
                bv_tmpfile_discard(dirfd, tmpname);
                return r;
        }
        return bv_tmpfile_link(dirfd, fd, tmpname, name, replace);
}

int bv_write_file_durable(int dirfd, const char *name, const void *data, size_t len, bool replace)
{
        return write_file_durable(dirfd, name, data, len, replace, false);
}

int bv_write_file_shared(int dirfd, const char *name, const void *data, size_t len, bool replace)
{
        return write_file_durable(dirfd, name, data, len, replace, true);
}

/* fstat of an open fd (fd < 0: an open that failed, returned as it is) that must be a regular
 * file: -EBADFD if it is not. */
static int stat_regular(int fd, struct stat *ret)
{
        if (fd < 0)
                return fd;
        if (fstat(fd, ret) < 0)
                return negative_errno();
        return S_ISREG(ret->st_mode) ? 0 : -EBADFD;
}

/* Opens a regular file of at most max bytes for reading (beneath dirfd if asked); *ret_size:
 * its size from fstat (and *ret_st all of it, if not NULL). O_NONBLOCK: a FIFO must not hang the
 * open before fstat refuses it. */
static int open_small_file(int dirfd, const char *path, bool beneath, size_t max, int *ret_fd, size_t *ret_size,
                           struct stat *ret_st)
{
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (beneath)
                fd = bv_open_file_beneath(dirfd, path, O_RDONLY);
        else {
                fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                if (fd < 0)
                        fd = negative_errno();
        }
        r = stat_regular(fd, &st);
        if (r < 0)
                return r;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        *ret_fd = TAKE_FD(fd);
        *ret_size = (size_t)st.st_size;
        if (ret_st)
                *ret_st = st;
        return 0;
}

static int read_file(int dirfd, const char *path, bool beneath, size_t max, void **ret_data, size_t *ret_len,
                     struct stat *ret_st)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t file_size;
        ssize_t n;
        int r;

        r = open_small_file(dirfd, path, beneath, max, &fd, &file_size, ret_st);
        if (r < 0)
                return r;
        buf = malloc(file_size + 1);
        if (!buf)
                return -ENOMEM;
        n = bv_read_all(fd, buf, file_size);
        if (n < 0)
                return (int)n;
        buf[n] = '\0';
        *ret_len = (size_t)n;
        *ret_data = TAKE_PTR(buf);
        return 0;
}

int bv_read_file(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len)
{
        return read_file(dirfd, path, false, max, ret_data, ret_len, NULL);
}

int bv_read_file_stat(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len, struct stat *ret_st)
{
        return read_file(dirfd, path, false, max, ret_data, ret_len, ret_st);
}

int bv_read_file_beneath(int dirfd, const char *path, size_t max, void **ret_data, size_t *ret_len)
{
        return read_file(dirfd, path, true, max, ret_data, ret_len, NULL);
}

/* Reads at most limit bytes of fd into bv_secure_alloc memory of size (> limit) bytes: -EFBIG
 * when more come. */
static int read_secret(int fd, size_t limit, size_t size, bool strip_newline, void **ret_data, size_t *ret_len,
                       size_t *ret_size)
{
        uint8_t *buf = bv_secure_alloc(size);
        size_t len;
        ssize_t n;

        if (!buf)
                return -ENOMEM;
        /* one byte more than allowed, to see a secret that is too long (or a file that grew) */
        n = bv_read_all(fd, buf, limit + 1);
        if (n < 0 || (size_t)n > limit) {
                bv_secure_free(buf, size);
                return n < 0 ? (int)n : -EFBIG;
        }
        len = (size_t)n;
        if (strip_newline && len > 0 && buf[len - 1] == '\n')
                len--;
        buf[len] = '\0';
        *ret_data = buf;
        *ret_len = len;
        *ret_size = size;
        return 0;
}

int bv_read_secret_file(int dirfd, const char *path, size_t max, size_t min_size, bool strip_newline,
                        void **ret_data, size_t *ret_len, size_t *ret_size)
{
        _cleanup_close_ int fd = -EBADF;
        size_t file_size;
        int r;

        r = open_small_file(dirfd, path, false, max, &fd, &file_size, NULL);
        if (r < 0)
                return r;
        return read_secret(fd, file_size, MAX(file_size + 1, min_size), strip_newline, ret_data, ret_len, ret_size);
}

int bv_read_secret_fd(int fd, size_t max, bool strip_newline, void **ret_data, size_t *ret_len,
                      size_t *ret_size)
{
        return read_secret(fd, max, max + 1, strip_newline, ret_data, ret_len, ret_size);
}

static int opendir_fd(int fd, DIR **ret)
{
        DIR *d;

        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                int r = negative_errno();
                safe_close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

int bv_opendir_at(int dirfd, const char *path, DIR **ret)
{
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        return opendir_fd(fd < 0 ? negative_errno() : fd, ret);
}

int bv_opendir_beneath(int dirfd, const char *path, DIR **ret)
{
        return opendir_fd(bv_open_dir_beneath(dirfd, path), ret);
}

/* openat with O_NOFOLLOW, reporting a symbolic link as -ELOOP also where O_DIRECTORY says -ENOTDIR. */
static int openat_nofollow(int at, const char *name, int flags, mode_t mode)
{
        struct stat st;
        int fd = openat(at, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);

        if (fd >= 0)
                return fd;
        if (errno == ENOTDIR && fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISLNK(st.st_mode))
                return -ELOOP;
        return negative_errno();
}

int bv_open_beneath_walk(int dirfd, const char *path, int flags, mode_t mode)
{
        _cleanup_close_ int cur = -EBADF;
        const char *p = path;

        if (path[0] == '/')
                return -EXDEV;
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t)(slash - p) : strlen(p);
                char name[NAME_MAX + 1];
                int at = cur >= 0 ? cur : dirfd, fd;

                if (len > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(name, len ? p : ".", len ? len : 1);
                name[len ? len : 1] = '\0';
                if (strcmp(name, "..") == 0)
                        return -EXDEV;
                if (!slash)
                        return openat_nofollow(at, name, flags, mode);
                fd = openat_nofollow(at, name, O_RDONLY | O_DIRECTORY, 0);
                if (fd < 0)
                        return fd;
                safe_close(cur);
                cur = fd;
                p = slash + 1;
        }
}

int bv_open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
        static bool no_openat2 = false;
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
        };
        long fd;

        if (!path)
                return -EINVAL;
        if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
                fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd >= 0)
                        return (int)fd;
                if (errno != ENOSYS)
                        return negative_errno();
                __atomic_store_n(&no_openat2, true, __ATOMIC_RELAXED);
        }
        return bv_open_beneath_walk(dirfd, path, flags, mode);
}

int bv_open_dir_beneath(int dirfd, const char *path)
{
        return bv_open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
}

int bv_open_file_beneath(int dirfd, const char *path, int flags)
{
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int fl;

        fd = bv_open_beneath(dirfd, path, flags | O_NONBLOCK | O_NOCTTY, 0600);
        fl = stat_regular(fd, &st);
        if (fl < 0)
                return fl;
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

int bv_beneath_culprit(int dirfd, const char *path, bool want_dir, mode_t *ret_mode)
{
        char buf[PATH_MAX];
        size_t len = strlen(path);

        if (len >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, len + 1);
        for (size_t end = 0; end < len;) {
                const char *slash = strchr(buf + end, '/');
                size_t next = slash ? (size_t)(slash - buf) : len;
                bool last = next >= len || buf[next + 1] == '\0';
                struct stat st;

                buf[next] = '\0';
                if (fstatat(dirfd, buf, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();
                if (S_ISLNK(st.st_mode) || (!last && !S_ISDIR(st.st_mode)) ||
                    (last && (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)))) {
                        *ret_mode = st.st_mode & S_IFMT;
                        return (int)next;
                }
                buf[next] = '/';
                end = next + 1;
        }
        return 0;
}

const char *bv_file_type_name(mode_t mode)
{
        switch (mode & S_IFMT) {
        case S_IFLNK:
                return "a symbolic link";
        case S_IFIFO:
                return "a FIFO";
        case S_IFSOCK:
                return "a socket";
        case S_IFCHR:
                return "a character device";
        case S_IFBLK:
                return "a block device";
        case S_IFDIR:
                return "a directory";
        case S_IFREG:
                return "a regular file";
        default:
                return "of an unknown type";
        }
}

int bv_fd_size(int fd, uint64_t *ret_size)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISBLK(st.st_mode)) {
                uint64_t size;
                if (ioctl(fd, BLKGETSIZE64, &size) < 0)
                        return negative_errno();
                *ret_size = size;
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return -ESPIPE;
        *ret_size = (uint64_t)st.st_size;
        return 0;
}
