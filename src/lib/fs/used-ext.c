/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Used blocks of ext2, ext3 and ext4 through e2fsprogs' libext2fs: the filesystem opened
 * read-only through the descriptor (/proc/self/fd/N) at the partition's offset (the unix I/O
 * manager's "offset=" option), its block bitmaps read, and the free runs between set bits
 * handed back. A filesystem whose journal needs recovery is refused: the journal may allocate
 * blocks its bitmaps still call free (data written before the commit, in data=ordered mode).
 */
#include <errno.h>
#include <stdio.h>

#include "ext2fs-dl.h" /* libext2fs loaded on first use: every call goes through it */
#include "macro.h"
#include "used.h"

static void ext_close(ext2_filsys *fs)
{
        if (*fs)
                ext2fs_close_free(fs);
}

/* libext2fs's errcode_t: an errno below 256 is itself, the rest are com_err codes. */
static int ext_error(errcode_t e, const char *what, char *why, size_t why_size)
{
        snprintf(why, why_size, "libext2fs cannot %s: %s", what, error_message(e));
        return e > 0 && e < 256 ? -(int)e : -EIO;
}

/* The free runs of the bitmap, as disk offsets. */
static int free_runs(ext2_filsys fs, const BvFsPartition *p, BvFsUsedMap *map)
{
        blk64_t b = fs->super->s_first_data_block, last = ext2fs_blocks_count(fs->super) - 1;
        uint64_t bs = fs->blocksize;

        while (b <= last) {
                blk64_t zero, set;
                if (ext2fs_find_first_zero_block_bitmap2(fs->block_map, b, last, &zero) != 0)
                        break;
                if (ext2fs_find_first_set_block_bitmap2(fs->block_map, zero, last, &set) != 0)
                        set = last + 1;
                int r = bv_fs_used_add_free(map, p->start + zero * bs, (set - zero) * bs);
                if (r < 0)
                        return r;
                b = set;
        }
        return 0;
}

int bv_fs_used_ext(int fd, const BvFsPartition *p, BvFsUsedMap *map, uint64_t *ret_covered, char *why,
                   size_t why_size)
{
        _cleanup_(ext_close) ext2_filsys fs = NULL;
        char name[64], options[64];
        errcode_t e;

        int r = ext2fs_dl_open();
        if (r < 0) {
                snprintf(why, why_size, "%s", bv_dl_error());
                return r;
        }
        snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
        snprintf(options, sizeof(options), "offset=%llu", (unsigned long long)p->start);
        e = ext2fs_open2(name, options, EXT2_FLAG_64BITS | EXT2_FLAG_SKIP_MMP, 0, 0, unix_io_manager, &fs);
        if (e)
                return ext_error(e, "open the filesystem", why, why_size);
        if (ext2fs_has_feature_journal_needs_recovery(fs->super)) {
                snprintf(why, why_size, "its journal needs recovery (not cleanly unmounted, or mounted)");
                return -EOPNOTSUPP;
        }
        uint64_t covered = ext2fs_blocks_count(fs->super) * (uint64_t)fs->blocksize;
        if (covered > p->size) {
                snprintf(why, why_size, "the filesystem (%llu bytes) is larger than its partition",
                         (unsigned long long)covered);
                return -EOPNOTSUPP;
        }
        if ((e = ext2fs_read_block_bitmap(fs)))
                return ext_error(e, "read the block bitmaps", why, why_size);
        r = free_runs(fs, p, map);
        if (r < 0)
                return r;
        *ret_covered = covered;
        return 0;
}
