/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One run of a registered drive (blkvault target run): take the run lock (two drives plugged
 * at once run one after the other), unlock the LUKS container, mount the filesystem, back up
 * every job of the target into its repository and verify (--read-data) the snapshot it wrote,
 * then prune the job's snapshots by its keep-* and collect garbage, unmount, lock. A restore-only drive is mounted read-only and nothing is written. Nothing
 * here prints: the caller reports from BvTargetRun.
 */

#include <stdint.h>

#include "backup-libvirt.h"
#include "conf.h"
#include "policy.h"
#include "repo.h" /* BvProgress */

#define BV_RUN_DIR "/run/blkvault"

/* The progress of each job's backup: fn is called about every 250 ms from the reading thread. */
typedef struct BvRunProgress {
        void (*fn)(const BvConfJob *job, const char *target, const BvProgress *p, void *userdata);
        /* Once, when the run waits for another's run lock: the target that one runs and its pid
         * (holder NULL and pid 0 when it recorded none). NULL: not told. */
        void (*waiting)(const char *target, const char *holder, int pid, void *userdata);
        /* Once, when the run lock is held by the off-site copy of holder to remote (pid): the run
         * stops it (SIGTERM) and waits for it to let go of the drive. NULL: not told. */
        void (*stopping_copy)(const char *target, const char *holder, const char *remote, int pid, void *userdata);
        void *userdata;
} BvRunProgress;

typedef struct BvTargetRunJob {
        const BvConfJob *job;
        int result;             /* 0, or -errno of the step that failed */
        const char *step;       /* what failed: "pre", "open", "snapshot", "backup", "command", "verify",
                                 * "prune", "gc", "post", "snapshot removal", "source" (it does not open: its
                                 * path in detail), "configuration" (its
                                 * section has a mistake: not run, the mistake in detail) */
        int status;             /* the exit status of the program that failed (-ECHILD) */
        char detail[256];       /* the first line of its output (lvs, lvcreate, lvremove), the
                                 * mistake, or "" */
        char source_detail[1024]; /* "source": the words of its helper (qemu-nbd) or the file a disk
                                  * image references (BvSourceOptions.error_detail), or "" */
        char snapshot_id[65];
        uint64_t size, bytes_new, bytes_read;
        bool thin;              /* the source is a thin volume's snapshot, read with a thin delta */
        char read_whole_because[800]; /* thin: why everything was read, or "" */
        bool used_only;         /* used-only = yes: the free bytes it did not read, or why it read */
        uint64_t bytes_free_skipped; /* everything ("" when it did not) */
        char used_why[256];
        uint64_t problems;      /* verify's */
        bool pruned;            /* the job has keep-*: prune and gc ran */
        size_t kept, forgotten; /* the job's snapshots */
        uint64_t packs_deleted, bytes_deleted;
        uint64_t bytes_stored;  /* encoded bytes the backup wrote to packs */
        uint64_t repo_bytes;    /* the repository's packs after the job (0: not measured) */
        uint64_t duration_ms;
        uint64_t kept_packs, kept_bytes; /* a failed backup: what it left for the next to continue from */
        uint64_t resumed_packs, resumed_bytes; /* adopted from a backup that was killed (write/adopt.h) */
        /* The backup met a full drive: gc ran (room_result < 0: it failed) and, when it freed
         * something, the backup ran again (ran_again; not a command's: its next run has the room). */
        bool room_collected, ran_again;
        int room_result;
        uint64_t room_packs, room_bytes;
        const BvRunProgress *progress; /* the run's, or NULL */
        const char *target_name;
        /* source = libvirt:DOMAIN: its domain's backup (bv_backup_libvirt): a snapshot per disk,
         * named as backup --name=JOB names them (JOB for one disk, JOB-TARGET for several), each
         * verified; the job's keep-* prune each disk's name. snapshot_id is the first disk's, the
         * numbers above the sums over the disks that were published. */
        BvLibvirtResult libvirt;
} BvTargetRunJob;

typedef struct BvTargetRun {
        const BvConfTarget *target;
        const char *device;
        int result;             /* 0, or -errno of the step that failed before the jobs */
        const char *step;       /* "lock", "unlock", "probe", "mount", "unmount", "close", "power-off" */
        bool powered_off;       /* power-off = yes, and it was done */
        bool cancelled;         /* bv_job_cancel: a job failed by it, or the jobs not yet started were left out
                                 * (not when it came after the last job was done) */
        BvTargetRunJob *jobs;
        size_t n_jobs, n_failed;
        uint64_t bytes_new, bytes_stored;
        uint64_t repo_bytes;    /* the repository's packs after the last job that measured them */
        uint64_t duration_ms;
        /* The drive had less free, with what gc could delete (which the next backup would continue
         * from), than the sources could add: gc ran before the jobs, deleting what failed and
         * interrupted runs left (or failed: room_result < 0, and the jobs ran anyway). */
        bool room_collected;
        int room_result;
        uint64_t room_packs, room_bytes;
        const BvRunProgress *progress;
} BvTargetRun;

/* Runs target t (attached as dev): every job that wants it, or only the job named only_job;
 * run_dir holds the lock and the mountpoints (NULL: BV_RUN_DIR); progress (or NULL) hears of
 * each backup's progress. Fills *ret (free with
 * bv_target_run_done); returns ret->result. */
int bv_target_run_drive(const BvConfig *c, const BvConfTarget *t, const char *dev, const char *only_job,
                        const char *run_dir, const BvRunProgress *progress, BvTargetRun *ret);
void bv_target_run_done(BvTargetRun *run);

/* The policy of a configuration's keep-* rules (not set: unused), as prune takes it. */
void bv_target_policy(const BvConfRetention *k, BvPolicy *ret);

/* A drive held for a reader other than its run (a remote's copy, remote.h): the run lock taken
 * (recorded as the copy to remote `copy`: a run that wants the lock stops such a holder), the
 * LUKS container unlocked, the filesystem mounted read-only (what a reader may do while the drive
 * is said to be safe to unplug: pulling it loses nothing) and the repository proven to be the
 * registered one, as a run proves it, at repo_path. */
typedef struct BvDriveHold {
        int lock_fd, repo_fd;
        char *mnt, *mapname;
        char *repo_path;        /* /proc/self/fd/N of the repository's directory on the drive */
        bool luks, mounted;
        const char *step;       /* what failed: "lock", "unlock", "probe", "mount", "identify" */
} BvDriveHold;

/* Holds target t attached as dev; run_dir as bv_target_run_drive's. On failure *ret is still to be
 * released (bv_target_release_drive), and ret->step says what failed. */
int bv_target_hold_drive(const BvConfTarget *t, const char *dev, const char *run_dir, const char *copy,
                         BvDriveHold *ret);
/* Unmounts, locks and lets go of the run lock (whatever failed: a pulled drive's mount is
 * detached). 0, or -errno and *ret_step ("unmount", "close"). */
int bv_target_release_drive(BvDriveHold *h, const char **ret_step);
