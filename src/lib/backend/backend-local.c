/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The local backend: a repository is a directory (docs/FORMAT.md). Every key is resolved beneath
 * the directory and never through a symbolic link (fileio.h, bv_open_beneath); every object is
 * written with the durability recipe: a temporary file in its folder, fsync, link (or rename
 * when replacing), fsync of the folder. Locks and leases are flock(2)s.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "fileio.h"
#include "macro.h"

typedef struct Local {
        BvBackend base;
        int dirfd;
} Local;

typedef struct LocalReader {
        BvObjReader base;
        int fd;
        uint64_t size;
} LocalReader;

typedef struct LocalWriter {
        BvObjWriter base;
        BvObjKind kind;
        int folder_fd; /* the kind's folder, where the temporary file lives */
        int fd;
        char tmpname[64];
} LocalWriter;

typedef struct LocalLease {
        BvBackendLease base;
        int folder_fd; /* leases/ */
        int fd;        /* holds the flock */
        char name[BV_LEASE_NAME_SIZE];
} LocalLease;

#define LOCAL(b) ((Local *)(b))

/* The folders init makes (leases/ and gc/ are made by their first writer). */
static const char *const layout[] = { "keys", "packs", "index", "snapshots", "locks", "tmp" };

static int local_key(BvObjKind kind, const char *name, char key[BV_BACKEND_KEY_MAX])
{
        return bv_obj_key(kind, name, key);
}

/* The folder of key (everything before its last '/'; "." for a top-level object) and its
 * last component. */
static void split_key(char *key, const char **ret_folder, const char **ret_base)
{
        char *slash = strrchr(key, '/');

        if (!slash) {
                *ret_folder = ".";
                *ret_base = key;
                return;
        }
        *slash = '\0';
        *ret_folder = key;
        *ret_base = slash + 1;
}

/* Opens the folder of key beneath the repository, creating the missing ones (the kind's folder
 * and, for packs, packs/xx/: each made durable in its parent before anything is linked in it). */
static int folder_open(Local *l, const char *folder, bool create)
{
        char path[BV_BACKEND_KEY_MAX];
        int fd = -EBADF;

        if (!create || strcmp(folder, ".") == 0)
                return bv_open_dir_beneath(l->dirfd, folder);
        snprintf(path, sizeof(path), "%s", folder);
        for (char *p = path;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char saved = *p;
                *p = '\0';
                int m = bv_mkdirat_shared(l->dirfd, path);
                if (m >= 0) {
                        char *parent = strrchr(path, '/');
                        _cleanup_close_ int pfd = -EBADF;
                        if (parent) {
                                *parent = '\0';
                                pfd = bv_open_dir_beneath(l->dirfd, path);
                                *parent = '/';
                        } else
                                pfd = fcntl(l->dirfd, F_DUPFD_CLOEXEC, 3);
                        int r = pfd < 0 ? pfd : bv_fsync_dir(pfd);
                        if (r < 0)
                                return r;
                } else if (m != -EEXIST)
                        return m;
                *p = saved;
                if (saved == '\0')
                        break;
        }
        fd = bv_open_dir_beneath(l->dirfd, folder);
        return fd;
}

static int local_create(BvBackend *b)
{
        Local *l = LOCAL(b);
        struct dirent *de;
        DIR *d;
        int r;

        r = bv_opendir_beneath(l->dirfd, ".", &d);
        if (r < 0)
                return r;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                        bool is_repo = strcmp(de->d_name, "config") == 0;
                        closedir(d);
                        return is_repo ? -EEXIST : -ENOTEMPTY;
                }
        closedir(d);
        for (size_t i = 0; i < ELEMENTSOF(layout); i++) {
                r = bv_mkdir_p(l->dirfd, layout[i]);
                if (r < 0)
                        return r;
        }
        return bv_fsync_dir(l->dirfd);
}

static void local_close(BvBackend *b)
{
        Local *l = LOCAL(b);

        safe_close(l->dirfd);
        free(b->location);
        free(l);
}

/* Writes fd's temporary file under its name in folder durably: fsync, link (rename when
 * replacing), fsync of the folder. */
static int commit_tmp(int folder_fd, int fd, const char *tmpname, const char *base, BvPutFlags flags)
{
        return bv_tmpfile_link(folder_fd, fd, tmpname, base, !!(flags & BV_PUT_REPLACE));
}

static int local_put(BvBackend *b, BvObjKind kind, const char *name, const void *data, size_t len,
                     BvPutFlags flags)
{
        char key[BV_BACKEND_KEY_MAX];
        const char *folder, *base;
        _cleanup_close_ int folder_fd = -EBADF;
        int r = local_key(kind, name, key);

        if (r < 0)
                return r;
        split_key(key, &folder, &base);
        folder_fd = folder_open(LOCAL(b), folder, true);
        if (folder_fd < 0)
                return folder_fd;
        return bv_write_file_shared(folder_fd, base, data, len, !!(flags & BV_PUT_REPLACE));
}

static int local_get(BvBackend *b, BvObjKind kind, const char *name, size_t max, void **ret, size_t *ret_len)
{
        char key[BV_BACKEND_KEY_MAX];
        int r = local_key(kind, name, key);

        return r < 0 ? r : bv_read_file_beneath(LOCAL(b)->dirfd, key, max, ret, ret_len);
}

static void entry_from_stat(const struct stat *st, BvObjEntry *ret)
{
        ret->size = (uint64_t)st->st_size;
        ret->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
        ret->type = st->st_mode & S_IFMT;
}

/* The folder of (kind, name), opened beneath the repository; *ret_base points into key. */
static int key_folder(BvBackend *b, BvObjKind kind, const char *name, char key[BV_BACKEND_KEY_MAX],
                      const char **ret_base)
{
        const char *folder;
        int r = local_key(kind, name, key);

        if (r < 0)
                return r;
        split_key(key, &folder, ret_base);
        return bv_open_dir_beneath(LOCAL(b)->dirfd, folder);
}

static int local_stat(BvBackend *b, BvObjKind kind, const char *name, BvObjEntry *ret)
{
        char key[BV_BACKEND_KEY_MAX];
        const char *base;
        _cleanup_close_ int folder_fd = key_folder(b, kind, name, key, &base);
        struct stat st;

        if (folder_fd < 0)
                return folder_fd;
        if (fstatat(folder_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        *ret = (BvObjEntry){ .name = name };
        entry_from_stat(&st, ret);
        if (!S_ISREG(st.st_mode))
                return S_ISLNK(st.st_mode) ? -ELOOP : -EBADFD;
        return 0;
}

static int local_remove(BvBackend *b, BvObjKind kind, const char *name)
{
        char key[BV_BACKEND_KEY_MAX];
        const char *base;
        _cleanup_close_ int folder_fd = key_folder(b, kind, name, key, &base);

        if (folder_fd < 0)
                return folder_fd;
        if (unlinkat(folder_fd, base, 0) < 0)
                return negative_errno();
        return bv_fsync_dir(folder_fd);
}

/* Lists one folder: every entry but "." and "..", named prefix + its name. */
static int list_folder(int folder_fd, const char *prefix, bv_obj_list_fn fn, void *userdata)
{
        struct dirent *de;
        DIR *d;
        int n = 0, r;

        r = bv_opendir_beneath(folder_fd, ".", &d);
        if (r < 0)
                return r;
        while ((errno = 0, de = readdir(d))) {
                char name[NAME_MAX + 8];
                BvObjEntry e;
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue; /* gone meanwhile */
                        r = negative_errno();
                        break;
                }
                snprintf(name, sizeof(name), "%s%s", prefix, de->d_name);
                e = (BvObjEntry){ .name = name };
                entry_from_stat(&st, &e);
                r = fn(&e, userdata);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && errno != 0)
                r = negative_errno();
        closedir(d);
        return r < 0 ? r : n;
}

typedef struct FanOut {
        int packs_fd;
        bv_obj_list_fn fn;
        void *userdata;
        int count;
} FanOut;

/* packs/: every xx/ folder is listed in turn; another entry is passed on as it is. */
static int fan_out_entry(const BvObjEntry *e, void *userdata)
{
        FanOut *f = userdata;
        _cleanup_close_ int sub = -EBADF;
        char prefix[8];
        int r;

        if (e->type != S_IFDIR) {
                f->count++;
                return f->fn(e, f->userdata);
        }
        sub = bv_open_dir_beneath(f->packs_fd, e->name);
        if (sub < 0)
                return sub;
        snprintf(prefix, sizeof(prefix), "%.4s/", e->name);
        r = list_folder(sub, prefix, f->fn, f->userdata);
        if (r < 0)
                return r;
        f->count += r;
        return 0;
}

static int local_list(BvBackend *b, BvObjKind kind, bv_obj_list_fn fn, void *userdata)
{
        const char *folder = bv_obj_kind_folder(kind);
        _cleanup_close_ int folder_fd = -EBADF;
        int r;

        if (!folder || !*folder)
                return -EINVAL; /* the single objects are not listed */
        folder_fd = bv_open_dir_beneath(LOCAL(b)->dirfd, folder);
        if (folder_fd == -ENOENT)
                return 0;
        if (folder_fd < 0)
                return folder_fd;
        if (kind != BV_KIND_PACK)
                return list_folder(folder_fd, "", fn, userdata);
        FanOut f = { .packs_fd = folder_fd, .fn = fn, .userdata = userdata };
        r = list_folder(folder_fd, "", fan_out_entry, &f);
        return r < 0 ? r : f.count;
}

/* ---- readers ---- */

static int local_reader_open(BvBackend *b, BvObjKind kind, const char *name, BvObjReader **ret)
{
        char key[BV_BACKEND_KEY_MAX];
        _cleanup_close_ int fd = -EBADF;
        LocalReader *rd;
        uint64_t size;
        int r = local_key(kind, name, key);

        if (r < 0)
                return r;
        fd = bv_open_file_beneath(LOCAL(b)->dirfd, key, O_RDONLY);
        if (fd < 0)
                return fd;
        r = bv_fd_size(fd, &size);
        if (r < 0)
                return r;
        rd = calloc(1, sizeof(*rd));
        if (!rd)
                return -ENOMEM;
        *rd = (LocalReader){ .base.backend = b, .fd = TAKE_FD(fd), .size = size };
        *ret = &rd->base;
        return 0;
}

static ssize_t local_reader_pread(BvObjReader *r, void *buf, size_t len, uint64_t offset)
{
        return bv_pread_all(((LocalReader *)r)->fd, buf, len, offset);
}

static uint64_t local_reader_size(BvObjReader *r)
{
        return ((LocalReader *)r)->size;
}

static void local_reader_advise(BvObjReader *r, uint64_t offset, uint64_t len)
{
        (void)posix_fadvise(((LocalReader *)r)->fd, (off_t)offset, (off_t)len, POSIX_FADV_WILLNEED);
}

static int local_reader_fd(BvObjReader *r)
{
        return ((LocalReader *)r)->fd;
}

static void local_reader_close(BvObjReader *r)
{
        safe_close(((LocalReader *)r)->fd);
        free(r);
}

/* ---- writers ---- */

static int local_writer_open(BvBackend *b, BvObjKind kind, BvObjWriter **ret)
{
        const char *folder = bv_obj_kind_folder(kind);
        _cleanup_free_ LocalWriter *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        if (!folder)
                return -EINVAL;
        *w = (LocalWriter){ .base.backend = b, .kind = kind, .fd = -EBADF };
        w->folder_fd = folder_open(LOCAL(b), *folder ? folder : ".", true);
        if (w->folder_fd < 0)
                return w->folder_fd;
        r = bv_tmpfile_open(w->folder_fd, &w->fd, w->tmpname);
        if (r >= 0 && (r = bv_share_file(w->folder_fd, w->fd)) < 0) {
                bv_tmpfile_discard(w->folder_fd, w->tmpname);
                safe_close(w->fd);
        }
        if (r < 0) {
                safe_close(w->folder_fd);
                return r;
        }
        *ret = &TAKE_PTR(w)->base;
        return 0;
}

static int local_writer_fd(BvObjWriter *w)
{
        return ((LocalWriter *)w)->fd;
}

static void local_writer_abort(BvObjWriter *bw)
{
        LocalWriter *w = (LocalWriter *)bw;

        if (!w)
                return;
        if (w->fd >= 0)
                bv_tmpfile_discard(w->folder_fd, w->tmpname);
        safe_close(w->fd);
        safe_close(w->folder_fd);
        free(w);
}

/* A fan-out name ("xx/<name>"): its xx/ is made (durably) first, the file is linked there from
 * the kind's folder, and xx/ is fsynced too. */
static int local_writer_commit(BvObjWriter *bw, const char *name, BvPutFlags flags)
{
        LocalWriter *w = (LocalWriter *)bw;
        char key[BV_BACKEND_KEY_MAX];
        const char *folder, *base, *slash;
        _cleanup_close_ int sub_fd = -EBADF;
        int r = local_key(w->kind, name, key);

        if (r >= 0 && (slash = strchr(name, '/'))) {
                split_key(key, &folder, &base);
                sub_fd = folder_open(LOCAL(bw->backend), folder, true);
                r = sub_fd < 0 ? sub_fd : 0;
        }
        if (r >= 0)
                r = commit_tmp(w->folder_fd, w->fd, w->tmpname, name, flags);
        if (r >= 0)
                w->tmpname[0] = '\0'; /* linked: nothing to discard any more */
        if (r >= 0 && sub_fd >= 0)
                r = bv_fsync_dir(sub_fd);
        local_writer_abort(bw);
        return r;
}

/* ---- locks and leases ---- */

static int local_lock(BvBackend *b, BvLockKind kind, bool wait)
{
        return bv_lock_take(LOCAL(b)->dirfd, kind, wait);
}

static int local_lock_holder(BvBackend *b, BvLockKind kind, char *buf, size_t size)
{
        return bv_lock_holder(LOCAL(b)->dirfd, kind, buf, size);
}

static int lease_link(LocalLease *l, int fd, const char *tmpname, const void *body, size_t len)
{
        int r = bv_write_all(fd, body, len);

        if (r >= 0)
                r = bv_lease_name_new(l->name);
        if (r < 0)
                return r;
        return bv_tmpfile_link(l->folder_fd, fd, tmpname, l->name, false);
}

static int local_lease_take(BvBackend *b, const void *body, size_t len, BvBackendLease **ret)
{
        _cleanup_free_ LocalLease *l = calloc(1, sizeof(*l));
        _cleanup_close_ int fd = -EBADF;
        char tmpname[64];
        int r;

        if (!l)
                return -ENOMEM;
        l->base.backend = b;
        l->base.name = l->name;
        l->folder_fd = folder_open(LOCAL(b), "leases", true);
        if (l->folder_fd < 0)
                return l->folder_fd;
        r = bv_tmpfile_open_prefix(l->folder_fd, ".tmp-", &fd, tmpname);
        if (r >= 0)
                r = bv_share_file(l->folder_fd, fd);
        if (r >= 0 && flock(fd, LOCK_EX) < 0) /* nobody else can see it yet: never blocks */
                r = negative_errno();
        if (r >= 0)
                r = lease_link(l, fd, tmpname, body, len);
        if (r < 0) {
                if (fd >= 0)
                        bv_tmpfile_discard(l->folder_fd, tmpname);
                safe_close(l->folder_fd);
                return r;
        }
        l->fd = TAKE_FD(fd);
        *ret = &TAKE_PTR(l)->base;
        return 0;
}

static void local_lease_release(BvBackendLease *bl)
{
        LocalLease *l = (LocalLease *)bl;

        /* unlink while still locked: gc never sees it unlocked and half gone */
        (void)unlinkat(l->folder_fd, l->name, 0);
        safe_close(l->fd);
        safe_close(l->folder_fd);
        free(l);
}

/* The body of a held lease, read from the fd that tested it. */
static int lease_body(int fd, size_t max, char **ret)
{
        _cleanup_free_ char *buf = malloc(max + 1);
        ssize_t n;

        if (!buf)
                return -ENOMEM;
        n = bv_pread_all(fd, buf, max, 0);
        if (n < 0)
                return (int)n;
        buf[n] = '\0';
        *ret = TAKE_PTR(buf);
        return 0;
}

static int local_lease_alive(BvBackend *b, const char *name, bool reap, size_t max, char **ret_body)
{
        char key[BV_BACKEND_KEY_MAX];
        _cleanup_close_ int fd = -EBADF;
        int r = local_key(BV_KIND_LEASE, name, key);

        if (r < 0)
                return r;
        fd = bv_open_file_beneath(LOCAL(b)->dirfd, key, O_RDONLY);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return negative_errno();
                if (ret_body) {
                        r = lease_body(fd, max, ret_body);
                        if (r < 0)
                                return r;
                }
                return 1;
        }
        /* its holder ended: nobody can lock it again once it is unlinked */
        if (reap && unlinkat(LOCAL(b)->dirfd, key, 0) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

static int local_culprit(BvBackend *b, const char *key, bool want_dir, mode_t *ret_mode)
{
        return bv_beneath_culprit(LOCAL(b)->dirfd, key, want_dir, ret_mode);
}

static const BvBackendOps local_ops = {
        .scheme = "file",
        .create = local_create,
        .close = local_close,
        .put = local_put,
        .get = local_get,
        .stat = local_stat,
        .remove = local_remove,
        .list = local_list,
        .reader_open = local_reader_open,
        .reader_pread = local_reader_pread,
        .reader_size = local_reader_size,
        .reader_advise = local_reader_advise,
        .reader_fd = local_reader_fd,
        .reader_close = local_reader_close,
        .writer_open = local_writer_open,
        .writer_fd = local_writer_fd,
        .writer_commit = local_writer_commit,
        .writer_abort = local_writer_abort,
        .lock = local_lock,
        .lock_holder = local_lock_holder,
        .lease_take = local_lease_take,
        .lease_release = local_lease_release,
        .lease_alive = local_lease_alive,
        .culprit = local_culprit,
};

int bv_backend_local_open(const char *path, bool create, BvBackend **ret)
{
        _cleanup_free_ Local *l = calloc(1, sizeof(*l));
        int r;

        if (!l)
                return -ENOMEM;
        if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        /* the user's own path: the one place where a symbolic link is followed */
        l->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l->dirfd < 0)
                return negative_errno();
        l->base.ops = &local_ops;
        l->base.location = strdup(path);
        if (!l->base.location) {
                safe_close(l->dirfd);
                return -ENOMEM;
        }
        if (create) {
                r = local_create(&l->base);
                if (r < 0) {
                        local_close(&TAKE_PTR(l)->base);
                        return r;
                }
        }
        *ret = &TAKE_PTR(l)->base;
        return 0;
}

int bv_backend_local_dirfd(BvBackend *b)
{
        return bv_backend_is_local(b) ? LOCAL(b)->dirfd : -EOPNOTSUPP;
}
