/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The filesystems of a disk seen through a BvFilesDev, for `blkvault files`: the partitions of
 * its GPT or MBR table (primary and logical ones), or the whole disk when it has no table, each
 * with the filesystem its magic names and its label.
 *
 * The table is parsed here rather than with libblkid: libblkid probes an fd, which a snapshot
 * does not have; a memfd of the first MiBs would do for a GPT but not for the logical partitions
 * of an extended MBR partition, which sit anywhere on the disk (and the backup GPT at its end).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "files-dev.h"

typedef struct BvFilesPart {
        unsigned number;   /* 1, 2, ... as the table numbers them (logical ones from 5); 0: the whole disk */
        uint64_t offset, size;
        const char *fstype; /* "ext4", "ext3", "ext2", "xfs", "btrfs", "ntfs", "vfat", "LVM2_member", or NULL: unknown */
        char label[64];     /* the filesystem's label, else "" */
        char partname[80];  /* a GPT partition's name (UTF-8), else "" */
} BvFilesPart;

/* The partitions of dev (table "gpt", "dos", or "none" with one whole-disk entry); -EBADMSG for a
 * table that contradicts itself (entries past the disk, a GPT header that is not one); a read
 * error as dev's. */
int bv_files_parts(const BvFilesDev *dev, BvFilesPart **ret, size_t *ret_n, const char **ret_table);

/* The filesystem at offset of dev by its magic (BvFilesPart.fstype), with its label into label
 * (size bytes); 0 and NULL when none is known. */
int bv_files_probe_fs(const BvFilesDev *dev, uint64_t offset, uint64_t size, const char **ret_fstype,
                      char *label, size_t label_size);

/* Whether fstype is one of ext2, ext3, ext4. */
bool bv_files_is_ext(const char *fstype);
