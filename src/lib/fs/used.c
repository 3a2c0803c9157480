/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The used-block map of a disk: its partitions (partitions.c), each given to the reader of its
 * filesystem, what no reader maps read whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "macro.h"
#include "source.h"
#include "used.h"

typedef struct Reader {
        const char *fstype, *name;
        BvFsUsedReader map;
} Reader;

static const Reader readers[] = {
        { "ext2", "libext2fs", bv_fs_used_ext },
        { "ext3", "libext2fs", bv_fs_used_ext },
        { "ext4", "libext2fs", bv_fs_used_ext },
        { "xfs", "partclone.xfs", bv_fs_used_partclone },
        { "btrfs", "partclone.btrfs", bv_fs_used_partclone },
        { "vfat", "partclone.fat", bv_fs_used_partclone },
        { "ntfs", "partclone.ntfs", bv_fs_used_partclone },
        { "exfat", "partclone.exfat", bv_fs_used_partclone },
};

int bv_fs_used_add_free(BvFsUsedMap *map, uint64_t offset, uint64_t length)
{
        uint64_t from = ALIGN_UP(offset, (uint64_t)4096), to = ALIGN_DOWN(offset + length, (uint64_t)4096);

        if (to <= from || to - from < BV_FS_FREE_MIN)
                return 0;
        map->bytes_free += to - from;
        return bv_range_append(&map->skip, &map->n_skip, &map->cap_skip, from, to - from);
}

void bv_fs_used_map_done(BvFsUsedMap *m)
{
        if (!m)
                return;
        free(m->skip);
        free(m->parts);
        *m = (BvFsUsedMap){};
}

static const Reader *reader_of(const char *fstype)
{
        for (size_t i = 0; fstype && i < ELEMENTSOF(readers); i++)
                if (strcmp(readers[i].fstype, fstype) == 0)
                        return &readers[i];
        return NULL;
}

/* One partition through its reader: its account in *u, its free runs appended to m. */
static int map_partition(int fd, const BvFsPartition *p, BvFsUsedMap *m, BvFsUsedPart *u)
{
        const Reader *rd = reader_of(p->fstype);
        uint64_t covered = 0, free_before = m->bytes_free;
        size_t n_before = m->n_skip;

        *u = (BvFsUsedPart){ .number = p->number, .start = p->start, .size = p->size, .bytes_unknown = p->size };
        snprintf(u->fstype, sizeof(u->fstype), "%s", p->fstype ? p->fstype : "");
        snprintf(u->label, sizeof(u->label), "%s", p->label ? p->label : "");
        if (p->container) {
                u->bytes_unknown = 0; /* what it holds is accounted for by its own partitions */
                snprintf(u->why, sizeof(u->why), "an extended partition: its logical ones are listed each");
                return 0;
        }
        if (!rd) {
                snprintf(u->why, sizeof(u->why), p->fstype ? "no reader knows %s" : "no filesystem found",
                         p->fstype);
                return 0;
        }
        int r = rd->map(fd, p, m, &covered, u->why, sizeof(u->why));
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                m->n_skip = n_before, m->bytes_free = free_before; /* read it whole after all */
                if (!u->why[0])
                        snprintf(u->why, sizeof(u->why), "%s failed: %s", rd->name, strerror(-r));
                return 0;
        }
        u->reader = rd->name;
        u->bytes_free = m->bytes_free - free_before;
        covered = MIN(covered, p->size);
        u->bytes_used = covered - u->bytes_free;
        u->bytes_unknown = p->size - covered;
        return 0;
}

int bv_fs_used_map(int fd, BvFsUsedMap *ret)
{
        BvFsPartitions pt = {};
        BvFsUsedMap m = {};
        uint64_t mapped_end = 0; /* where the last partition a reader mapped ends */

        int r = bv_fs_partitions(fd, &pt);
        if (r < 0)
                return r;
        m.size = pt.size;
        if (pt.n > 0 && !(m.parts = calloc(pt.n, sizeof(BvFsUsedPart))))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < pt.n; i++) {
                /* a partition past the disk's end, or overlapping one mapped before (a table
                 * that lies), is read whole: its free runs could be another's data */
                const BvFsPartition *p = &pt.v[i];
                bool bad = p->start + p->size > pt.size || p->start + p->size < p->start || p->start < mapped_end;
                if (bad) {
                        m.parts[m.n_parts] = (BvFsUsedPart){ .number = p->number, .start = p->start,
                                                             .size = p->size, .bytes_unknown = p->size };
                        snprintf(m.parts[m.n_parts].why, sizeof(m.parts[0].why),
                                 "it overlaps another partition or the disk's end");
                        m.n_parts++;
                        continue;
                }
                BvFsUsedPart *u = &m.parts[m.n_parts++];
                r = map_partition(fd, p, &m, u);
                if (r >= 0 && u->reader)
                        mapped_end = p->start + p->size;
        }
        bv_fs_partitions_done(&pt);
        if (r < 0) {
                bv_fs_used_map_done(&m);
                return r;
        }
        *ret = m;
        return 0;
}
