/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One run of a registered drive (blkvault target run): take the run lock (two drives plugged
 * at once run one after the other), unlock the LUKS container, mount the filesystem, back up
 * every job of the target into its repository and verify (--read-data) the snapshot it wrote,
 * unmount, lock. A restore-only drive is mounted read-only and nothing is written. Nothing
 * here prints: the caller reports from BvTargetRun.
 */

#include <signal.h>
#include <stdint.h>

#include "conf.h"

#define BV_RUN_DIR "/run/blkvault"

typedef struct BvTargetRunJob {
        const BvConfJob *job;
        int result;             /* 0, or -errno of the step that failed */
        const char *step;       /* what failed: "open", "backup", "verify" */
        char snapshot_id[65];
        uint64_t size, bytes_new;
        uint64_t problems;      /* verify's */
} BvTargetRunJob;

typedef struct BvTargetRun {
        const BvConfTarget *target;
        const char *device;
        int result;             /* 0, or -errno of the step that failed before the jobs */
        const char *step;       /* "lock", "unlock", "probe", "mount", "unmount", "close" */
        BvTargetRunJob *jobs;
        size_t n_jobs, n_failed;
        uint64_t bytes_new;
        bool prune_unavailable; /* a job has keep-* but this build has no prune yet */
        bool cancelled;         /* *cancel was set: jobs after the one under way did not run */
} BvTargetRun;

/* Runs target t (attached as dev): every job that wants it, or only the job named only_job;
 * run_dir holds the lock and the mountpoints (NULL: BV_RUN_DIR). When cancel is set and becomes
 * nonzero (a signal: the drive was pulled and its service is being stopped), the job under way
 * fails with -ECANCELED at its next read or before it publishes, no further job starts, and
 * the drive is unmounted and locked as after any run. Fills *ret (free with
 * bv_target_run_done); returns ret->result. */
int bv_target_run_drive(const BvConfig *c, const BvConfTarget *t, const char *dev, const char *only_job,
                        const char *run_dir, const volatile sig_atomic_t *cancel, BvTargetRun *ret);
void bv_target_run_done(BvTargetRun *run);
