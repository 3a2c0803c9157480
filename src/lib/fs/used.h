/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Used blocks: for each partition of a disk or image whose filesystem a reader here knows, the
 * ranges its allocation bitmaps call free, which a backup with --used-only never reads (they
 * become holes in the snapshot, zeroes on restore). Which reader maps which filesystem:
 *   ext2, ext3, ext4      libext2fs (e2fsprogs): the block bitmaps, read in-process (used-ext.c)
 *   xfs, btrfs, vfat,     partclone.<fs> -D (Debian's partclone): a ddrescue domain map of the
 *   ntfs, exfat           used blocks (used-partclone.c); a partition inside a disk is given to it
 *                         as a read-only loop device over its range, which needs root
 * Everything else (partition tables, gaps between partitions, boot areas, filesystems no reader
 * knows or that a reader refuses, such as an ext4 whose journal needs recovery) is read whole.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extent.h"
#include "partitions.h"

/* Free runs shorter than this are read all the same: a hole costs a map entry and a seek. */
#define BV_FS_FREE_MIN (64u * 1024u)

/* What one partition's map says. */
typedef struct BvFsUsedPart {
        uint32_t number;            /* 0: a filesystem on the whole disk */
        uint64_t start, size;       /* bytes */
        char fstype[32];            /* libblkid's name, "" when none was found */
        char label[64];             /* the filesystem's label, "" when it has none */
        const char *reader;         /* "libext2fs", "partclone.xfs"; NULL when read whole */
        char why[192];              /* when read whole: why ("" when mapped) */
        uint64_t bytes_used;        /* what the filesystem uses (read) */
        uint64_t bytes_free;        /* free runs skipped, never read */
        uint64_t bytes_unknown;     /* read whole: no map (or past the filesystem's end) */
} BvFsUsedPart;

typedef struct BvFsUsedMap {
        uint64_t size;              /* the disk's */
        BvByteRange *skip;          /* free runs of every partition: by offset, disjoint */
        size_t n_skip, cap_skip;
        uint64_t bytes_free;        /* their total */
        BvFsUsedPart *parts;
        size_t n_parts;
} BvFsUsedMap;

/* What one reader gives for a partition: its free runs (disk offsets) are appended to map->skip
 * (in order, each at least BV_FS_FREE_MIN), and *ret_covered is the bytes of the partition the
 * filesystem spans from its start (the rest is read whole). 0; -EOPNOTSUPP with why filled when
 * it will not map this filesystem (then nothing was appended); another -errno with why filled
 * when it could not. */
typedef int (*BvFsUsedReader)(int fd, const BvFsPartition *p, BvFsUsedMap *map, uint64_t *ret_covered,
                              char *why, size_t why_size);

int bv_fs_used_ext(int fd, const BvFsPartition *p, BvFsUsedMap *map, uint64_t *ret_covered, char *why,
                   size_t why_size);

int bv_fs_used_partclone(int fd, const BvFsPartition *p, BvFsUsedMap *map, uint64_t *ret_covered, char *why,
                         size_t why_size);

/* A ddrescue domain map (partclone -D: a "POS STATUS" line, then "POS SIZE +|?" lines in hex, in
 * order and without gaps) of a filesystem at base: its free runs ("?") appended to map, in
 * *ret_covered where the last line ends. -EBADMSG for anything else, or a line past limit. */
int bv_fs_domain_parse(const char *text, size_t len, uint64_t base, uint64_t limit, BvFsUsedMap *map,
                       uint64_t *ret_covered);

/* Appends a free run [offset, offset+length) to map->skip, shrunk to whole 4 KiB blocks and
 * dropped when shorter than BV_FS_FREE_MIN. 0 or -ENOMEM. */
int bv_fs_used_add_free(BvFsUsedMap *map, uint64_t offset, uint64_t length);

/* The map of the disk or image fd (read-only is enough): every partition with a reader mapped,
 * the rest read whole, each partition's account in map->parts. A partition whose reader fails is
 * read whole with the reason, never an error. 0 or -errno (-ENOMEM, reading fd). */
int bv_fs_used_map(int fd, BvFsUsedMap *ret);
void bv_fs_used_map_done(BvFsUsedMap *m);
