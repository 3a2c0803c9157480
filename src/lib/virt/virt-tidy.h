/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What a backup of a running domain leaves in libvirt, and how blkvault tidies it: a backup job
 * a dead run left active, checkpoints no snapshot needs any more, and whether a parent's
 * checkpoint still gives a true map. Only what is blkvault's is touched: a job whose NBD socket
 * is named by bv_virt_job_socket, checkpoints whose names start with the caller's prefix.
 */

#include <stdbool.h>
#include <stddef.h>

#include "virt.h"

/* A backup job is blkvault's when its NBD socket's file name is "blkvault-*.sock". */
#define BV_VIRT_JOB_PREFIX "blkvault-"
/* A run backing up a domain holds an flock on LOCK_DIR/blkvault-libvirt-UUID.lock: the kernel
 * drops it when the run dies however it dies, so a blkvault job of a domain whose lock is free is
 * a dead run's. */
#define BV_VIRT_LOCK_DIR "/run/lock"

/* What a run leaves of a domain in the run directory while it runs, each named
 * BV_VIRT_JOB_PREFIX UUID SUFFIX: the job's scratch directory, its NBD socket, the mark of a
 * guest it froze (BvVirtFreezeOptions.mark). */
#define BV_VIRT_RUN_SUFFIXES ".d", ".sock", ".frozen"

/* Whether socket (a path) names a blkvault job's socket. */
bool bv_virt_job_is_ours(const char *socket);

/*
 * Takes d's backup lock (flock, not waiting) into *ret_fd (close it to let go). -EBUSY when
 * another run holds it (bv_virt_error says so, naming the domain); -errno when the lock file
 * cannot be opened.
 */
int bv_virt_job_lock(BvVirtDomain *d, int *ret_fd);

/* Removes a job's scratch directory (the files in it first) and its socket: 0 or the first
 * -errno (one that is missing is no error). */
int bv_virt_job_files_remove(const char *dir, const char *sock);

/*
 * Removes from run_dir what runs left of domains v no longer has (undefined, or transient and
 * stopped), which no run of theirs will ever tidy: the files named BV_VIRT_JOB_PREFIX UUID
 * SUFFIX (BV_VIRT_RUN_SUFFIXES) whose UUID libvirt does not know, unless a run holds that
 * domain's lock. No other name is touched, and nothing unless v is the local system instance of
 * the QEMU driver (qemu:///system), whose domains those are: another knows none of them.
 * *ret_removed (when not NULL) counts what went.
 * 0 (a missing run_dir too), or the first -errno (the others are still tried).
 */
int bv_virt_stale_sweep(BvVirt *v, const char *run_dir, size_t *ret_removed);

/*
 * A backup job left on d by a run that died (killed, crashed, or its libvirtd restarted under it):
 * the caller holds d's lock (bv_virt_job_lock), so a blkvault job on d is no live run's. It is
 * aborted and its scratch files and socket removed. Returns 1 (what, size bytes, names the
 * socket), 0 when d has no backup job, -EBUSY when the job is another tool's (bv_virt_error names
 * its socket): that job is not touched. Other errors as bv_virt_take_error.
 */
int bv_virt_job_tidy(BvVirtDomain *d, char *what, size_t size);

/* Whether checkpoint name exists on d: 1 yes, 0 no, else as bv_virt_take_error. */
int bv_virt_checkpoint_exists(BvVirtDomain *d, const char *name);

/* Whether a libvirt error code at a backup's begin says its incremental checkpoint is lost:
 * gone (deleted, the domain undefined) or its bitmap missing or broken (an image replaced, QEMU
 * crashed). A full read is then the answer, not a failure. */
bool bv_virt_checkpoint_lost(int code);

/*
 * Deletes d's checkpoints named prefix<UTC time>-<8 random hex> (as blkvault names them), except
 * those named in keep (n names). Checkpoints of any other name are never touched, nor those that
 * only start with prefix. libvirt merges a deleted checkpoint's bitmap
 * into its parent, so the kept ones stay true. *ret_deleted (when not NULL) counts them.
 */
int bv_virt_checkpoints_prune(BvVirtDomain *d, const char *prefix, const char *const *keep, size_t n,
                              size_t *ret_deleted);

/* Deletes those of d's checkpoints named in names (n; NULL entries and names d does not have are
 * skipped), adding to *ret_deleted (when not NULL) how many. */
int bv_virt_checkpoints_delete(BvVirtDomain *d, const char *const *names, size_t n, size_t *ret_deleted);
