/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Inside the NTFS reader (ntfs-files.c: the device, paths, directories, content; ntfs-node.c: what
 * a file is and its stat, named streams). */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ntfs-dl.h" /* libntfs-3g loaded on first use: every call goes through it */

#include "files-fs.h"

/* The filesystem's range of the disk, as the device operations read it. */
typedef struct NtfsDisk {
        const BvFilesDev *dev;
        uint64_t offset, size, pos;
        uint64_t bad_offset;
        int error; /* the disk's last -errno since nt_begin */
} NtfsDisk;

/* A named data stream looked up as "file:name": its inode number is NT_STREAM_INO | its index. */
#define NT_STREAM_INO (UINT64_C(1) << 63)
typedef struct NtfsStream {
        uint64_t ino; /* the file's */
        ntfschar *name;
        int len;
} NtfsStream;

typedef struct Ntfs {
        ntfs_volume *vol;
        NtfsDisk disk;
        NtfsStream *streams;
        size_t n_streams;
        char message[256]; /* libntfs-3g's last error, for error_text */
} Ntfs;

/* Before a library call: forget the last errors. */
void nt_begin(Ntfs *n);
/* After a failed one: -errno, the disk's own error first (damage), else errno (fallback if 0). */
int nt_fail(Ntfs *n, int fallback);

int nt_open_ino(Ntfs *n, uint64_t ino, ntfs_inode **ret);
/* As nt_open_ino, -ENOTDIR for what is not a directory. */
int nt_open_dir(Ntfs *n, uint64_t ino, ntfs_inode **ret);
/* name in directory dir. */
int nt_child(Ntfs *n, uint64_t dir, const char *name, uint64_t *ret_ino);
int nt_parent(Ntfs *n, uint64_t ino, uint64_t *ret_ino);
bool nt_is_symlink(Ntfs *n, uint64_t ino);
int nt_stat(void *fs, uint64_t ino, BvFsStat *ret);
int nt_readlink(void *fs, uint64_t ino, char **ret);

/* The stream name (len characters, taken on success) of file ino, if it has one: its inode number. */
int nt_stream_add(Ntfs *n, uint64_t ino, ntfschar *name, int len, uint64_t *ret_ino);
/* The named streams of file ino (BvFsOps.streams). */
int nt_streams(void *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n);
/* The stream ino stands for, or NULL. */
const NtfsStream *nt_stream_of(const Ntfs *n, uint64_t ino);
