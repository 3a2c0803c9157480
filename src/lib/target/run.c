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
#include "gc.h"
#include "hooks.h"
#include "jobsource.h"
#include "macro.h"
#include "power.h"
#include "prune.h"
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
        return k->last != BV_CONF_KEEP_UNSET || k->hourly != BV_CONF_KEEP_UNSET || k->daily != BV_CONF_KEEP_UNSET ||
               k->weekly != BV_CONF_KEEP_UNSET || k->monthly != BV_CONF_KEEP_UNSET ||
               k->yearly != BV_CONF_KEEP_UNSET || k->within > 0;
}

/* A count of the configuration as the policy takes it: not set is 0 (rule unused). */
static int keep_count(int n)
{
        return n == BV_CONF_KEEP_UNSET ? 0 : n;
}

/* The job's retention: prune its snapshots, then gc (locks/gc: waits for another gc). */
static void prune_job(const BvConfTarget *t, const char *repo_path, BvTargetRunJob *rj)
{
        const BvConfRetention *k = &rj->job->keep;
        BvPolicy p = { .last = keep_count(k->last), .hourly = keep_count(k->hourly), .daily = keep_count(k->daily),
                       .weekly = keep_count(k->weekly), .monthly = keep_count(k->monthly),
                       .yearly = keep_count(k->yearly),
                       .within = (int64_t)MIN(k->within, (uint64_t)INT64_MAX) };
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvSecret secret = { .key_file = t->key_file };
        _cleanup_free_ BvPruneItem *items = NULL;
        size_t n = 0;
        int r = bv_repo_open(repo_path, &secret, BV_OPEN_GC | BV_OPEN_WAIT, &repo);
        if (r >= 0)
                r = bv_prune(repo, &p, rj->job->name, false, &items, &n, NULL);
        if (r < 0) {
                rj->step = "prune", rj->result = r;
                return;
        }
        rj->pruned = true;
        rj->forgotten = (size_t)r, rj->kept = n - (size_t)r;
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st;
        r = bv_gc(repo, &o, &st);
        if (r < 0) {
                rj->step = "gc", rj->result = r;
                return;
        }
        rj->packs_deleted = st.packs_deleted, rj->bytes_deleted = st.bytes_deleted;
}

/* The first line of a program's output, without leading blanks (LVM indents its messages). */
static void first_line(const char *out, char *buf, size_t size)
{
        out += strspn(out, " \t\n");
        snprintf(buf, size, "%.*s", (int)strcspn(out, "\n"), out);
}

/* The job's source into the repository at repo_path, verify what it wrote, then prune by its
 * retention. */
static void backup_job(const BvConfTarget *t, const char *repo_path, const char *const vars[], BvTargetRunJob *rj)
{
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvSecret secret = { .key_file = t->key_file };
        BvBackupStats stats = {};
        BvVerifyStats vs = {};
        BvJobSource *js = NULL;
        char out[1024];

        int r = bv_repo_open(repo_path, &secret, BV_OPEN_WRITE | BV_OPEN_WAIT, &repo);
        if (r < 0) {
                rj->step = "open", rj->result = r;
                return;
        }
        r = bv_job_source_open(rj->job, t->name, vars, &js, &rj->status, out, sizeof(out));
        if (r == -ECHILD)
                first_line(out, rj->detail, sizeof(rj->detail));
        if (r < 0) {
                rj->step = rj->job->snapshot && r == -ECHILD ? "snapshot" : "backup", rj->result = r;
                return;
        }
        BvBackupOptions opts = { .name = rj->job->name, .cancelled = bv_job_cancelled };
        r = bv_backup(repo, bv_job_source(js), &opts, &stats);
        rj->thin = bv_job_source_thin(js);
        snprintf(rj->read_whole_because, sizeof(rj->read_whole_because), "%s",
                 *bv_job_source_reason(js) ? bv_job_source_reason(js) : stats.changed_reason);
        int q = bv_job_source_close(js, r >= 0, &rj->status, out, sizeof(out));
        if (q == -ECHILD && rj->job->snapshot)
                first_line(out, rj->detail, sizeof(rj->detail));
        if (r < 0) {
                rj->step = r == -ECHILD ? "command" : "backup", rj->result = r;
                return;
        }
        snprintf(rj->snapshot_id, sizeof(rj->snapshot_id), "%s", stats.snapshot_id);
        rj->size = stats.size, rj->bytes_new = stats.counts.bytes_new, rj->bytes_read = stats.counts.bytes_read;
        if (q < 0) {
                rj->step = rj->job->snapshot ? "snapshot removal" : "command", rj->result = q;
                return;
        }
        /* What this run wrote: the chunks the job's snapshot before this one does not use. */
        BvVerifyOptions vo = { .snapshot = stats.snapshot_id, .read_data = true, .written = true };
        r = bv_verify_opts(repo, &vo, count_problem, &rj->problems, &vs);

        if (r >= 0 && rj->problems > 0)
                r = -EBADMSG;
        if (r < 0) {
                rj->step = "verify", rj->result = r;
                return;
        }
        if (keeps_anything(&rj->job->keep)) {
                bv_repo_close(TAKE_PTR(repo));
                prune_job(t, repo_path, rj);
        }
}

/* A hook of the job: 0, or -ECHILD with its exit status. */
static int job_hook(const char *cmd, const char *const vars[], BvTargetRunJob *rj)
{
        int r = bv_hook_run(cmd, vars);
        if (r > 0)
                return rj->status = r, -ECHILD;
        return r;
}

/* One job: pre, the backup (when pre succeeded), post (whatever the backup did, with its result
 * in BLKVAULT_RESULT). */
static void run_job(const BvConfTarget *t, const char *repo_path, BvTargetRunJob *rj)
{
        _cleanup_free_ char *vj = NULL, *vt = NULL, *vr = NULL;
        if (asprintf(&vj, "BLKVAULT_JOB=%s", rj->job->name) < 0 || asprintf(&vt, "BLKVAULT_TARGET=%s", t->name) < 0) {
                rj->step = "pre", rj->result = -ENOMEM;
                return;
        }
        const char *vars[] = { vj, vt, NULL, NULL };
        int r = rj->job->pre ? job_hook(rj->job->pre, vars, rj) : 0;
        if (r < 0) {
                rj->step = "pre", rj->result = r;
                return;
        }
        backup_job(t, repo_path, vars, rj);
        if (!rj->job->post)
                return;
        if (asprintf(&vr, "BLKVAULT_RESULT=%s", rj->result < 0 ? "failed" : "ok") < 0)
                vr = NULL;
        vars[2] = vr;
        int status = 0;
        r = bv_hook_run(rj->job->post, vars);
        if (r > 0)
                status = r, r = -ECHILD;
        if (r < 0 && rj->result >= 0)
                rj->step = "post", rj->result = r, rj->status = status;
}

static int run_jobs(const BvConfig *c, const BvConfTarget *t, const char *mnt, const char *only_job,
                    BvTargetRun *run)
{
        _cleanup_free_ char *repo_path = NULL;
        BvSecret secret = { .key_file = t->key_file };
        if (asprintf(&repo_path, "%s/%s", mnt, t->repository) < 0)
                return -ENOMEM;
        /* Only a repository that opens with the target's key file proves the drive is the registered
         * one: an unencrypted one would open with any key. A drive that copies the registered UUID
         * (which anyone who held the real drive can read) must get nothing: no hook runs, no lock
         * or lease is taken before this proof, and each job's open refuses a repository without a
         * cipher again from the config it reads itself (a drive can answer differently each time). */
        int r = bv_repo_prove(repo_path, &secret, NULL);
        if (r < 0)
                return run->step = "identify", r;
        run->jobs = calloc(c->n_jobs ? c->n_jobs : 1, sizeof(*run->jobs));
        if (!run->jobs)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_jobs; i++) {
                if (!bv_conf_job_wants(&c->jobs[i], t->name) || (only_job && strcmp(c->jobs[i].name, only_job) != 0))
                        continue;
                if (bv_job_cancelled()) {
                        run->cancelled = true;
                        break;
                }
                BvTargetRunJob *rj = &run->jobs[run->n_jobs++];
                rj->job = &c->jobs[i];
                if (rj->job->mistake) { /* skipped, and reported as a failed job */
                        rj->step = "configuration", rj->result = -EINVAL;
                        snprintf(rj->detail, sizeof(rj->detail), "%s", rj->job->mistake);
                } else
                        run_job(t, repo_path, rj);
                run->bytes_new += rj->bytes_new;
                run->n_failed += rj->result < 0;
                run->cancelled |= bv_job_cancelled(); /* also while the last job ran */
        }
        return 0;
}

/* Mounted: the jobs (none for a restore-only drive), then the unmount. */
static int run_mounted(const BvConfig *c, const BvConfTarget *t, const char *fsdev, const char *mnt,
                       const char *only_job, BvTargetRun *run)
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
        r = ro ? 0 : run_jobs(c, t, mnt, only_job, run);
        if (umount2(mnt, 0) < 0 && r >= 0)
                r = -errno, run->step = "unmount";
        rmdir(mnt);
        return r;
}

int bv_target_run_drive(const BvConfig *c, const BvConfTarget *t, const char *dev, const char *only_job,
                        const char *run_dir, BvTargetRun *ret)
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
        int r = run_mounted(c, t, fsdev, mnt, only_job, ret);
        if (t->luks) {
                int q = bv_luks_close(mapname);
                if (q < 0 && r >= 0)
                        r = q, ret->step = "close";
        }
        if (r >= 0 && t->power_off) {
                r = bv_drive_power_off(dev);
                if (r < 0)
                        ret->step = "power-off";
                ret->powered_off = r >= 0;
        }
        return ret->result = r;
}

void bv_target_run_done(BvTargetRun *run)
{
        free(run->jobs);
        run->jobs = NULL;
}
