/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A source: an implementation behind BvSourceOps (source-file.c for files, block devices and
 * streams, source-nbd.c for NBD exports, source-libvirt.c for a disk of a libvirt backup job, source-fiemap.c for reflink copies and LVM thin
 * deltas), the table of kinds the factory opens through, and what the backup asks of every
 * source alike.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fileio.h"
#include "macro.h"
#include "source.h"

struct BvSource {
        const BvSourceOps *ops;
        void *impl;
        BvSourceKind kind;
        char *path;
        int error;    /* sticky: once failed, always failed */
        bool started; /* next() was called */
};

int bv_source_new(const BvSourceOps *ops, void *impl, BvSourceKind kind, const char *path, BvSource **ret)
{
        if (!ops || !ops->next || !ops->size || !ops->free || !path || !ret)
                return -EINVAL;
        _cleanup_free_ BvSource *s = calloc(1, sizeof(*s));
        if (!s || !(s->path = strdup(path)))
                return -ENOMEM;
        s->ops = ops;
        s->impl = impl;
        s->kind = kind;
        *ret = TAKE_PTR(s);
        return 0;
}

void bv_source_free(BvSource *s)
{
        if (!s)
                return;
        s->ops->free(s->impl);
        free(s->path);
        free(s);
}

static int recognise_nbd(const char *location, const BvSourceOptions *o)
{
        return bv_source_is_nbd_uri(location);
}

/*
 * The kinds of source, one row each: a new kind is a row here (and its BvSourceKind) plus its
 * own file. The factory opens a location with the first row whose recognise() says it is of
 * that kind; a row without recognise() takes every location that reaches it. Files, block
 * devices and streams are told apart by bv_source_open_path itself (it stats the path), so the
 * blockdev and stream rows only name their kinds.
 */
typedef struct SourceKindRow {
        BvSourceKind kind;
        const char *name;
        /* 1 when location is of this kind, 0 when not, -errno when looking failed */
        int (*recognise)(const char *location, const BvSourceOptions *o);
        int (*open)(const char *location, const BvSourceOptions *o, BvSource **ret);
} SourceKindRow;

static int recognise_image(const char *location, const BvSourceOptions *o)
{
        const char *format;

        if (o && o->as_file)
                return 0;
        if (o && o->image_format) /* stated: the file must be one (its open says when it is not) */
                return !bv_source_is_nbd_uri(location) && strcmp(location, "-") != 0;
        return bv_source_detect_image(location, &format);
}

static int recognise_libvirt(const char *location, const BvSourceOptions *o)
{
        return bv_source_is_libvirt(location);
}

static const SourceKindRow source_kinds[] = {
        { BV_SOURCE_LIBVIRT, "libvirt", recognise_libvirt, bv_source_open_libvirt },
        { BV_SOURCE_NBD, "nbd", recognise_nbd, bv_source_open_nbd },
        { BV_SOURCE_IMAGE, "image", recognise_image, bv_source_open_image },
        { BV_SOURCE_FILE, "file", NULL, bv_source_open_path },
        { BV_SOURCE_BLOCKDEV, "blockdev", NULL, bv_source_open_path },
        { BV_SOURCE_STREAM, "stream", NULL, bv_source_open_path },
};

int bv_source_open(const char *path, const BvSourceOptions *opts, BvSource **ret)
{
        if (!path || !ret)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(source_kinds); i++) {
                const SourceKindRow *k = &source_kinds[i];
                int r = k->recognise ? k->recognise(path, opts) : 1;
                if (r < 0)
                        return r;
                if (r > 0)
                        return k->open(path, opts, ret);
        }
        return -EINVAL; /* not reached: the file row takes every path */
}

const char *bv_source_kind_name(BvSourceKind k)
{
        for (size_t i = 0; i < ELEMENTSOF(source_kinds); i++)
                if (source_kinds[i].kind == k)
                        return source_kinds[i].name;
        return "unknown";
}

int bv_source_kind_from_name(const char *name, BvSourceKind *ret)
{
        for (size_t i = 0; i < ELEMENTSOF(source_kinds); i++)
                if (strcmp(name, source_kinds[i].name) == 0) {
                        *ret = source_kinds[i].kind;
                        return 0;
                }
        return -EINVAL;
}

BvSourceKind bv_source_kind(const BvSource *s)
{
        return s->kind;
}

const char *bv_source_path(const BvSource *s)
{
        return s->path;
}

uint64_t bv_source_size(const BvSource *s)
{
        return s->ops->size(s->impl);
}

bool bv_source_uses_uring(const BvSource *s)
{
        return s->ops->uses_uring && s->ops->uses_uring(s->impl);
}

bool bv_source_uses_direct(const BvSource *s)
{
        return s->ops->uses_direct && s->ops->uses_direct(s->impl);
}

int bv_source_identity(const BvSource *s, BvSourceIdentity *ret)
{
        if (!s->ops->identity)
                return -EOPNOTSUPP;
        return s->ops->identity(s->impl, ret);
}

uint64_t bv_source_work(const BvSource *s)
{
        return s->ops->work ? s->ops->work(s->impl) : UINT64_MAX;
}

const char *bv_source_image_format(const BvSource *s)
{
        return s->ops->image_format ? s->ops->image_format(s->impl) : NULL;
}

const BvSourceLibvirt *bv_source_libvirt(const BvSource *s)
{
        return s->ops->libvirt ? s->ops->libvirt(s->impl) : NULL;
}

void bv_source_read_stats(const BvSource *s, BvSourceReadStats *ret)
{
        *ret = (BvSourceReadStats){};
        if (s->ops->read_stats)
                s->ops->read_stats(s->impl, ret);
}

int bv_source_next(BvSource *s, BvExtent *ret)
{
        int r;

        if (s->error < 0)
                return s->error;
        s->started = true;
        r = s->ops->next(s->impl, ret);
        if (r < 0)
                s->error = r;
        return r;
}

int bv_source_read_at(BvSource *s, void *buf, size_t len, uint64_t offset)
{
        if (!s->ops->read_at)
                return -EOPNOTSUPP;
        return s->ops->read_at(s->impl, buf, len, offset);
}

const char *bv_source_changed_map(const BvSource *s)
{
        return s->ops->changed_map ? s->ops->changed_map(s->impl) : NULL;
}

const char *bv_source_parent_map(const BvSource *s)
{
        const char *p = s->ops->parent_map ? s->ops->parent_map(s->impl) : NULL;

        return p ?: bv_source_changed_map(s);
}

BvWholeRead *bv_source_whole_read(const BvSource *s)
{
        return s->ops->whole_read ? s->ops->whole_read(s->impl) : NULL;
}

int bv_source_read_all(BvSource *s)
{
        BvWholeRead *w = bv_source_whole_read(s);

        if (!w)
                return -EOPNOTSUPP;
        if (s->started)
                return -EBUSY; /* already reading */
        w->whole = true;
        return 0;
}

void bv_source_unchanged_ranges(const BvSource *s, const BvByteRange **ret, size_t *ret_count)
{
        const BvWholeRead *w = bv_source_whole_read(s);

        *ret = w ? w->unchanged : NULL;
        *ret_count = w ? w->n_unchanged : 0;
}

int bv_source_changed_ranges(const BvSource *s, const BvByteRange **ret, size_t *ret_count)
{
        const BvWholeRead *w = bv_source_whole_read(s);

        if (!s->ops->changed_ranges || !w || w->whole)
                return -EOPNOTSUPP;
        return s->ops->changed_ranges(s->impl, ret, ret_count);
}

bool bv_source_is_nbd_uri(const char *path)
{
        static const char *const schemes[] = { "nbd://", "nbds://", "nbd+unix://", "nbds+unix://", "nbd+vsock://",
                                               "nbds+vsock://" };

        for (size_t i = 0; i < ELEMENTSOF(schemes); i++)
                if (strncmp(path, schemes[i], strlen(schemes[i])) == 0)
                        return true;
        return false;
}

int bv_source_base_identity(const BvSource *s, BvSourceIdentity *ret)
{
        if (!s->ops->base_identity)
                return -EOPNOTSUPP;
        return s->ops->base_identity(s->impl, ret);
}

void bv_source_identity_from_stat(const struct stat *st, BvSourceIdentity *ret)
{
        *ret = (BvSourceIdentity){
                .dev = (uint64_t)st->st_dev, .ino = (uint64_t)st->st_ino, .size = (uint64_t)st->st_size,
                .mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec,
                .ctime_ns = (uint64_t)st->st_ctim.tv_sec * 1000000000ull + (uint64_t)st->st_ctim.tv_nsec,
        };
}

int bv_source_open_fd(const char *path, int flags, struct stat *ret_st)
{
        struct stat st;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | flags);

        if (fd < 0 || fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        *ret_st = st;
        return TAKE_FD(fd);
}

int bv_source_pread(int fd, void *buf, size_t len, uint64_t offset)
{
        ssize_t n = bv_pread_all(fd, buf, len, offset);

        if (n < 0)
                return (int)n;
        return (size_t)n == len ? 0 : -ENODATA;
}

int bv_range_append(BvByteRange **v, size_t *n, size_t *cap, uint64_t offset, uint64_t length)
{
        if (*n > 0 && (*v)[*n - 1].offset + (*v)[*n - 1].length == offset) {
                (*v)[*n - 1].length += length;
                return 0;
        }
        int r = BV_ARRAY_RESERVE(*v, *cap, *n + 1, 64);
        if (r < 0)
                return r;
        (*v)[(*n)++] = (BvByteRange){ offset, length };
        return 0;
}
