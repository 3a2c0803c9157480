/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The used-blocks-only source (used-source.h): the map's free runs as holes, the rest read with
 * the wrapped source's read_at in read-size pieces, and whether the source may change under the
 * read at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "mounts.h"
#include "used-source.h"

typedef struct UsedSource {
        BvSource *inner;
        int fd;                  /* the file or device the map was made from */
        bool check_identity;     /* a regular file: compare it with identity at the end */
        BvSourceIdentity identity;
        uint64_t size, bytes_free;
        BvByteRange *skip;
        size_t n_skip, at;       /* at: the first skip range not wholly behind pos */
        uint64_t pos;
        size_t read_size;
        uint8_t *buf;
} UsedSource;

static void used_source_free(UsedSource *s)
{
        if (!s)
                return;
        bv_source_free(s->inner);
        safe_close(s->fd);
        free(s->skip);
        free(s->buf);
        free(s);
}

/* The end of the read: a regular file must be as it was when it was mapped. */
static int check_unchanged(UsedSource *s)
{
        struct stat st;
        BvSourceIdentity now;

        if (!s->check_identity)
                return 0;
        if (fstat(s->fd, &st) < 0)
                return negative_errno();
        bv_source_identity_from_stat(&st, &now);
        return memcmp(&now, &s->identity, sizeof(now)) == 0 ? 0 : -ESTALE;
}

/* A regular file's holes (SEEK_DATA) in [pos, *end) are not read either: true when pos starts
 * one, *end then its end; else *end is where the data from pos ends. */
static bool sparse_hole(UsedSource *s, uint64_t *end)
{
        off_t d = lseek(s->fd, (off_t)s->pos, SEEK_DATA);
        if (d < 0 && errno == ENXIO)
                return true; /* nothing but a hole to the file's end */
        if (d < 0)
                return false;
        if ((uint64_t)d > s->pos) {
                *end = MIN(*end, (uint64_t)d);
                return true;
        }
        off_t h = lseek(s->fd, (off_t)s->pos, SEEK_HOLE);
        if (h > 0 && (uint64_t)h > s->pos)
                *end = MIN(*end, (uint64_t)h);
        return false;
}

/* What lies at pos up to end (the next free run): a hole of the file, or data read. */
static int deliver(UsedSource *s, uint64_t end, BvExtent *ret)
{
        if (s->check_identity && sparse_hole(s, &end)) {
                *ret = (BvExtent){ .kind = BV_EXTENT_HOLE, .offset = s->pos, .length = end - s->pos };
                return 0;
        }
        *ret = (BvExtent){ .kind = BV_EXTENT_DATA, .offset = s->pos,
                           .length = MIN(end - s->pos, (uint64_t)s->read_size), .data = s->buf };
        return bv_source_read_at(s->inner, s->buf, (size_t)ret->length, s->pos);
}

static int used_next(void *impl, BvExtent *ret)
{
        UsedSource *s = impl;

        if (s->pos >= s->size)
                return check_unchanged(s);
        while (s->at < s->n_skip && s->skip[s->at].offset + s->skip[s->at].length <= s->pos)
                s->at++;
        const BvByteRange *k = s->at < s->n_skip ? &s->skip[s->at] : NULL;
        if (k && k->offset <= s->pos) {
                *ret = (BvExtent){ .kind = BV_EXTENT_HOLE, .offset = s->pos,
                                   .length = MIN(k->offset + k->length, s->size) - s->pos };
        } else {
                int r = deliver(s, k ? MIN(k->offset, s->size) : s->size, ret);
                if (r < 0)
                        return r;
        }
        s->pos += ret->length;
        return 1;
}

static int used_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        return bv_source_read_at(((UsedSource *)impl)->inner, buf, len, offset);
}

static uint64_t used_size(void *impl)
{
        return ((UsedSource *)impl)->size;
}

static int used_identity(void *impl, BvSourceIdentity *ret)
{
        return bv_source_identity(((UsedSource *)impl)->inner, ret);
}

static uint64_t used_work(void *impl)
{
        UsedSource *s = impl;
        return s->size - MIN(s->bytes_free, s->size);
}

static void used_free_op(void *impl)
{
        used_source_free(impl);
}

static const BvSourceOps used_ops = {
        .next = used_next, .read_at = used_read_at, .size = used_size, .identity = used_identity,
        .work = used_work, .free = used_free_op,
};

int bv_fs_source_stable(const char *path, int fd, char *why, size_t why_size)
{
        struct stat st;
        char mp[512], dev[64];

        if (stat(path, &st) < 0)
                return negative_errno();
        if (S_ISBLK(st.st_mode)) {
                int r = bv_blockdev_mounted_rw(st.st_rdev, mp, sizeof(mp), dev, sizeof(dev));
                if (r > 0)
                        snprintf(why, why_size, "/dev/%s is mounted read-write on '%s'", dev, mp);
                return r < 0 ? r : !r;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(why, why_size, "it is neither a regular file nor a block device");
                return 0;
        }
        /* a read lease is refused while any process has the file open for writing */
        if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0) {
                if (errno == EAGAIN || errno == EBUSY)
                        snprintf(why, why_size, "another process has it open for writing");
                else if (errno == EACCES || errno == EPERM)
                        snprintf(why, why_size, "cannot tell whether another process writes it (a read lease "
                                                "needs its owner or CAP_LEASE)");
                else
                        snprintf(why, why_size, "cannot tell whether another process writes it (no read "
                                                "lease: %s)", strerror(errno));
                return 0;
        }
        (void)fcntl(fd, F_SETLEASE, F_UNLCK);
        return 1;
}

/* Why a source of this kind has no map, or NULL when it may have one. */
static const char *kind_problem(BvSourceKind k)
{
        switch (k) {
        case BV_SOURCE_FILE:
        case BV_SOURCE_BLOCKDEV:
                return NULL;
        case BV_SOURCE_STREAM:
                return "a stream cannot skip what it does not read";
        case BV_SOURCE_NBD:
                return "an NBD export has no used-block map here";
        case BV_SOURCE_IMAGE:
                return "a disk image's virtual disk has no used-block map here";
        case BV_SOURCE_LIBVIRT:
                return "a libvirt domain's disk has no used-block map here";
        }
        return "an unknown kind of source";
}

/* Opens inner's path for the map and checks it is stable: *ret_fd, or 0 with why, or -errno. */
static int open_stable(BvSource *inner, bool snapshot, UsedSource *s, char *why, size_t why_size)
{
        const char *path = bv_source_path(inner);
        struct stat st;

        s->fd = bv_source_open_fd(path, 0, &st);
        if (s->fd < 0) {
                snprintf(why, why_size, "cannot open it again to map it: %s", strerror(-s->fd));
                return 0;
        }
        if (S_ISREG(st.st_mode)) {
                BvSourceIdentity id;
                bv_source_identity_from_stat(&st, &s->identity);
                if (bv_source_identity(inner, &id) < 0 || id.dev != s->identity.dev || id.ino != s->identity.ino) {
                        snprintf(why, why_size, "its path now names another file");
                        return 0;
                }
                s->check_identity = true;
        }
        if (snapshot)
                return 1;
        int r = bv_fs_source_stable(path, s->fd, why, why_size);
        if (r < 0)
                snprintf(why, why_size, "cannot tell whether it may change: %s", strerror(-r));
        return MAX(r, 0);
}

const BvFsUsedMap *bv_fs_used_applied(const BvFsUsedMap *m, const char *why)
{
        return m && !why[0] && m->bytes_free > 0 ? m : NULL; /* the skip runs moved into the source */
}

int bv_fs_used_open(BvSource *inner, bool snapshot, BvFsUsedMap *ret_map, BvSource **ret, char *why,
                    size_t why_size)
{
        BvFsUsedMap map = {};
        const char *problem = kind_problem(bv_source_kind(inner));
        int r;

        why[0] = '\0';
        *ret_map = (BvFsUsedMap){ .size = bv_source_size(inner) };
        *ret = inner;
        if (!problem && bv_source_changed_map(inner))
                problem = "it reads only what changed already (a changed-block map)";
        if (problem) {
                snprintf(why, why_size, "%s", problem);
                return 0;
        }
        _cleanup_free_ UsedSource *s = calloc(1, sizeof(UsedSource));
        if (!s)
                return -ENOMEM;
        s->fd = -EBADF;
        r = open_stable(inner, snapshot, s, why, why_size);
        if (r > 0) {
                int q = bv_fs_used_map(s->fd, &map);
                if (q == -ENOMEM)
                        r = q;
                else if (q < 0)
                        snprintf(why, why_size, "cannot map its partitions: %s", strerror(-q)), r = 0;
        }
        if (r <= 0 || map.n_skip == 0 || map.size != bv_source_size(inner)) {
                if (r > 0 && map.size != bv_source_size(inner))
                        snprintf(why, why_size, "its size changed while it was mapped");
                safe_close(s->fd);
                if (r >= 0) {
                        map.size = bv_source_size(inner);
                        *ret_map = map, map = (BvFsUsedMap){};
                }
                bv_fs_used_map_done(&map);
                return MIN(r, 0);
        }
        s->read_size = BV_SOURCE_READ_SIZE;
        s->buf = malloc(s->read_size);
        if (!s->buf)
                r = -ENOMEM;
        if (r >= 0)
                r = bv_source_new(&used_ops, s, bv_source_kind(inner), bv_source_path(inner), ret);
        if (r < 0) {
                free(s->buf);
                safe_close(s->fd);
                bv_fs_used_map_done(&map);
                return r;
        }
        s->inner = inner;
        s->size = map.size, s->bytes_free = map.bytes_free;
        s->skip = TAKE_PTR(map.skip), s->n_skip = map.n_skip;
        map.n_skip = map.cap_skip = 0;
        *ret_map = map;
        TAKE_PTR(s);
        return 0;
}
