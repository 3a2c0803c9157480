/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the runs leave behind for `blkvault status` and the age alarm: one small text file per
 * (job, target) and per target in the state directory (BV_STATE_DIR, or $BLKVAULT_STATE_DIR, or
 * --state-dir), each replaced durably (tmpfile, fsync, rename, fsync dir) after every run:
 *
 *   STATE/job-JOB@TARGET   a job's runs on a target
 *   STATE/target-TARGET    a target's runs
 *   STATE/copy-REMOTE@TARGET  the copies of a target's repository to a remote (remote.h); its
 *                          last-good is the last copy that completed
 *
 * each of lines "key=value": last-run=UNIX-SECONDS, result=ok|failed, step=STEP (what failed),
 * error=ERRNO, status=N, last-good=UNIX-SECONDS (the last run that succeeded), snapshot=ID (job files: the
 * snapshot it wrote), and the last run's numbers: duration-ms, bytes-new, bytes-stored, repo-bytes.
 * A job of a libvirt domain adds a line per disk, "disk=TARGET WHEN SNAPSHOT incremental|full NAME":
 * the disk's last good backup (kept when a later run did not publish the disk).
 * Unknown keys are ignored, so the files can grow.
 */

#include <stdbool.h>
#include <stdint.h>

#include "conf.h"

#define BV_STATE_DIR "/var/lib/blkvault/state"
#define BV_STATE_ENV "BLKVAULT_STATE_DIR"
/* A last good backup dated further ahead of the clock than this does not count (a clock set ahead). */
#define BV_STATE_FUTURE_SLACK (24 * 3600)

/* What a run measured (all 0 when it did not get that far). */
typedef struct BvRunNumbers {
        uint64_t duration_ms;
        uint64_t bytes_new;     /* raw bytes of chunks the repository did not hold */
        uint64_t bytes_stored;  /* encoded bytes written to packs */
        uint64_t repo_bytes;    /* the repository's packs after the run (and its prune and gc) */
} BvRunNumbers;

/* The last good backup of one disk of a libvirt domain's job. */
#define BV_STATE_DISKS_MAX 16
typedef struct BvRunDisk {
        char disk[64];          /* its target (vda) */
        uint64_t when;          /* unix seconds */
        char snapshot[65];
        bool incremental;       /* it read only what changed since its parent's checkpoint */
        char name[256];         /* its snapshot's name */
} BvRunDisk;

typedef struct BvRunState {
        uint64_t last_run;      /* unix seconds, 0: never */
        int result;             /* 0 ok, else -errno of the step that failed */
        char step[24];          /* what failed, or "" */
        int status;             /* the exit status of the program that failed (-ECHILD), or, for a
                                 * target whose step is "jobs", how many jobs failed */
        uint64_t last_good;     /* unix seconds of the last run that succeeded, 0: never */
        char snapshot[65];      /* the snapshot it wrote (jobs), or "" */
        BvRunNumbers numbers;   /* of the last run */
        BvRunDisk disks[BV_STATE_DISKS_MAX]; /* a libvirt job's disks, by their last good backups */
        size_t n_disks;
} BvRunState;

/* override if given, else $BLKVAULT_STATE_DIR if set, else BV_STATE_DIR. */
const char *bv_state_dir(const char *override);

/* Records a run at `when` (unix seconds): result 0 (then last_good = when and the snapshot) or
 * -errno with the step that failed; the earlier last_good is kept; numbers NULL: all 0. target NULL: the file of the
 * target job_or_target itself. disks (n_disks, or NULL): the disks a libvirt job published in this
 * run, whatever its result (the other disks' earlier lines are kept). Creates the directory (0755)
 * when missing. */
int bv_state_record(const char *dir, const char *job, const char *target, uint64_t when, int result,
                    const char *step, int status, const char *snapshot, const BvRunNumbers *numbers,
                    const BvRunDisk *disks, size_t n_disks);
/* The state of job on target (job NULL: of the target): -ENOENT when it never ran. */
int bv_state_read(const char *dir, const char *job, const char *target, BvRunState *ret);

/* The same for the copies of target's repository to remote (no snapshot). */
int bv_state_record_copy(const char *dir, const char *remote, const char *target, uint64_t when, int result,
                         const char *step, const BvRunNumbers *numbers);
int bv_state_read_copy(const char *dir, const char *remote, const char *target, BvRunState *ret);

/* A job over all the targets it may run on (or a remote over the targets copied to it). */
typedef struct BvJobStatus {
        BvRunState last;        /* the latest run (any target) */
        const char *last_target;
        uint64_t last_good;     /* the newest good backup on any target, 0: none */
        const char *good_target;
        bool alarm;             /* no good backup younger than max-age (or dated over a day ahead) */
        const char *bad_target; /* the first target whose state file did not read (left out), or NULL */
        int bad_error;          /* and why (-errno) */
        char bad_file[2 * BV_CONF_NAME_MAX + 16]; /* its file name in the state directory */
        /* a libvirt job: each disk's newest good backup over the targets, and its target */
        BvRunDisk disks[BV_STATE_DISKS_MAX];
        const char *disk_targets[BV_STATE_DISKS_MAX];
        size_t n_disks;
} BvJobStatus;

/* Reads the state of job j on each target of c it may run on; now: unix seconds. A state file
 * that does not read costs only what it describes: it is left out and named in bad_*. */
int bv_state_job_status(const char *dir, const BvConfig *c, const BvConfJob *j, uint64_t now, BvJobStatus *ret);
/* The same for the copies to remote rm from every target copied to it: in alarm when none
 * completed within its max-age. */
int bv_state_remote_status(const char *dir, const BvConfig *c, const BvConfRemote *rm, uint64_t now,
                           BvJobStatus *ret);
