/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A disk of a libvirt domain, read from the NBD export of the pull-mode backup job that the
 * caller began (write/backup-libvirt.c). The NBD source reads it; this wrapper gives it its own
 * kind and path, and says what its dirty bitmap means: libvirt names the bitmap after the disk
 * ("backup-vda") whatever the checkpoint, so the pairing goes by checkpoints instead. The
 * snapshot records "libvirt-checkpoint:NEW" (the checkpoint this job created), and the next
 * job's bitmap, which counts from NEW, pairs only with a parent that recorded it.
 *
 * A shut-off domain's disk is read from its image instead (libvirt has no job for it, and 9.0
 * cannot create a checkpoint of an inactive domain): a qcow2 through qemu-nbd, following the
 * persistent bitmap that libvirt named after the parent's checkpoint, which still counts every
 * write since that checkpoint; the snapshot records that same checkpoint (checkpoint =
 * incremental), so the next backup, running or not, counts from it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "source.h"

#define MAP_PREFIX "libvirt-checkpoint:"

typedef struct LibvirtSource {
        BvSource *nbd;
        char *changed_map, *parent_map;
        BvSourceLibvirt info; /* the strings are the copies below */
        char *domain, *uuid, *disk, *checkpoint, *incremental;
} LibvirtSource;

static void libvirt_source_free(LibvirtSource *s)
{
        if (!s)
                return;
        bv_source_free(s->nbd);
        free(s->changed_map);
        free(s->parent_map);
        free(s->domain);
        free(s->uuid);
        free(s->disk);
        free(s->checkpoint);
        free(s->incremental);
        free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(LibvirtSource, libvirt_source_free);

static int lv_next(void *impl, BvExtent *ret)
{
        return bv_source_next(((LibvirtSource *)impl)->nbd, ret);
}

static int lv_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        return bv_source_read_at(((LibvirtSource *)impl)->nbd, buf, len, offset);
}

static uint64_t lv_size(void *impl)
{
        return bv_source_size(((LibvirtSource *)impl)->nbd);
}

static void lv_read_stats(void *impl, BvSourceReadStats *ret)
{
        bv_source_read_stats(((LibvirtSource *)impl)->nbd, ret);
}

static const char *lv_changed_map(void *impl)
{
        return ((LibvirtSource *)impl)->changed_map;
}

static const char *lv_parent_map(void *impl)
{
        return ((LibvirtSource *)impl)->parent_map;
}

static int lv_changed_ranges(void *impl, const BvByteRange **ret, size_t *ret_count)
{
        return bv_source_changed_ranges(((LibvirtSource *)impl)->nbd, ret, ret_count);
}

static BvWholeRead *lv_whole_read(void *impl)
{
        return bv_source_whole_read(((LibvirtSource *)impl)->nbd);
}

static const BvSourceLibvirt *lv_libvirt(void *impl)
{
        return &((LibvirtSource *)impl)->info;
}

static void lv_free(void *impl)
{
        libvirt_source_free(impl);
}

static const BvSourceOps libvirt_ops = {
        .next = lv_next, .read_at = lv_read_at, .size = lv_size, .read_stats = lv_read_stats,
        .changed_map = lv_changed_map, .parent_map = lv_parent_map, .whole_read = lv_whole_read,
        .changed_ranges = lv_changed_ranges,
        .libvirt = lv_libvirt, .free = lv_free,
};

bool bv_source_is_libvirt(const char *location)
{
        return strncmp(location, BV_SOURCE_LIBVIRT_PREFIX, strlen(BV_SOURCE_LIBVIRT_PREFIX)) == 0 &&
               location[strlen(BV_SOURCE_LIBVIRT_PREFIX)] != 0;
}

static int info_copy(LibvirtSource *s, const BvSourceLibvirt *in)
{
        if (bv_strdup_opt(in->domain, &s->domain) < 0 || bv_strdup_opt(in->uuid, &s->uuid) < 0 || bv_strdup_opt(in->disk, &s->disk) < 0 ||
            bv_strdup_opt(in->checkpoint, &s->checkpoint) < 0 || bv_strdup_opt(in->incremental, &s->incremental) < 0)
                return -ENOMEM;
        if (in->checkpoint && asprintf(&s->changed_map, MAP_PREFIX "%s", in->checkpoint) < 0)
                return s->changed_map = NULL, -ENOMEM;
        if (in->incremental && asprintf(&s->parent_map, MAP_PREFIX "%s", in->incremental) < 0)
                return s->parent_map = NULL, -ENOMEM;
        s->info = (BvSourceLibvirt){ .domain = s->domain, .uuid = s->uuid, .disk = s->disk,
                                     .disk_size = in->disk_size, .checkpoint = s->checkpoint,
                                     .incremental = s->incremental };
        return 0;
}

/* A shut-off domain's disk from its image: a qcow2 (or another format the XML states) as its
 * virtual disk, with the bitmap of in->incremental when there is one; raw as a file or device. */
static int open_image_disk(const BvSourceLibvirt *in, BvSourceOptions *o, BvSource **ret)
{
        if (in->image_format && strcmp(in->image_format, "raw") != 0) {
                o->image_format = in->image_format; /* the XML's, trusted with its backing chain */
                o->dirty_bitmap = in->incremental;
                return bv_source_open_image(in->image, o, ret);
        }
        if (in->incremental)
                return -EINVAL; /* a raw image has no bitmap */
        return bv_source_open_path(in->image, o, ret);
}

int bv_source_open_libvirt(const char *location, const BvSourceOptions *opts, BvSource **ret)
{
        const BvSourceLibvirt *in = opts ? opts->libvirt : NULL;
        _cleanup_free_ char *path = NULL, *uri = NULL, *bitmap = NULL;
        int r;

        if (!location || !ret || !in || !in->domain || !in->disk || !in->socket == !in->image ||
            !bv_source_is_libvirt(location))
                return -EINVAL;
        if (asprintf(&path, BV_SOURCE_LIBVIRT_PREFIX "%s/%s", in->domain, in->disk) < 0)
                return path = NULL, -ENOMEM;
        /* "libvirt:DOMAIN" or this disk's own "libvirt:DOMAIN/TARGET" */
        const char *domain = location + strlen(BV_SOURCE_LIBVIRT_PREFIX);
        if (strcmp(domain, in->domain) != 0 && strcmp(location, path) != 0)
                return -EINVAL;
        if (in->socket && asprintf(&uri, "nbd+unix:///%s?socket=%s", in->disk, in->socket) < 0)
                return uri = NULL, -ENOMEM;
        if (in->socket && in->incremental && asprintf(&bitmap, "backup-%s", in->disk) < 0)
                return bitmap = NULL, -ENOMEM;

        _cleanup_(libvirt_source_freep) LibvirtSource *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        if ((r = info_copy(s, in)) < 0)
                return r;
        BvSourceOptions o = *opts;
        o.libvirt = NULL;
        o.dirty_bitmap = bitmap;
        r = in->image ? open_image_disk(in, &o, &s->nbd) : bv_source_open_nbd(uri, &o, &s->nbd);
        if (r < 0)
                return r;
        r = bv_source_new(&libvirt_ops, s, BV_SOURCE_LIBVIRT, path, ret);
        if (r >= 0)
                TAKE_PTR(s);
        return r;
}
