/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What is on a device or image, as libblkid sees it: the partition table and its partitions,
 * the filesystem inside each partition (a second probe limited to the partition's range of
 * the same fd), or the whole-device filesystem. Recorded in snapshots and shown by `list`.
 */
#include <blkid/blkid.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "source.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct blkid_struct_probe, blkid_free_probe);

/* libblkid returns -1 and does not always set errno. */
static int blkid_errno(void)
{
        return errno > 0 ? -errno : -EIO;
}

/* *dst = a copy of value, or NULL when value is NULL or empty. */
static int set_string(char **dst, const char *value)
{
        free(*dst);
        *dst = NULL;
        if (!value || !*value)
                return 0;
        *dst = strdup(value);
        return *dst ? 0 : -ENOMEM;
}

/* Copies probe values: pairs of (blkid name, destination). */
typedef struct ProbeValue {
        const char *name;
        char **dst;
} ProbeValue;

/* The strings libblkid's values fill: of a whole device or image, and of the filesystem in a
 * partition. The same tables say what bv_probe_done frees. */
#define DEVICE_VALUES(p)                                                                  \
        { { "PTTYPE", &(p)->pttype }, { "PTUUID", &(p)->ptuuid }, { "TYPE", &(p)->fstype }, \
          { "LABEL", &(p)->label },   { "UUID", &(p)->uuid } }
#define PARTITION_FS_VALUES(p) { { "TYPE", &(p)->fstype }, { "LABEL", &(p)->label }, { "UUID", &(p)->fsuuid } }

static void values_free(const ProbeValue *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(*v[i].dst);
}

static int get_values(blkid_probe pr, const ProbeValue *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const char *value = NULL;
                if (blkid_probe_lookup_value(pr, v[i].name, &value, NULL) < 0)
                        continue;
                int r = set_string(v[i].dst, value);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The filesystem inside [offset, offset+size) of fd. */
static int probe_partition_fs(int fd, BvProbePartition *p)
{
        const ProbeValue values[] = PARTITION_FS_VALUES(p);
        _cleanup_(blkid_free_probep) struct blkid_struct_probe *pr = blkid_new_probe();

        if (!pr)
                return -ENOMEM;
        errno = 0;
        if (blkid_probe_set_device(pr, fd, (blkid_loff_t)p->start, (blkid_loff_t)p->size) < 0)
                return blkid_errno();
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID);
        if (blkid_do_safeprobe(pr) != 0)
                return 0; /* nothing (1), ambivalent (-2) or unreadable: no filesystem to report */
        return get_values(pr, values, ELEMENTSOF(values));
}

static int get_partition(int fd, blkid_partition par, BvProbePartition *p)
{
        char mbr_type[16];
        int r;

        p->number = (uint32_t)blkid_partition_get_partno(par);
        p->start = (uint64_t)blkid_partition_get_start(par) * 512u;
        p->size = (uint64_t)blkid_partition_get_size(par) * 512u;
        const char *type = blkid_partition_get_type_string(par);
        if (!type) {
                snprintf(mbr_type, sizeof(mbr_type), "0x%x", (unsigned)blkid_partition_get_type(par));
                type = mbr_type;
        }
        if ((r = set_string(&p->type, type)) < 0 || (r = set_string(&p->uuid, blkid_partition_get_uuid(par))) < 0)
                return r;
        return probe_partition_fs(fd, p);
}

static int get_partitions(int fd, blkid_probe pr, BvProbe *probe)
{
        blkid_partlist ls = blkid_probe_get_partitions(pr);
        if (!ls)
                return 0;
        int n = blkid_partlist_numof_partitions(ls);
        if (n <= 0)
                return 0;

        probe->partitions = calloc((size_t)n, sizeof(BvProbePartition));
        if (!probe->partitions)
                return -ENOMEM;
        for (int i = 0; i < n; i++) {
                blkid_partition par = blkid_partlist_get_partition(ls, i);
                if (!par)
                        continue;
                int r = get_partition(fd, par, &probe->partitions[probe->n_partitions++]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void partition_done(BvProbePartition *p)
{
        const ProbeValue values[] = PARTITION_FS_VALUES(p);

        values_free(values, ELEMENTSOF(values));
        free(p->type);
        free(p->uuid);
}

void bv_probe_done(BvProbe *p)
{
        if (!p)
                return;
        const ProbeValue values[] = DEVICE_VALUES(p);
        values_free(values, ELEMENTSOF(values));
        for (size_t i = 0; i < p->n_partitions; i++)
                partition_done(&p->partitions[i]);
        free(p->partitions);
        *p = (BvProbe){};
}

int bv_source_probe_fd(int fd, BvProbe *p)
{
        const ProbeValue values[] = DEVICE_VALUES(p);
        _cleanup_(blkid_free_probep) struct blkid_struct_probe *pr = blkid_new_probe();
        int r;

        if (!pr)
                return -ENOMEM;
        errno = 0;
        if (blkid_probe_set_device(pr, fd, 0, 0) < 0)
                return blkid_errno();
        blkid_probe_enable_partitions(pr, 1);
        blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS);
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID);

        errno = 0;
        r = blkid_do_safeprobe(pr);
        if (r == -1)
                return blkid_errno();
        if (r != 0)
                return 0;
        r = get_values(pr, values, ELEMENTSOF(values));
        if (r < 0 || !p->pttype)
                return r;
        return get_partitions(fd, pr, p);
}

int bv_source_probe(const char *path, BvProbe *ret)
{
        BvProbe p = {};
        struct stat st;
        int r;

        _cleanup_close_ int fd = bv_source_open_fd(path, O_NONBLOCK, &st);
        if (fd < 0)
                return fd;
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
                return -ENODEV;
        r = bv_source_probe_fd(fd, &p);
        if (r < 0) {
                bv_probe_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}
