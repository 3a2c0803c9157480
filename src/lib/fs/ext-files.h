/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * An ext2/3/4 filesystem read in-process with e2fsprogs' libext2fs, through an io_manager whose
 * reads go to a BvFilesDev (a snapshot, through the read path): no device, no mount, no root.
 * Read-only: the io_manager refuses every write with EROFS. Not thread-safe (one command's).
 *
 * Errors: -ENOENT, -ENOTDIR, -ELOOP as for a path; -EBADMSG or -EUCLEAN when the disk's data
 * under what was read is damaged or missing (bv_ext_bad_offset says where); -EPROTONOSUPPORT
 * for features libext2fs cannot read; -EIO for a filesystem structure libext2fs refused
 * (bv_ext_error_text says which).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "files-dev.h"

typedef struct BvExt BvExt;

typedef struct BvExtStat {
        uint32_t ino, mode, uid, gid, nlink;
        uint64_t size;
        int64_t atime, mtime, ctime;         /* seconds */
        uint32_t atime_ns, mtime_ns, ctime_ns;
} BvExtStat;

typedef struct BvExtEntry {
        char *name;
        uint32_t ino;
} BvExtEntry;

#define BV_EXT_ROOT_INO 2u

/* Opens the filesystem at [offset, offset + size) of dev (kept by pointer: it must outlive ret). */
int bv_ext_open(const BvFilesDev *dev, uint64_t offset, uint64_t size, BvExt **ret);
void bv_ext_close(BvExt *e);

/* Whether the journal holds changes that were not written back (a snapshot of a mounted
 * filesystem): libext2fs reads without replaying them, so the newest changes may be missing. */
bool bv_ext_needs_recovery(const BvExt *e);
/* The disk offset of the damaged data behind the last -EBADMSG or -EUCLEAN. */
uint64_t bv_ext_bad_offset(const BvExt *e);
/* libext2fs's text for the last -EIO, else NULL. */
const char *bv_ext_error_text(const BvExt *e);

/* The inode of path ("/etc/hosts"; "" and "/" are the root), resolved from the root, symbolic
 * links followed inside the filesystem (the last one only with follow). */
int bv_ext_lookup(BvExt *e, const char *path, bool follow, uint32_t *ret_ino);
int bv_ext_stat(BvExt *e, uint32_t ino, BvExtStat *ret);
/* A symbolic link's target (malloc'd, NUL-terminated). */
int bv_ext_readlink(BvExt *e, uint32_t ino, char **ret);
/* A directory's entries but . and .., sorted by name (bytewise). */
int bv_ext_readdir(BvExt *e, uint32_t ino, BvExtEntry **ret, size_t *ret_n);
void bv_ext_entries_free(BvExtEntry *v, size_t n);

/* Streams a regular file's content in order: sink gets each piece with its offset, buf NULL for
 * a hole (len zero bytes). Pieces are up to 1 MiB. sink's negative return stops the read. */
typedef int (*BvExtSink)(const void *buf, size_t len, uint64_t offset, void *userdata);
int bv_ext_read(BvExt *e, uint32_t ino, BvExtSink sink, void *userdata);
