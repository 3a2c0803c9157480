/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What a job reads: its source (a block device or an image file), the standard output of its
 * command (source = command:CMD, or command = CMD), or, with snapshot = yes, an LVM snapshot of
 * its logical volume, made (lvcreate --snapshot) before reading and removed (lvremove) after,
 * whatever happened. A run is cancelled (SIGTERM, a pulled drive) with bv_job_cancel: the next
 * read of every job source fails with -ECANCELED, so the backup unwinds and publishes nothing,
 * and the snapshot is still removed.
 */

#include <stdbool.h>

#include "conf.h"
#include "source.h"
#include "used.h"

typedef struct BvJobSource BvJobSource;

/* Async-signal-safe: cancels the runs of this process. */
void bv_job_cancel(void);
bool bv_job_cancelled(void);

/* Opens j's source for reading in a run to target (vars: for a command's environment, as
 * bv_hook_run). Fails with -errno; for a failed lvs, lvcreate, lvremove or dmsetup, -ECHILD with
 * its exit status in *fail_status and its output in out (as bv_target_run); for a disk image that
 * does not open, the words of the helper (qemu-nbd) or the file it references in out
 * (BvSourceOptions.error_detail). */
int bv_job_source_open(const BvConfJob *j, const char *target, const char *const vars[], BvJobSource **ret,
                       int *fail_status, char *out, size_t size);
BvSource *bv_job_source(BvJobSource *js);
/* The source is a thin volume's snapshot (it reads a thin delta), and why it reads everything
 * all the same ("" when it does not; the backup may still refuse the pairing). */
bool bv_job_source_thin(const BvJobSource *js);
const char *bv_job_source_reason(const BvJobSource *js);
/* used-only = yes: the source's used-block map (fs/used.h) and in *ret_why why it was read whole
 * ("" when it was not); NULL for a job without used-only. Valid until bv_job_source_close. */
const BvFsUsedMap *bv_job_source_used(const BvJobSource *js, const char **ret_why);
/* Ends the command (SIGTERM when it still runs, then waits) and removes the snapshot (published:
 * the backup was published, a thin volume's snapshot is kept instead), then frees js. 0; -ECHILD
 * when the command exited with a status other than 0 or an LVM command failed (its status in
 * *fail_status, its output in out); -errno. */
int bv_job_source_close(BvJobSource *js, bool published, int *fail_status, char *out, size_t size);
