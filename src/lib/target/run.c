/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup.h"
#include "drive.h"
#include "macro.h"
#include "repo.h"
#include "run.h"
#include "verify.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BvRepo, bv_repo_close)

static void count_problem(const BvVerifyProblem *p, void *ud)
{
        (*(uint64_t *)ud)++;
}

static bool keeps_anything(const BvConfRetention *k)
{
        return k->last >= 0 || k->hourly >= 0 || k->daily >= 0 || k->weekly >= 0 || k->monthly >= 0 ||
               k->yearly >= 0 || k->within > 0;
}

/* One job into the repository at repo_path: backup, then verify what it wrote. */
static void run_job(const BvConfTarget *t, const char *repo_path, const volatile sig_atomic_t *cancel,
                    BvTargetRunJob *rj)
{
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvSecret secret = { .key_file = t->key_file };
        BvBackupStats stats = {};
        BvVerifyStats vs = {};

        if (!rj->job->source) {
                rj->step = "backup", rj->result = -EOPNOTSUPP; /* command sources: not yet */
                return;
        }
        int r = bv_repo_open(repo_path, &secret, BV_OPEN_WRITE | BV_OPEN_WAIT, &repo);
        if (r < 0) {
                rj->step = "open", rj->result = r;
                return;
        }
        BvBackupOptions opts = { .name = rj->job->name, .cancel = cancel };
        r = bv_backup_path(repo, rj->job->source, &opts, &stats);
        if (r < 0) {
                rj->step = "backup", rj->result = r;
                return;
        }
        snprintf(rj->snapshot_id, sizeof(rj->snapshot_id), "%s", stats.snapshot_id);
        rj->size = stats.size, rj->bytes_new = stats.counts.bytes_new;
        r = bv_verify(repo, stats.snapshot_id, true, count_problem, &rj->problems, &vs);
        if (r >= 0 && rj->problems > 0)
                r = -EBADMSG;
        if (r < 0)
                rj->step = "verify", rj->result = r;
}

static int run_jobs(const BvConfig *c, const BvConfTarget *t, const char *mnt, const char *only_job,
                    const volatile sig_atomic_t *cancel, BvTargetRun *run)
{
        _cleanup_free_ char *repo_path = NULL;
        if (asprintf(&repo_path, "%s/%s", mnt, t->repository) < 0)
                return -ENOMEM;
        run->jobs = calloc(c->n_jobs ? c->n_jobs : 1, sizeof(*run->jobs));
        if (!run->jobs)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_jobs; i++) {
                if (!bv_conf_job_wants(&c->jobs[i], t->name) || (only_job && strcmp(c->jobs[i].name, only_job) != 0))
                        continue;
                if (cancel && *cancel) {
                        run->cancelled = true;
                        break;
                }
                BvTargetRunJob *rj = &run->jobs[run->n_jobs++];
                rj->job = &c->jobs[i];
                run_job(t, repo_path, cancel, rj);
                run->bytes_new += rj->bytes_new;
                run->n_failed += rj->result < 0;
                run->prune_unavailable |= keeps_anything(&rj->job->keep);
        }
        return 0;
}

/* Mounted: the jobs (none for a restore-only drive), then the unmount. */
static int run_mounted(const BvConfig *c, const BvConfTarget *t, const char *fsdev, const char *mnt,
                       const char *only_job, const volatile sig_atomic_t *cancel, BvTargetRun *run)
{
        BvDriveProbe pr;
        bool ro = t->mode == BV_TARGET_RESTORE_ONLY;
        int r = bv_drive_probe(fsdev, &pr);
        if (r >= 0 && !pr.type[0])
                r = -EMEDIUMTYPE;
        if (r < 0)
                return run->step = "probe", r;
        if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
                return run->step = "mount", -errno;
        r = bv_drive_mount(fsdev, pr.type, mnt, t->fs_options, ro);
        if (r < 0) {
                rmdir(mnt);
                return run->step = "mount", r;
        }
        r = ro ? 0 : run_jobs(c, t, mnt, only_job, cancel, run);
        run->cancelled |= cancel && *cancel;
        if (umount2(mnt, 0) < 0 && r >= 0)
                r = -errno, run->step = "unmount";
        rmdir(mnt);
        return r;
}

int bv_target_run_drive(const BvConfig *c, const BvConfTarget *t, const char *dev, const char *only_job,
                        const char *run_dir, const volatile sig_atomic_t *cancel, BvTargetRun *ret)
{
        _cleanup_free_ char *lock = NULL, *mnt = NULL, *mapname = NULL;
        char mapper[256];
        const char *dir = run_dir ? run_dir : BV_RUN_DIR;

        *ret = (BvTargetRun){ .target = t, .device = dev };
        if (asprintf(&lock, "%s/targets.lock", dir) < 0 || asprintf(&mnt, "%s/target-%s", dir, t->name) < 0 ||
            asprintf(&mapname, "blkvault-%s", t->name) < 0)
                return ret->result = -ENOMEM;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return ret->step = "lock", ret->result = -errno;
        _cleanup_close_ int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lfd < 0 || flock(lfd, LOCK_EX) < 0)
                return ret->step = "lock", ret->result = -errno;
        const char *fsdev = dev;
        if (t->luks) {
                int r = bv_luks_open(dev, mapname, t->key_file, mapper, sizeof(mapper));
                if (r < 0)
                        return ret->step = "unlock", ret->result = r;
                fsdev = mapper;
        }
        int r = run_mounted(c, t, fsdev, mnt, only_job, cancel, ret);
        if (t->luks) {
                int q = bv_luks_close(mapname);
                if (q < 0 && r >= 0)
                        r = q, ret->step = "close";
        }
        return ret->result = r;
}

void bv_target_run_done(BvTargetRun *run)
{
        free(run->jobs);
        run->jobs = NULL;
}
