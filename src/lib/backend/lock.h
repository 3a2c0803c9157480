/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Repository locks: flock(2) on files in locks/, so a killed process never leaves one stuck.
 *   BV_LOCK_WRITE   exclusive on locks/write: one writer (backup, key change)
 *   BV_LOCK_READ    shared on locks/gc: only readers that cannot write a lease (a read-only
 *                   mount); every other reader holds a lease instead (repo/lease.h)
 *   BV_LOCK_GC      exclusive on locks/gc: garbage collection and index compaction, one at a
 *                   time
 *   BV_LOCK_COMMIT  exclusive on locks/commit: a backup's commit (its check against gc, then
 *                   its snapshot record) against gc's condemn (docs/LIFECYCLE.md)
 *   BV_LOCK_COMPACT locks/gc as BV_LOCK_GC, taken for an index compaction (a backup's, a copy's):
 *                   its holder record says so ("purpose=compaction"), and a gc that finds it
 *                   waits for it (it ends soon) instead of failing as beside another gc
 * Readers never block on the writer. Who takes locks/write or locks/gc records itself beside it
 * (locks/write.holder, locks/gc.holder: pid, host, command line, since when), so that one who
 * finds the lock taken can name the holder.
 */

#include <stdbool.h>
#include <stddef.h>

typedef enum {
        BV_LOCK_WRITE = 1,
        BV_LOCK_READ = 2,
        BV_LOCK_GC = 3,
        BV_LOCK_COMMIT = 4,
        BV_LOCK_COMPACT = 5,
} BvLockKind;

/* Returns an fd holding the lock (close it to release), -EBUSY if !wait and it is taken. */
int bv_lock_take(int repo_dirfd, BvLockKind kind, bool wait);

/* The holder of a write or gc lock as it recorded itself: "pid 123 on HOST since TIME: COMMAND"
 * in buf. -ENOENT when none was recorded (or it does not read), -ESTALE when the record is of a
 * process on this host that no longer runs (the lock is held by one that records nothing).
 * Returns 1 when the holder is an index compaction (BV_LOCK_COMPACT), 0 otherwise. */
int bv_lock_holder(int repo_dirfd, BvLockKind kind, char *buf, size_t size);
