/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The off-site copy of a drive ([remote NAME] in blkvault.conf(5); blkvault remote copy NAME, run
 * by blkvault-copy@NAME.service): the repository of each target copied to the remote goes to
 * LOCATION/TARGET, a repository related to the drive's (blkvault copy, copy.h), so only what the
 * remote lacks travels and an interrupted copy continues where it stopped; then the remote's
 * keep-* prune it there (its own retention, by snapshot name, as a job's) and gc.
 *
 * A backup never waits on the network: the drive's run (run.h) backs up, verifies, unmounts and
 * locks, says "safe to unplug", and only then asks for the copy (a unit of its own, with network).
 * The copy reads the drive itself: it takes the run lock (recorded as a copy), unlocks the LUKS
 * container, mounts the filesystem read-only, proves the repository is the registered one, and
 * copies. Pulling the drive meanwhile loses nothing (it is only read; the copy fails and continues
 * at the next plug-in or retry), and a run that wants the lock stops the copy (SIGTERM) instead of
 * waiting for it. Nothing here prints.
 */

#include <stdbool.h>
#include <stdint.h>

#include "conf.h"
#include "copy.h"

typedef struct BvRemoteCopy {
        const BvConfRemote *remote;
        const BvConfTarget *target;
        char *dst;              /* LOCATION/TARGET */
        int result;             /* 0, or -errno of the step that failed */
        const char *step;       /* what failed: "lock", "unlock", "probe", "mount", "identify", "open",
                                 * "open remote", "copy", "prune", "gc", "unmount", "close" */
        bool all;               /* every snapshot of the drive (copy-to on the target) */
        size_t n_wanted;        /* else the snapshots of the jobs that name the remote */
        bool created;           /* the remote's repository was made by this copy */
        BvCopyStats stats;
        bool pruned;            /* the remote has keep-*: prune and gc ran there after the copy */
        size_t kept, forgotten; /* its snapshots */
        uint64_t packs_deleted, bytes_deleted;
        char said[320];         /* what the remote's storage said of a request that failed, or "" */
        uint64_t duration_ms;
} BvRemoteCopy;

/* Copies target t's repository (attached as dev) to remote rm: every snapshot when t names rm in
 * copy-to, else those named after the jobs that run on t and name rm. run_dir as
 * bv_target_run_drive's; cancelled (or NULL) stops the copy between buffers. The remote's
 * endpoint, region and credentials file are taken from rm (they replace the AWS_* variables of
 * this process). Fills *ret (free with bv_remote_copy_done); returns ret->result. */
int bv_remote_copy_drive(const BvConfig *c, const BvConfRemote *rm, const BvConfTarget *t, const char *dev,
                         const char *run_dir, bool (*cancelled)(void), BvRemoteCopy *ret);
void bv_remote_copy_done(BvRemoteCopy *rc);

/* Sets this process's AWS_* variables for rm: AWS_ENDPOINT_URL_S3 and AWS_REGION when rm has them,
 * and with a credentials file AWS_SHARED_CREDENTIALS_FILE (its [default] profile) in place of
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and AWS_PROFILE. */
int bv_remote_env(const BvConfRemote *rm);
