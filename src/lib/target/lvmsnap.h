/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * LVM snapshots of a job's source (snapshot = yes), for jobsource.c.
 *
 * A classic (thick) volume gets a snapshot VG/blkvault-snap-JOB for the run, removed after it.
 *
 * A thin volume keeps the snapshot of its last good backup to each drive, VG/blkvault-thin-JOB+TARGET
 * (the base; '+' is in no job or target name, so the names cannot clash). A run makes a new thin
 * snapshot VG/blkvault-thin-JOB+TARGET+new and asks thin_delta, on a reserved metadata snapshot
 * of the pool (dmsetup message POOL-tpool 0 reserve_metadata_snap, always released), which
 * blocks differ between the base and the new one; the source then reads only those, and the
 * backup pairs it with its parent snapshot only if that recorded the base's thin device id and
 * LV uuid (lvm-thin:ID:UUID; a pool reuses the ids of removed devices). When the backup was
 * published the new snapshot replaces the base, otherwise it is removed and the base stays. Without a delta (no base, thin_delta failed) everything is read,
 * and bv_lvm_snap_reason says why.
 */

#include <stdbool.h>
#include <stddef.h>

#include "source.h"

typedef struct BvLvmSnap BvLvmSnap;

/* A snapshot of the logical volume at path for job's run to target, and a source reading it
 * (opts may be NULL). -ECHILD with the exit status in *fail_status and the program's output in
 * out when lvs, lvcreate, lvremove or dmsetup failed; -errno. */
int bv_lvm_snap_open(const char *path, const char *job, const char *target, const BvSourceOptions *opts,
                     BvLvmSnap **ret, BvSource **ret_source, int *fail_status, char *out, size_t size);
/* Why a thin volume's source reads everything ("" when it reads the delta, or is not thin). */
const char *bv_lvm_snap_reason(const BvLvmSnap *s);
bool bv_lvm_snap_thin(const BvLvmSnap *s);
/* keep: the backup was published (a thin volume's new snapshot becomes the base), else the new
 * snapshot is removed. Frees s. 0, or as bv_lvm_snap_open. */
int bv_lvm_snap_close(BvLvmSnap *s, bool keep, int *fail_status, char *out, size_t size);
