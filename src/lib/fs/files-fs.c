/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A filesystem handle over one reader's operations (files-fs.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "files-fs.h"

struct BvFs {
        const BvFsOps *ops;
        void *impl;
};

int bv_fs_open(const BvFsOps *ops, const BvFilesDev *dev, uint64_t offset, uint64_t size, BvFs **ret)
{
        BvFs *fs = calloc(1, sizeof(*fs));
        int r;

        if (!fs)
                return -ENOMEM;
        fs->ops = ops;
        r = ops->open(dev, offset, size, &fs->impl);
        if (r < 0) {
                free(fs);
                return r;
        }
        *ret = fs;
        return 0;
}

int bv_fs_wrap(const BvFsOps *ops, void *impl, BvFs **ret)
{
        BvFs *fs = calloc(1, sizeof(*fs));

        if (!fs)
                return -ENOMEM;
        *fs = (BvFs){ .ops = ops, .impl = impl };
        *ret = fs;
        return 0;
}

void bv_fs_close(BvFs *fs)
{
        if (!fs)
                return;
        fs->ops->close(fs->impl);
        free(fs);
}

const BvFsOps *bv_fs_ops(const BvFs *fs)
{
        return fs->ops;
}

void *bv_fs_impl(const BvFs *fs)
{
        return fs->impl;
}

bool bv_fs_needs_recovery(const BvFs *fs)
{
        return fs->ops->needs_recovery && fs->ops->needs_recovery(fs->impl);
}

uint64_t bv_fs_bad_offset(const BvFs *fs)
{
        return fs->ops->bad_offset(fs->impl);
}

const char *bv_fs_error_text(const BvFs *fs)
{
        return fs->ops->error_text ? fs->ops->error_text(fs->impl) : NULL;
}

int bv_fs_lookup(BvFs *fs, const char *path, bool follow, uint64_t *ret_ino)
{
        return fs->ops->lookup(fs->impl, path, follow, ret_ino);
}

int bv_fs_stat(BvFs *fs, uint64_t ino, BvFsStat *ret)
{
        return fs->ops->stat(fs->impl, ino, ret);
}

int bv_fs_readlink(BvFs *fs, uint64_t ino, char **ret)
{
        return fs->ops->readlink(fs->impl, ino, ret);
}

int bv_fs_readdir(BvFs *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n)
{
        return fs->ops->readdir(fs->impl, ino, ret, ret_n);
}

void bv_fs_entries_free(BvFsEntry *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i].name);
        free(v);
}

int bv_fs_read(BvFs *fs, uint64_t ino, BvFsSink sink, void *userdata)
{
        return fs->ops->read(fs->impl, ino, sink, userdata);
}

int bv_fs_streams(BvFs *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n)
{
        if (!fs->ops->streams) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return fs->ops->streams(fs->impl, ino, ret, ret_n);
}

static int entry_cmp(const void *a, const void *b)
{
        return strcmp(((const BvFsEntry *)a)->name, ((const BvFsEntry *)b)->name);
}

void bv_fs_entries_sort(BvFsEntry *v, size_t n)
{
        if (n)
                qsort(v, n, sizeof(*v), entry_cmp);
}
