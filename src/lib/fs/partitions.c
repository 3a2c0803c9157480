/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The partition listing: libblkid's probe of the descriptor (source/probe.c), turned into a list
 * by start, the whole-disk filesystem as partition 0, MBR extended partitions marked as the
 * containers they are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "macro.h"
#include "partitions.h"
#include "source.h"

static void partition_done(BvFsPartition *p)
{
        free(p->type);
        free(p->fstype);
        free(p->label);
        free(p->uuid);
}

void bv_fs_partitions_done(BvFsPartitions *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++)
                partition_done(&p->v[i]);
        free(p->v);
        free(p->pttype);
        *p = (BvFsPartitions){};
}

static int by_start(const void *a, const void *b)
{
        const BvFsPartition *x = a, *y = b;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->size > y->size ? -1 : x->size < y->size; /* a container before what it holds */
}

/* MBR types of extended partitions (DOS, Windows LBA, Linux). */
static bool mbr_extended(const char *type)
{
        return type && (strcmp(type, "0x5") == 0 || strcmp(type, "0xf") == 0 || strcmp(type, "0x85") == 0);
}

/* Moves what the probe found into ret: its strings are taken, the probe keeps NULLs. */
static int take_probe(BvProbe *pr, uint64_t size, BvFsPartitions *ret)
{
        size_t n = pr->n_partitions ? pr->n_partitions : pr->fstype ? 1 : 0;

        ret->size = size;
        ret->pttype = TAKE_PTR(pr->pttype);
        if (n == 0)
                return 0;
        ret->v = calloc(n, sizeof(BvFsPartition));
        if (!ret->v)
                return -ENOMEM;
        if (pr->n_partitions == 0) {
                ret->v[0] = (BvFsPartition){ .start = 0, .size = size, .fstype = TAKE_PTR(pr->fstype),
                                             .label = TAKE_PTR(pr->label), .uuid = TAKE_PTR(pr->uuid) };
                ret->n = 1;
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                BvProbePartition *q = &pr->partitions[i];
                ret->v[i] = (BvFsPartition){ .number = q->number, .start = q->start, .size = q->size,
                                             .type = TAKE_PTR(q->type), .fstype = TAKE_PTR(q->fstype),
                                             .label = TAKE_PTR(q->label), .uuid = TAKE_PTR(q->fsuuid) };
                ret->v[i].container = mbr_extended(ret->v[i].type);
        }
        ret->n = n;
        qsort(ret->v, n, sizeof(BvFsPartition), by_start);
        return 0;
}

int bv_fs_partitions(int fd, BvFsPartitions *ret)
{
        BvProbe pr = {};
        BvFsPartitions p = {};
        uint64_t size;

        int r = bv_fd_size(fd, &size);
        if (r >= 0)
                r = bv_source_probe_fd(fd, &pr);
        if (r >= 0)
                r = take_probe(&pr, size, &p);
        bv_probe_done(&pr);
        if (r < 0) {
                bv_fs_partitions_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

const BvFsPartition *bv_fs_partition_find(const BvFsPartitions *p, const char *name)
{
        char *end;

        if (name[0] == 'p' && name[1] >= '0' && name[1] <= '9') {
                unsigned long n = strtoul(name + 1, &end, 10);
                for (size_t i = 0; *end == '\0' && i < p->n; i++)
                        if (p->v[i].number == n)
                                return &p->v[i];
        }
        for (size_t i = 0; i < p->n; i++)
                if (p->v[i].label && strcmp(p->v[i].label, name) == 0)
                        return &p->v[i];
        return NULL;
}
