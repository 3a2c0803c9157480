/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One filesystem of a snapshot read in-process for `blkvault files`, whatever reads it: a table
 * of operations (BvFsOps) that each reader fills (ext-files.c: libext2fs; ntfs-files.c:
 * libntfs-3g), and the handle the callers use (BvFs). Which reader serves which filesystem is the
 * caller's table (src/cli/files-table.c). Readers are read-only and not thread-safe.
 *
 * Errors, the same for every reader: -ENOENT, -ENOTDIR, -ELOOP, -EISDIR as for a path; -EBADMSG
 * or -EUCLEAN when the disk's data under what was read is damaged or missing (bv_fs_bad_offset
 * says where); -EPROTONOSUPPORT for a feature the library cannot read; -EMEDIUMTYPE from open when
 * the library refuses the filesystem; -EIO for a structure the library refused (bv_fs_error_text
 * says which).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "files-dev.h"

/* ino: the filesystem's inode number (diff's hint that a file is the same one). The handle the
 * operations take (lookup's ret_ino, BvFsEntry.ino) is the reader's: the inode number for
 * libext2fs and libntfs-3g, an index into its table of paths for the CLI's libguestfs reader. */
typedef struct BvFsStat {
        uint64_t ino;
        uint32_t mode, uid, gid, nlink;
        uint64_t size;
        int64_t atime, mtime, ctime;         /* seconds */
        uint32_t atime_ns, mtime_ns, ctime_ns;
} BvFsStat;

typedef struct BvFsEntry {
        char *name;
        uint64_t ino;
} BvFsEntry;

/* Gets a regular file's content in order: each piece with its offset, buf NULL for a hole (len
 * zero bytes). Pieces are up to 1 MiB. A negative return stops the read and is returned. */
typedef int (*BvFsSink)(const void *buf, size_t len, uint64_t offset, void *userdata);

typedef struct BvFsOps {
        const char *library; /* "libext2fs": named when it refuses a filesystem */
        /* The filesystem keeps no Unix modes: stat's permission bits are made up (NTFS: 0777, as
         * ntfs-3g shows them), so what copies files out applies its umask to them. */
        bool modes_made_up;
        /* Opens the filesystem at [offset, offset + size) of dev (kept by pointer: it outlives *ret). */
        int (*open)(const BvFilesDev *dev, uint64_t offset, uint64_t size, void **ret);
        void (*close)(void *fs);
        /* Whether changes the reader does not replay (a journal, a log) were pending. */
        bool (*needs_recovery)(const void *fs);
        /* The disk offset of the damaged data behind the last -EBADMSG or -EUCLEAN. */
        uint64_t (*bad_offset)(const void *fs);
        /* The library's text for the last -EIO, else NULL. */
        const char *(*error_text)(const void *fs);
        /* The inode of path ("/etc/hosts"; "" and "/" are the root), symbolic links inside the
         * filesystem followed (the last one only with follow). */
        int (*lookup)(void *fs, const char *path, bool follow, uint64_t *ret_ino);
        int (*stat)(void *fs, uint64_t ino, BvFsStat *ret);
        /* A symbolic link's target (malloc'd, NUL-terminated); -EINVAL for anything else. */
        int (*readlink)(void *fs, uint64_t ino, char **ret);
        /* A directory's entries but . and .., sorted by name (bytewise). */
        int (*readdir)(void *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n);
        /* A regular file's content; -EISDIR for anything else. */
        int (*read)(void *fs, uint64_t ino, BvFsSink sink, void *userdata);
        /* Optional: the library's text for why the last open on this thread failed, else NULL. */
        const char *(*open_error_text)(void);
        /* Optional: the filesystem's label, for one whose label the partition probe cannot read. */
        const char *(*label)(const void *fs);
        /* Optional: a file's named data streams (NTFS), sorted by name, each with an inode number
         * that stat and read take. */
        int (*streams)(void *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n);
} BvFsOps;

typedef struct BvFs BvFs;

int bv_fs_open(const BvFsOps *ops, const BvFilesDev *dev, uint64_t offset, uint64_t size, BvFs **ret);
/* A handle over impl, a filesystem its reader opened itself (one that does not read through a
 * BvFilesDev: the CLI's libguestfs reader); ops->close frees it with the handle. */
int bv_fs_wrap(const BvFsOps *ops, void *impl, BvFs **ret);
void bv_fs_close(BvFs *fs);
const BvFsOps *bv_fs_ops(const BvFs *fs);
/* What the reader's open gave: the argument of its operations. */
void *bv_fs_impl(const BvFs *fs);

bool bv_fs_needs_recovery(const BvFs *fs);
uint64_t bv_fs_bad_offset(const BvFs *fs);
const char *bv_fs_error_text(const BvFs *fs);
int bv_fs_lookup(BvFs *fs, const char *path, bool follow, uint64_t *ret_ino);
int bv_fs_stat(BvFs *fs, uint64_t ino, BvFsStat *ret);
int bv_fs_readlink(BvFs *fs, uint64_t ino, char **ret);
int bv_fs_readdir(BvFs *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n);
void bv_fs_entries_free(BvFsEntry *v, size_t n);
int bv_fs_read(BvFs *fs, uint64_t ino, BvFsSink sink, void *userdata);
/* A file's named streams; none (0) when the reader has none. */
int bv_fs_streams(BvFs *fs, uint64_t ino, BvFsEntry **ret, size_t *ret_n);

/* For the readers: sorts entries by name (bytewise). */
void bv_fs_entries_sort(BvFsEntry *v, size_t n);
