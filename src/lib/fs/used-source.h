/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A source that reads only the blocks the filesystems inside it use (backup --used-only): the
 * free runs of its used-block map (used.h) are delivered as holes, never read, the rest is read
 * through the source it wraps. Only for a source that cannot change under the read, since a
 * block the map calls free may be written (and used) while the rest is read:
 *   - a regular file no process has open for writing (a read lease, F_SETLEASE, can be taken;
 *     and its mtime, ctime and size are the same when the read ends, or the read fails -ESTALE);
 *   - a block device on which no filesystem is mounted read-write (nor on its partitions or a
 *     device stacked on it);
 *   - a snapshot (a job's LVM snapshot), which the caller vouches for.
 * Anything else is read whole, with the reason.
 */

#include <stdbool.h>
#include <stddef.h>

#include "source.h"
#include "used.h"

/* Wraps inner (a file or block device source, not yet read). On success *ret is either a new
 * source that owns inner and reads only used blocks, with the map's account in *ret_map, or
 * inner itself, with why saying why it is read whole ("a stream has no used-block map"); *ret_map
 * is filled (possibly without partitions) either way, for bv_fs_used_map_done. snapshot: the
 * caller knows inner cannot change (an LVM snapshot). 0, or -errno (-ENOMEM) with inner still
 * the caller's. */
int bv_fs_used_open(BvSource *inner, bool snapshot, BvFsUsedMap *ret_map, BvSource **ret, char *why,
                    size_t why_size);

/* The map a source that bv_fs_used_open returned reads by (for BvBackupOptions.used_only): m
 * when it wrapped its source (why "", free runs skipped), NULL when the source reads whole. */
const BvFsUsedMap *bv_fs_used_applied(const BvFsUsedMap *m, const char *why);

/* Can path change under a read? 1 when it cannot (as above), 0 when it may (why says how), or
 * -errno when path cannot be looked at. For a regular file, fd is one of it opened read-only. */
int bv_fs_source_stable(const char *path, int fd, char *why, size_t why_size);
