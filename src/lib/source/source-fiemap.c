/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sources that know at open which ranges changed: a thin delta (bv_source_open_thin_delta) and
 * a regular file compared with its previous version kept as a reflink copy (cp --reflink) or in
 * a btrfs snapshot, behind the source ops table. FIEMAP maps both files at open: where the two
 * map the same offset to the same physical block, they share it, so the file holds there what
 * the previous version holds, and the range is delivered as UNCHANGED (the backup takes it from
 * the parent snapshot that read the previous version). The rest is read with pread, ranges no
 * extent maps are holes. In a whole read (bv_source_read_all) everything is read and the shared
 * ranges are only remembered, for the backup's check of the map.
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "macro.h"
#include "source.h"
#include "thin-delta.h"

#define FIEMAP_BATCH 512u
/* Extents whose physical address says nothing about their content, or that are not plain blocks. */
#define NOT_SHAREABLE (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNWRITTEN | \
                       FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_DATA_TAIL | FIEMAP_EXTENT_NOT_ALIGNED | \
                       FIEMAP_EXTENT_DATA_ENCRYPTED)

typedef struct Extents {
        struct fiemap_extent *v;
        size_t n, cap;
} Extents;

typedef struct Segment {
        BvExtentKind kind; /* DATA (read), HOLE (no extent), UNCHANGED (shared with the previous version) */
        uint64_t offset, length;
} Segment;

typedef struct FiemapSource {
        int fd;
        char *map_name; /* "fiemap:PATH", "lvm-thin:NEW" */
        char *parent_map; /* "lvm-thin:OLD", or NULL */
        bool has_identity; /* a regular file */
        uint64_t size;
        size_t read_size;
        BvSourceIdentity identity, base; /* the file's, and its previous version's */
        Segment *seg;
        size_t n_seg, cap_seg, at; /* at: the segment being delivered */
        BvWholeRead wr; /* unchanged: the ranges shared with the previous version */
        uint64_t pos;
        uint8_t *buf;
} FiemapSource;

static void fiemap_source_free(FiemapSource *s)
{
        if (!s)
                return;
        safe_close(s->fd);
        free(s->map_name);
        free(s->parent_map);
        free(s->seg);
        free(s->wr.unchanged);
        free(s->buf);
        free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(FiemapSource, fiemap_source_free);

/* Every extent of fd, in order (FIEMAP_FLAG_SYNC: delayed allocations get their blocks first). */
static int map_file(int fd, Extents *ret)
{
        _cleanup_free_ struct fiemap *fm =
                calloc(1, sizeof(struct fiemap) + FIEMAP_BATCH * sizeof(struct fiemap_extent));
        uint64_t start = 0;

        if (!fm)
                return -ENOMEM;
        for (;;) {
                *fm = (struct fiemap){ .fm_start = start, .fm_length = FIEMAP_MAX_OFFSET - start,
                                       .fm_flags = FIEMAP_FLAG_SYNC, .fm_extent_count = FIEMAP_BATCH };
                if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0)
                        return errno == ENOTTY || errno == EINVAL ? -EOPNOTSUPP : negative_errno();
                if (fm->fm_mapped_extents == 0)
                        return 0;
                if (BV_ARRAY_RESERVE(ret->v, ret->cap, ret->n + fm->fm_mapped_extents, 64) < 0)
                        return -ENOMEM;
                memcpy(ret->v + ret->n, fm->fm_extents, fm->fm_mapped_extents * sizeof(struct fiemap_extent));
                ret->n += fm->fm_mapped_extents;
                const struct fiemap_extent *last = &fm->fm_extents[fm->fm_mapped_extents - 1];
                if (last->fe_flags & FIEMAP_EXTENT_LAST)
                        return 0;
                start = last->fe_logical + last->fe_length;
        }
}

/* Appends [offset, end) of kind, merged with the segment before it if of the same kind. */
static int segment_add(FiemapSource *s, BvExtentKind kind, uint64_t offset, uint64_t end)
{
        end = MIN(end, s->size);
        if (end <= offset)
                return 0;
        if (s->n_seg > 0 && s->seg[s->n_seg - 1].kind == kind) {
                s->seg[s->n_seg - 1].length = end - s->seg[s->n_seg - 1].offset;
                return 0;
        }
        if (BV_ARRAY_RESERVE(s->seg, s->cap_seg, s->n_seg + 1, 64) < 0)
                return -ENOMEM;
        s->seg[s->n_seg++] = (Segment){ kind, offset, end - offset };
        return 0;
}

/* The part of a (an extent of the file) that the previous version maps to the same blocks,
 * from the extents of b at or after *bi: added as shared, the rest of a as DATA. */
static int compare_extent(FiemapSource *s, const struct fiemap_extent *a, const Extents *b, size_t *bi)
{
        uint64_t pos = a->fe_logical, end = a->fe_logical + a->fe_length;
        int r;

        while (*bi < b->n && b->v[*bi].fe_logical + b->v[*bi].fe_length <= pos)
                (*bi)++;
        for (size_t j = *bi; j < b->n && b->v[j].fe_logical < end && pos < end; j++) {
                const struct fiemap_extent *e = &b->v[j];
                uint64_t from = MAX(pos, e->fe_logical), to = MIN(end, e->fe_logical + e->fe_length);
                bool same = !((a->fe_flags | e->fe_flags) & NOT_SHAREABLE) &&
                            a->fe_physical - a->fe_logical == e->fe_physical - e->fe_logical;
                if ((a->fe_flags | e->fe_flags) & FIEMAP_EXTENT_ENCODED)
                        same = same && a->fe_logical == e->fe_logical && a->fe_length == e->fe_length;
                if (!same || to <= from)
                        continue;
                if ((r = segment_add(s, BV_EXTENT_DATA, pos, from)) < 0 ||
                    (r = segment_add(s, BV_EXTENT_UNCHANGED, from, to)) < 0 ||
                    (r = bv_range_append(&s->wr.unchanged, &s->wr.n_unchanged, &s->wr.cap_unchanged, from,
                                         MIN(to, s->size) - from)) < 0)
                        return r;
                pos = to;
        }
        return segment_add(s, BV_EXTENT_DATA, pos, end);
}

/* The file's segments from the two maps: holes between extents, shared and unshared data. */
static int plan(FiemapSource *s, const Extents *a, const Extents *b)
{
        uint64_t pos = 0;
        size_t bi = 0;
        int r;

        for (size_t i = 0; i < a->n && pos < s->size; i++) {
                if ((r = segment_add(s, BV_EXTENT_HOLE, pos, a->v[i].fe_logical)) < 0 ||
                    (r = compare_extent(s, &a->v[i], b, &bi)) < 0)
                        return r;
                pos = MAX(pos, a->v[i].fe_logical + a->v[i].fe_length);
        }
        return segment_add(s, BV_EXTENT_HOLE, pos, s->size);
}

static int fiemap_next(void *impl, BvExtent *ret)
{
        FiemapSource *s = impl;

        while (s->at < s->n_seg && s->pos >= s->seg[s->at].offset + s->seg[s->at].length)
                s->at++;
        if (s->at == s->n_seg)
                return 0;
        const Segment *g = &s->seg[s->at];
        uint64_t end = g->offset + g->length;
        BvExtentKind kind = g->kind == BV_EXTENT_UNCHANGED && s->wr.whole ? BV_EXTENT_DATA : g->kind;
        *ret = (BvExtent){ .kind = kind, .offset = s->pos, .length = end - s->pos };
        if (kind == BV_EXTENT_DATA) {
                ret->length = MIN(ret->length, (uint64_t)s->read_size);
                int r = bv_source_pread(s->fd, s->buf, (size_t)ret->length, s->pos);
                if (r < 0)
                        return r;
                ret->data = s->buf;
        }
        s->pos += ret->length;
        return 1;
}

static int fiemap_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        return bv_source_pread(((FiemapSource *)impl)->fd, buf, len, offset);
}

static uint64_t fiemap_size(void *impl)
{
        return ((FiemapSource *)impl)->size;
}

static int fiemap_identity(void *impl, BvSourceIdentity *ret)
{
        FiemapSource *s = impl;

        if (!s->has_identity)
                return -EOPNOTSUPP;
        *ret = s->identity;
        return 0;
}

static const char *fiemap_parent_map(void *impl)
{
        return ((FiemapSource *)impl)->parent_map;
}

static int fiemap_base_identity(void *impl, BvSourceIdentity *ret)
{
        *ret = ((FiemapSource *)impl)->base;
        return 0;
}

static const char *fiemap_changed_map(void *impl)
{
        return ((FiemapSource *)impl)->map_name;
}

static BvWholeRead *fiemap_whole_read(void *impl)
{
        return &((FiemapSource *)impl)->wr;
}

static void fiemap_free_op(void *impl)
{
        fiemap_source_free(impl);
}

static const BvSourceOps fiemap_ops = {
        .next = fiemap_next, .read_at = fiemap_read_at, .size = fiemap_size, .identity = fiemap_identity,
        .base_identity = fiemap_base_identity, .changed_map = fiemap_changed_map, .whole_read = fiemap_whole_read,
        .free = fiemap_free_op,
};
static const BvSourceOps thin_ops = {
        .next = fiemap_next, .read_at = fiemap_read_at, .size = fiemap_size, .identity = fiemap_identity,
        .changed_map = fiemap_changed_map, .parent_map = fiemap_parent_map, .whole_read = fiemap_whole_read,
        .free = fiemap_free_op,
};

/* Opens a regular file for the comparison: its descriptor and identity. */
static int open_regular(const char *path, int *ret_fd, BvSourceIdentity *ret_id)
{
        struct stat st;
        _cleanup_close_ int fd = bv_source_open_fd(path, 0, &st);

        if (fd < 0)
                return fd;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        bv_source_identity_from_stat(&st, ret_id);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A new source: fd -EBADF, the read size and its buffer. */
static int source_alloc(const BvSourceOptions *opts, FiemapSource **ret)
{
        _cleanup_(fiemap_source_freep) FiemapSource *s = calloc(1, sizeof(FiemapSource));

        if (!s)
                return -ENOMEM;
        s->fd = -EBADF;
        s->read_size = opts && opts->read_size ? opts->read_size : BV_SOURCE_READ_SIZE;
        if (s->read_size > BV_SOURCE_READ_SIZE_MAX)
                return -EINVAL;
        s->buf = malloc(s->read_size);
        if (!s->buf)
                return -ENOMEM;
        *ret = TAKE_PTR(s);
        return 0;
}

int bv_source_open_compare(const char *path, const char *compare_with, const BvSourceOptions *opts, BvSource **ret)
{
        Extents a = {}, b = {};
        _cleanup_close_ int base_fd = -EBADF;
        int r;

        _cleanup_(fiemap_source_freep) FiemapSource *s = NULL;

        if (!path || !compare_with || !ret)
                return -EINVAL;
        if ((r = source_alloc(opts, &s)) < 0)
                return r;
        s->has_identity = true;
        if ((r = open_regular(path, &s->fd, &s->identity)) < 0 ||
            (r = open_regular(compare_with, &base_fd, &s->base)) < 0)
                return r;
        if (s->identity.dev == s->base.dev && s->identity.ino == s->base.ino)
                return -EINVAL; /* the file itself */
        s->size = s->identity.size;
        if (asprintf(&s->map_name, "fiemap:%s", compare_with) < 0) {
                s->map_name = NULL;
                return -ENOMEM;
        }
        r = map_file(s->fd, &a);
        if (r >= 0)
                r = map_file(base_fd, &b);
        if (r >= 0)
                r = plan(s, &a, &b);
        free(a.v);
        free(b.v);
        if (r < 0)
                return r;
        r = bv_source_new(&fiemap_ops, s, BV_SOURCE_FILE, path, ret);
        if (r >= 0)
                TAKE_PTR(s);
        return r;
}

/* The segments from the changed ranges (d NULL: everything changed): the rest is UNCHANGED (and
 * remembered for the check). */
static int plan_delta(FiemapSource *s, const BvThinDelta *d)
{
        uint64_t pos = 0;
        size_t n = d ? d->n_changed : 0;
        int r;

        if (!d)
                return segment_add(s, BV_EXTENT_DATA, 0, s->size);
        for (size_t i = 0; i <= n && pos < s->size; i++) {
                uint64_t from = i < n ? MIN(d->changed[i].offset, s->size) : s->size;
                uint64_t to = i < n ? MIN(from + d->changed[i].length, s->size) : s->size;
                if (from > pos && (r = bv_range_append(&s->wr.unchanged, &s->wr.n_unchanged, &s->wr.cap_unchanged,
                                                      pos, from - pos)) < 0)
                        return r;
                if ((r = segment_add(s, BV_EXTENT_UNCHANGED, pos, from)) < 0 ||
                    (r = segment_add(s, BV_EXTENT_DATA, from, to)) < 0)
                        return r;
                pos = to;
        }
        return 0;
}

/* "lvm-thin:ID", or "lvm-thin:ID:UUID" */
static int thin_map_name(uint64_t id, const char *uuid, char **ret)
{
        int n = uuid ? asprintf(ret, "lvm-thin:%llu:%s", (unsigned long long)id, uuid) :
                       asprintf(ret, "lvm-thin:%llu", (unsigned long long)id);
        if (n < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

int bv_source_open_thin(const char *path, uint64_t device_id, const char *uuid, const BvThinDelta *d,
                        const char *base_uuid, const BvSourceOptions *opts, BvSource **ret)
{
        _cleanup_(fiemap_source_freep) FiemapSource *s = NULL;
        struct stat st;
        int r;

        if (!path || !ret || (d && d->right != device_id))
                return -EINVAL;
        if ((r = source_alloc(opts, &s)) < 0)
                return r;
        s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (s->fd < 0 || fstat(s->fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
                return -EINVAL;
        s->has_identity = S_ISREG(st.st_mode);
        bv_source_identity_from_stat(&st, &s->identity);
        if ((r = bv_fd_size(s->fd, &s->size)) < 0)
                return r;
        if (d && (s->size % 512 != 0 || d->blocks > DIV_ROUND_UP(s->size, d->block_bytes)))
                return -ERANGE; /* a delta of a larger device: what lies past the end is not here */
        if ((r = thin_map_name(device_id, uuid, &s->map_name)) < 0 ||
            (d && (r = thin_map_name(d->left, base_uuid, &s->parent_map)) < 0) || (r = plan_delta(s, d)) < 0)
                return r;
        r = bv_source_new(&thin_ops, s, S_ISREG(st.st_mode) ? BV_SOURCE_FILE : BV_SOURCE_BLOCKDEV, path, ret);
        if (r >= 0)
                TAKE_PTR(s);
        return r;
}

int bv_source_open_thin_delta(const char *path, const char *delta_path, const BvSourceOptions *opts,
                              BvSource **ret)
{
        _cleanup_free_ void *xml = NULL;
        BvThinDelta d = {};
        size_t len;
        int r;

        if (!path || !delta_path || !ret)
                return -EINVAL;
        if ((r = bv_read_file(AT_FDCWD, delta_path, 64u << 20, &xml, &len)) < 0 ||
            (r = bv_thin_delta_parse(xml, len, &d)) < 0)
                return r;
        r = bv_source_open_thin(path, d.right, NULL, &d, NULL, opts, ret);
        bv_thin_delta_done(&d);
        return r;
}
