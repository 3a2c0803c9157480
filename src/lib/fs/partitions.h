/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The partitions of a disk or image and the filesystem in each, as libblkid finds them on an
 * open descriptor (GPT, MBR with its logical partitions). A disk without a partition table but
 * with a filesystem on it is listed as one partition, number 0, covering the whole disk.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct BvFsPartition {
        uint32_t number;               /* as the table numbers it (1, 2, ...); 0: the whole disk */
        uint64_t start, size;          /* bytes from the disk's start */
        char *type;                    /* GPT type GUID, or the MBR type as "0x83"; NULL for number 0 */
        char *fstype, *label, *uuid;   /* the filesystem inside (libblkid's names: "ext4", "xfs"), or NULL */
        bool container;                /* an MBR extended partition: it holds other partitions */
} BvFsPartition;

typedef struct BvFsPartitions {
        char *pttype;          /* "gpt", "dos"; NULL without a partition table */
        uint64_t size;         /* the disk's, bytes */
        BvFsPartition *v;      /* by start */
        size_t n;
} BvFsPartitions;

/* The partitions of the file or block device fd (read-only is enough): *ret is filled (free it
 * with bv_fs_partitions_done). Content libblkid does not recognise is no error: no partitions.
 * 0 or -errno (of reading fd, -ENOMEM). */
int bv_fs_partitions(int fd, BvFsPartitions *ret);
void bv_fs_partitions_done(BvFsPartitions *p);

/* The partition of p named by name: "p2" (its number), or a filesystem label; NULL when none. */
const BvFsPartition *bv_fs_partition_find(const BvFsPartitions *p, const char *name);
