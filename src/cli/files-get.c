/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* blkvault files ... get PATH... DEST: files and directories of a snapshot copied out, with modes,
 * times, symbolic links (and owners as root). Each file is written beneath DEST through directory
 * fds without following links, so nothing in the snapshot can make it write elsewhere. NTFS named
 * streams go along as user.NAME extended attributes. A file whose data is damaged is reported
 * with its path and removed; the others go on (exit 4). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/limits.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "files.h"

typedef struct GetCtx {
        FilesPath *fp;
        const FilesOptions *o;
        bool root;
        mode_t umask; /* applied to the modes of a filesystem that keeps none (BvFsOps.modes_made_up) */
        int ec;
        uint64_t files, bytes;
} GetCtx;

static void get_fail(GetCtx *c, int ec)
{
        if (c->ec == EXIT_OK || ec == EXIT_DAMAGE)
                c->ec = ec;
}

static int write_sink(const void *buf, size_t len, uint64_t offset, void *userdata)
{
        int *fd = userdata;

        return buf ? bv_pwrite_all(*fd, buf, len, offset) : 0; /* holes stay holes */
}

/* Sets what the snapshot says of the inode on what dirfd/name (fd if >= 0) now holds. */
static int set_attrs(GetCtx *c, int dirfd, const char *name, int fd, const BvFsStat *st)
{
        struct timespec ts[2] = { { .tv_sec = st->atime, .tv_nsec = st->atime_ns },
                                  { .tv_sec = st->mtime, .tv_nsec = st->mtime_ns } };
        bool link = S_ISLNK(st->mode);
        mode_t mode = st->mode & 07777 & (bv_fs_ops(c->fp->fs)->modes_made_up ? ~c->umask : 07777);

        if (c->root && (fd >= 0 ? fchown(fd, st->uid, st->gid)
                                : fchownat(dirfd, name, st->uid, st->gid, AT_SYMLINK_NOFOLLOW)) < 0)
                return -errno;
        if (!link && (fd >= 0 ? fchmod(fd, mode) : fchmodat(dirfd, name, mode, 0)) < 0)
                return -errno;
        if ((fd >= 0 ? futimens(fd, ts) : utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW)) < 0)
                return -errno;
        return 0;
}

/* Creates name (a file, symlink or fifo) by make; with --force an existing one is replaced. */
static int create_entry(GetCtx *c, int dirfd, const char *name, int (*make)(int, const char *, void *), void *arg)
{
        int r = make(dirfd, name, arg);

        if (r == -EEXIST && c->o->force) {
                if (unlinkat(dirfd, name, 0) < 0)
                        return -errno;
                r = make(dirfd, name, arg);
        }
        return r;
}

/* An entry create_entry could not make: one that exists is refused without --force (said). */
static int create_error(int r, const char *dest)
{
        if (r == -EEXIST) {
                log_error("cannot create '%s': %s (--force replaces it)", dest, strerror(-r));
                return exit_code_for(r);
        }
        return log_error_errno(r, "cannot create '%s'", dest);
}

static int make_file(int dirfd, const char *name, void *arg)
{
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

        if (fd < 0)
                return -errno;
        *(int *)arg = fd;
        return 0;
}

static int make_link(int dirfd, const char *name, void *arg)
{
        return symlinkat(arg, dirfd, name) < 0 ? -errno : 0;
}

static int make_fifo(int dirfd, const char *name, void *arg _unused_)
{
        return mkfifoat(dirfd, name, 0600) < 0 ? -errno : 0;
}

typedef struct Buf {
        uint8_t *p;
        size_t n;
} Buf;

static int buf_sink(const void *data, size_t len, uint64_t offset _unused_, void *userdata)
{
        Buf *b = userdata;
        uint8_t *p;

        if (b->n + len > XATTR_SIZE_MAX)
                return -E2BIG;
        p = realloc(b->p, b->n + len);
        if (!p)
                return -ENOMEM;
        if (data)
                memcpy(p + b->n, data, len);
        else
                memset(p + b->n, 0, len);
        b->p = p;
        b->n += len;
        return 0;
}

/* A file's named streams (NTFS) as user.NAME extended attributes of fd, as ntfs-3g shows them;
 * one that does not fit an attribute, or a DEST without them, is said and left out. */
static int get_streams(GetCtx *c, int fd, const char *dest, uint64_t ino, const char *path)
{
        BvFsEntry *v;
        size_t n;
        int r = bv_fs_streams(c->fp->fs, ino, &v, &n), ec = EXIT_OK;

        if (r < 0)
                return files_error(c->fp->fs, r, "list the streams of", c->fp->prefix, path);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *xname = NULL, *shown = NULL;
                Buf b = {};
                r = bv_fs_read(c->fp->fs, v[i].ino, buf_sink, &b);
                if (r >= 0 && asprintf(&xname, "user.%s", v[i].name) < 0)
                        r = -ENOMEM;
                if (r >= 0 && fsetxattr(fd, xname, b.p ? (void *)b.p : "", b.n, 0) < 0)
                        r = -errno;
                free(b.p);
                if (r >= 0)
                        continue;
                shown = escape_text(v[i].name, 64);
                if (r == -EBADMSG || r == -EUCLEAN || r == -EIO) {
                        _cleanup_free_ char *spath = NULL;
                        r = asprintf(&spath, "%s:%s", path, v[i].name) < 0 ? log_error_errno(-ENOMEM, "cannot copy")
                                                                          : files_error(c->fp->fs, r, "read", c->fp->prefix, spath);
                        ec = ec == EXIT_OK || r == EXIT_DAMAGE ? r : ec;
                } else
                        log_warning("'%s': its stream '%s' is not kept as an extended attribute: %s", dest,
                                    shown ? shown : "?", strerror(-r));
        }
        bv_fs_entries_free(v, n);
        return ec;
}

/* ino: the reader's handle of the file (not st->ino, the filesystem's inode number: they differ for
 * libguestfs's reader) */
static int get_file(GetCtx *c, int dirfd, const char *name, const char *dest, uint64_t ino, const BvFsStat *st,
                    const char *path)
{
        _cleanup_close_ int fd = -EBADF;
        int r = create_entry(c, dirfd, name, make_file, &fd);

        if (r < 0)
                return create_error(r, dest);
        r = bv_fs_read(c->fp->fs, ino, write_sink, &fd);
        if (r >= 0 && ftruncate(fd, (off_t)st->size) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dirfd, name, 0);
                if (r == -EBADMSG || r == -EUCLEAN || r == -EIO)
                        return files_error(c->fp->fs, r, "read", c->fp->prefix, path);
                return log_error_errno(r, "cannot write '%s' (removed)", dest);
        }
        r = get_streams(c, fd, dest, ino, path);
        if (r != EXIT_OK)
                get_fail(c, r); /* the file itself is whole: kept */
        r = set_attrs(c, dirfd, name, fd, st);
        if (r < 0)
                return log_error_errno(r, "cannot set the mode and times of '%s'", dest);
        c->files++;
        c->bytes += st->size;
        return EXIT_OK;
}

static int get_entry(GetCtx *c, int dirfd, const char *name, const char *dest, uint64_t ino, const char *path);

static int get_dir(GetCtx *c, int dirfd, const char *name, const char *dest, uint64_t ino, const BvFsStat *st,
                   const char *path)
{
        _cleanup_close_ int fd = -EBADF;
        BvFsEntry *ents;
        size_t n;
        int r;

        if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "cannot create the directory '%s'", dest);
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(-errno, "cannot open the directory '%s'", dest);
        r = bv_fs_readdir(c->fp->fs, ino, &ents, &n);
        if (r < 0)
                return files_error(c->fp->fs, r, "list", c->fp->prefix, path);
        for (size_t i = 0; i < n; i++) {
                const char *e = ents[i].name;
                _cleanup_free_ char *sub = files_join(path, e), *subdest = files_join(dest, e);
                if (!sub || !subdest)
                        r = log_error_errno(-ENOMEM, "cannot copy '%s'", path);
                else if (strchr(e, '/') || strcmp(e, ".") == 0 || strcmp(e, "..") == 0 || !*e)
                        r = files_error(c->fp->fs, -EBADMSG, "copy a bad name in", c->fp->prefix, path);
                else
                        r = get_entry(c, fd, e, subdest, ents[i].ino, sub);
                if (r != EXIT_OK)
                        get_fail(c, r);
        }
        bv_fs_entries_free(ents, n);
        r = set_attrs(c, dirfd, name, fd, st); /* after its entries: they changed its times */
        if (r < 0)
                return log_error_errno(r, "cannot set the mode and times of '%s'", dest);
        return EXIT_OK;
}

static int get_entry(GetCtx *c, int dirfd, const char *name, const char *dest, uint64_t ino, const char *path)
{
        BvFsStat st;
        _cleanup_free_ char *target = NULL;
        int r = bv_fs_stat(c->fp->fs, ino, &st);

        if (r < 0)
                return files_error(c->fp->fs, r, "read", c->fp->prefix, path);
        if (S_ISREG(st.mode))
                return get_file(c, dirfd, name, dest, ino, &st, path);
        if (S_ISDIR(st.mode))
                return get_dir(c, dirfd, name, dest, ino, &st, path);
        if (S_ISLNK(st.mode)) {
                r = bv_fs_readlink(c->fp->fs, ino, &target);
                if (r < 0)
                        return files_error(c->fp->fs, r, "read the link", c->fp->prefix, path);
                r = create_entry(c, dirfd, name, make_link, target);
        } else if (S_ISFIFO(st.mode))
                r = create_entry(c, dirfd, name, make_fifo, NULL);
        else {
                _cleanup_free_ char *shown = files_display(c->fp->prefix, path);
                log_warning("'%s' is a %s: not copied", shown ? shown : path, bv_file_type_name(st.mode));
                return EXIT_OK;
        }
        if (r < 0)
                return create_error(r, dest);
        r = set_attrs(c, dirfd, name, -EBADF, &st);
        if (r < 0)
                return log_error_errno(r, "cannot set the owner and times of '%s'", dest);
        c->files++;
        return EXIT_OK;
}

/* Where arg goes: into DEST (a directory) under its own name, or DEST itself. */
static int get_arg(GetCtx *c, FilesDisk *d, const char *arg, const char *dest, bool into)
{
        FilesPath fp;
        uint64_t ino;
        int r = files_resolve(d, arg, &fp);

        if (r != EXIT_OK)
                return r;
        c->fp = &fp;
        r = bv_fs_lookup(fp.fs, fp.path, false, &ino);
        if (r < 0)
                return files_error(fp.fs, r, "copy", fp.prefix, fp.path);
        _cleanup_free_ char *copy = strdup(dest), *parent = NULL, *target = NULL;
        if (!copy)
                return log_error_errno(-ENOMEM, "cannot copy '%s'", arg);
        const char *base = strrchr(fp.path, '/') + 1;
        if (into) {
                parent = strdup(dest);
                target = strdup(*base ? base : ".");
        } else {
                char *slash = strrchr(copy, '/');
                parent = slash ? strndup(copy, (size_t)(slash - copy) + 1) : strdup(".");
                target = strdup(slash ? slash + 1 : copy);
        }
        if (!parent || !target)
                return log_error_errno(-ENOMEM, "cannot copy '%s'", arg);
        _cleanup_close_ int dirfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return log_error_errno(-errno, "cannot open the directory '%s'", parent);
        _cleanup_free_ char *where = into && *base ? files_join(dest, base) : strdup(dest);
        if (!where)
                return log_error_errno(-ENOMEM, "cannot copy '%s'", arg);
        if (strcmp(target, ".") == 0) { /* the root into DEST: its entries */
                BvFsStat rst;
                r = bv_fs_stat(fp.fs, ino, &rst);
                return r < 0 ? files_error(fp.fs, r, "copy", fp.prefix, fp.path) : get_dir(c, dirfd, ".", where, ino, &rst, fp.path);
        }
        return get_entry(c, dirfd, target, where, ino, fp.path);
}

int files_get(FilesDisk *d, char **args, int n, const FilesOptions *o)
{
        const char *dest = args[n - 1];
        struct stat st;
        GetCtx c = { .o = o, .root = geteuid() == 0, .umask = umask(0) };
        bool into = stat(dest, &st) == 0 && S_ISDIR(st.st_mode);
        char a[32];

        umask(c.umask);
        if (!into && n > 2) {
                log_error("'%s' is not a directory: copying several paths needs one", dest);
                return EXIT_USAGE;
        }
        for (int i = 0; i < n - 1; i++) {
                int r = get_arg(&c, d, args[i], dest, into);
                if (r != EXIT_OK)
                        get_fail(&c, r);
        }
        if (c.ec == EXIT_OK)
                log_info("copied %llu %s (%s) to '%s'", (unsigned long long)c.files, c.files == 1 ? "file" : "files",
                         format_bytes(c.bytes, a), dest);
        else
                log_error("copied %llu %s (%s) to '%s'; what the errors above name was not copied", (unsigned long long)c.files,
                          c.files == 1 ? "file" : "files", format_bytes(c.bytes, a), dest);
        return c.ec;
}
