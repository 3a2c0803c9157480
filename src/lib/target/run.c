/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backup.h"
#include "drive.h"
#include "fileio.h"
#include "gc.h"
#include "hooks.h"
#include "jobsource.h"
#include "used-source.h"
#include "macro.h"
#include "mounts.h"
#include "power.h"
#include "prune.h"
#include "repo.h"
#include "run.h"
#include "state.h"
#include "timeutil.h"
#include "verify.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BvRepo, bv_repo_close)

static void count_problem(const BvVerifyProblem *p, void *ud)
{
        (*(uint64_t *)ud)++;
}

/* A count of the configuration as the policy takes it: not set is 0 (rule unused). */
static int keep_count(int n)
{
        return n == BV_CONF_KEEP_UNSET ? 0 : n;
}

static int add_pack_size(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud)
{
        *(uint64_t *)ud += size;
        return 0;
}

/* The repository's size for the metrics: its packs (left at 0 when they do not list). */
static void measure_repo(BvRepo *repo, BvTargetRunJob *rj)
{
        uint64_t sum = 0;
        if (bv_packset_list(bv_repo_packs(repo), add_pack_size, &sum) >= 0)
                rj->repo_bytes = sum;
}

/* The job's retention: prune its snapshots, then gc (locks/gc: waits for another gc). */
void bv_target_policy(const BvConfRetention *k, BvPolicy *ret)
{
        *ret = (BvPolicy){ .last = keep_count(k->last), .hourly = keep_count(k->hourly), .daily = keep_count(k->daily),
                           .weekly = keep_count(k->weekly), .monthly = keep_count(k->monthly),
                           .yearly = keep_count(k->yearly),
                           .within = (int64_t)MIN(k->within, (uint64_t)INT64_MAX) };
}

/* The names the job's snapshots have: its name, or (a libvirt source) each of its disks'. */
static size_t job_names(const BvTargetRunJob *rj, const char **names, size_t max)
{
        size_t n = 0;
        if (!bv_conf_job_libvirt(rj->job)) {
                names[n++] = rj->job->name;
                return n;
        }
        for (size_t i = 0; i < rj->libvirt.n_disks && n < max; i++)
                names[n++] = rj->libvirt.disks[i].name;
        return n;
}

static void prune_job(const BvConfTarget *t, const char *repo_path, BvTargetRunJob *rj)
{
        BvPolicy p;
        bv_target_policy(&rj->job->keep, &p);
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvSecret secret = { .key_file = t->key_file };
        _cleanup_free_ BvPruneItem *items = NULL;
        size_t n = 0;
        const char *names[BV_STATE_DISKS_MAX];
        size_t n_names = job_names(rj, names, ELEMENTSOF(names));
        int r = bv_repo_open(repo_path, &secret, BV_OPEN_GC | BV_OPEN_WAIT, &repo);
        for (size_t i = 0; r >= 0 && i < n_names; i++) {
                r = bv_prune(repo, &p, names[i], false, &items, &n, NULL);
                free(TAKE_PTR(items));
                if (r >= 0)
                        rj->forgotten += (size_t)r, rj->kept += n - (size_t)r;
        }
        if (r < 0) {
                rj->step = "prune", rj->result = r;
                return;
        }
        rj->pruned = true;
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st;
        r = bv_gc(repo, &o, &st);
        if (r < 0) {
                rj->step = "gc", rj->result = r;
                return;
        }
        rj->packs_deleted = st.packs_deleted, rj->bytes_deleted = st.bytes_deleted;
        measure_repo(repo, rj);
}

/* The first line of a program's output, without leading blanks (LVM indents its messages). */
static void first_line(const char *out, char *buf, size_t size)
{
        out += strspn(out, " \t\n");
        snprintf(buf, size, "%.*s", (int)strcspn(out, "\n"), out);
}

static void job_progress(const BvProgress *p, void *userdata)
{
        const BvTargetRunJob *rj = userdata;
        rj->progress->fn(rj->job, rj->target_name, p, rj->progress->userdata);
}

/* The job's source into the open repository: 0, or the failure in rj (step, result, detail). */
static int backup_source(const char *target, const char *const vars[], BvRepo *repo, BvTargetRunJob *rj,
                         BvBackupStats *stats)
{
        BvJobSource *js = NULL;
        BvBackupKept kept = {};
        char out[1024];

        rj->detail[0] = '\0';
        int r = bv_job_source_open(rj->job, target, vars, &js, &rj->status, out, sizeof(out));
        if (r == -ECHILD)
                first_line(out, rj->detail, sizeof(rj->detail));
        if (r < 0 && r != -ECHILD && !bv_conf_job_command(rj->job)) { /* the source did not open: named */
                snprintf(rj->detail, sizeof(rj->detail), "%s", rj->job->source);
                snprintf(rj->source_detail, sizeof(rj->source_detail), "%s", out);
                return rj->step = "source", rj->result = r;
        }
        if (r < 0)
                return rj->step = rj->job->snapshot && r == -ECHILD ? "snapshot" : "backup", rj->result = r;
        const char *used_why;
        const BvFsUsedMap *used = bv_job_source_used(js, &used_why);
        BvBackupOptions opts = { .name = rj->job->name, .cancelled = bv_job_cancelled, .ret_kept = &kept,
                                 .used_only = used ? bv_fs_used_applied(used, used_why) : NULL };
        if (rj->progress)
                opts.progress = job_progress, opts.progress_userdata = rj;
        r = bv_backup(repo, bv_job_source(js), &opts, stats);
        rj->thin = bv_job_source_thin(js);
        snprintf(rj->read_whole_because, sizeof(rj->read_whole_because), "%s",
                 *bv_job_source_reason(js) ? bv_job_source_reason(js) : stats->changed_reason);
        rj->used_only = used != NULL;
        if (used) {
                snprintf(rj->used_why, sizeof(rj->used_why), "%s", used_why);
                rj->bytes_free_skipped = used->bytes_free;
        }
        rj->kept_packs = kept.packs, rj->kept_bytes = kept.bytes;
        int q = bv_job_source_close(js, r >= 0, &rj->status, out, sizeof(out));
        if (q == -ECHILD && rj->job->snapshot)
                first_line(out, rj->detail, sizeof(rj->detail));
        if (r < 0)
                return rj->step = r == -ECHILD ? "command" : "backup", rj->result = r;
        snprintf(rj->snapshot_id, sizeof(rj->snapshot_id), "%s", stats->snapshot_id);
        rj->size = stats->size, rj->bytes_new = stats->counts.bytes_new, rj->bytes_read = stats->counts.bytes_read;
        rj->bytes_stored = stats->counts.bytes_stored;
        rj->resumed_packs = stats->packs_resumed, rj->resumed_bytes = stats->bytes_resumed;
        if (q < 0)
                return rj->step = rj->job->snapshot ? "snapshot removal" : "command", rj->result = q;
        return 0;
}

/* A backup that met a full drive: gc once with the repository closed (its lease would keep gc
 * from deleting what the backup kept), then open it again. True when gc freed something and the
 * repository is open again: then the backup runs again (not a command's: its output is read
 * once; its next run finds the room). */
static bool collect_full(const BvConfTarget *t, const char *repo_path, BvRepo **repo, BvTargetRunJob *rj)
{
        _cleanup_(bv_repo_closep) BvRepo *g = NULL;
        BvSecret secret = { .key_file = t->key_file };
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st = {};

        bv_repo_close(TAKE_PTR(*repo));
        int r = bv_repo_open(repo_path, &secret, BV_OPEN_GC | BV_OPEN_WAIT, &g);
        if (r >= 0)
                r = bv_gc(g, &o, &st);
        bv_repo_close(TAKE_PTR(g));
        rj->room_collected = true, rj->room_result = r < 0 ? r : 0;
        rj->room_packs = st.packs_deleted, rj->room_bytes = st.bytes_deleted + st.tmp_bytes_deleted;
        if (r < 0 || rj->room_bytes == 0 || bv_conf_job_command(rj->job))
                return false;
        rj->ran_again = true;
        r = bv_repo_open(repo_path, &secret, BV_OPEN_WRITE | BV_OPEN_WAIT, repo);
        if (r < 0)
                rj->step = "open", rj->result = r;
        return r >= 0;
}

/* A libvirt source's disks into the open repository, as backup REPO libvirt:DOMAIN --name=JOB
 * backs them up (the library's one orchestration: job, checkpoints, fallbacks, cleanup): the
 * failure in rj, the first disk's that failed (the others are published). */
static void backup_libvirt_job(BvRepo *repo, BvTargetRunJob *rj)
{
        const BvConfJob *j = rj->job;
        BvLibvirtResult *res = &rj->libvirt;
        BvLibvirtBackupOptions o = { .uri = j->libvirt_uri, .disks = (const char *const *)j->disks,
                                     .n_disks = j->n_disks, .name = j->name, .no_freeze = j->no_freeze,
                                     .backup = { .cancelled = bv_job_cancelled } };
        if (rj->progress)
                o.backup.progress = job_progress, o.backup.progress_userdata = rj;
        rj->detail[0] = '\0';
        int r = bv_backup_libvirt(repo, bv_conf_job_libvirt(j), &o, res);
        for (size_t i = 0; i < res->n_disks; i++) {
                const BvLibvirtDiskResult *dk = &res->disks[i];
                const BvBackupStats *s = &dk->stats;
                if (dk->error < 0 && !rj->detail[0])
                        snprintf(rj->detail, sizeof(rj->detail), "disk %.64s: %s", dk->target,
                                 dk->error == -EHOSTDOWN && res->stopped ? "the domain stopped during the backup"
                                                                         : strerror(-dk->error));
                rj->kept_packs += dk->kept.packs, rj->kept_bytes += dk->kept.bytes;
                if (dk->error < 0 || !s->snapshot_id[0])
                        continue;
                if (!rj->snapshot_id[0])
                        snprintf(rj->snapshot_id, sizeof(rj->snapshot_id), "%s", s->snapshot_id);
                rj->size += s->size, rj->bytes_new += s->counts.bytes_new, rj->bytes_read += s->counts.bytes_read;
                rj->bytes_stored += s->counts.bytes_stored;
                rj->resumed_packs += s->packs_resumed, rj->resumed_bytes += s->bytes_resumed;
        }
        if (r >= 0)
                return;
        rj->step = "backup", rj->result = r;
        if (rj->detail[0])
                return;
        if (r == res->freeze.thaw_error) /* every disk published, the guest left frozen */
                snprintf(rj->detail, sizeof(rj->detail), "the filesystems of '%.60s' are still frozen (the thaw "
                         "failed: %.120s): virsh domfsthaw", bv_conf_job_libvirt(j), res->freeze.thaw_words);
        else if (r == -ETXTBSY)
                snprintf(rj->detail, sizeof(rj->detail), "disk '%.64s' of domain '%.100s' is shared with other "
                         "domains (<shareable/>): leave it out of disks", res->detail, bv_conf_job_libvirt(j));
        else if (r == -ENXIO)
                snprintf(rj->detail, sizeof(rj->detail), "domain '%.100s' has no disk '%.64s'", bv_conf_job_libvirt(j),
                         res->detail);
        else if (res->not_connected)
                snprintf(rj->detail, sizeof(rj->detail), "cannot connect to libvirt at '%.60s'%s%.140s", res->uri,
                         res->detail[0] ? ": " : "", res->detail);
        else if (r == -ENOMEDIUM)
                snprintf(rj->detail, sizeof(rj->detail), "domain '%.100s' has no disk to back up",
                         bv_conf_job_libvirt(j));
        else
                snprintf(rj->detail, sizeof(rj->detail), "%.*s", (int)sizeof(rj->detail) - 1, res->detail);
}

/* Verifies what snapshot id wrote: the chunks the snapshot of its name before it does not use. */
static int verify_written(BvRepo *repo, const char *id, BvTargetRunJob *rj)
{
        BvVerifyOptions vo = { .snapshot = id, .read_data = true, .written = true };
        BvVerifyStats vs = {};
        uint64_t problems = 0;
        int r = bv_verify_opts(repo, &vo, count_problem, &problems, &vs);

        rj->problems += problems;
        if (r >= 0 && problems > 0)
                r = -EBADMSG;
        if (r < 0 && rj->result >= 0)
                rj->step = "verify", rj->result = r;
        return r;
}

/* The job's source into the open repository (once more after gc when the drive is full), then
 * verify what it wrote: 0, or the failure in rj. A libvirt source's disks that were published
 * are verified even when another disk failed. */
static int backup_verified(const BvConfTarget *t, const char *repo_path, const char *const vars[], BvRepo **repo,
                           BvTargetRunJob *rj)
{
        BvBackupStats stats = {};

        if (bv_conf_job_libvirt(rj->job)) {
                backup_libvirt_job(*repo, rj);
                for (size_t i = 0; i < rj->libvirt.n_disks; i++) {
                        const BvLibvirtDiskResult *dk = &rj->libvirt.disks[i];
                        if (dk->error == 0 && dk->stats.snapshot_id[0])
                                (void)verify_written(*repo, dk->stats.snapshot_id, rj);
                }
                return rj->result;
        }
        int r = backup_source(t->name, vars, *repo, rj, &stats);
        if (r == -ENOSPC && strcmp(rj->step, "backup") == 0 && collect_full(t, repo_path, repo, rj)) {
                rj->step = NULL, rj->result = 0, rj->status = 0;
                stats = (BvBackupStats){};
                r = backup_source(t->name, vars, *repo, rj, &stats);
        }
        if (r < 0)
                return r;
        return verify_written(*repo, stats.snapshot_id, rj);
}

/* The job's source into the repository at repo_path, verified, then prune by its retention. */
static void backup_job(const BvConfTarget *t, const char *repo_path, const char *const vars[], BvTargetRunJob *rj)
{
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvSecret secret = { .key_file = t->key_file };

        int r = bv_repo_open(repo_path, &secret, BV_OPEN_WRITE | BV_OPEN_WAIT, &repo);
        if (r < 0) {
                rj->step = "open", rj->result = r;
                return;
        }
        if (backup_verified(t, repo_path, vars, &repo, rj) < 0)
                return;
        if (bv_conf_job_prunes(rj->job)) {
                bv_repo_close(TAKE_PTR(repo));
                prune_job(t, repo_path, rj);
        } else
                measure_repo(repo, rj);
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

static bool job_runs(const BvConfJob *j, const BvConfTarget *t, const char *only_job)
{
        return bv_conf_job_wants(j, t->name) && (!only_job || strcmp(j->name, only_job) == 0);
}

/* What the run's sources may add at most, as far as it is known: the blocks a file holds, the
 * size of a device (not what a command writes, nor what an LVM snapshot will hold). */
static uint64_t sources_size(const BvConfig *c, const BvConfTarget *t, const char *only_job)
{
        uint64_t sum = 0;
        for (size_t i = 0; i < c->n_jobs; i++) {
                const BvConfJob *j = &c->jobs[i];
                struct stat st;
                if (!job_runs(j, t, only_job) || j->mistake || !j->source || j->snapshot || stat(j->source, &st) < 0)
                        continue;
                if (S_ISREG(st.st_mode))
                        sum += (uint64_t)st.st_blocks * 512;
                else if (S_ISBLK(st.st_mode)) {
                        _cleanup_close_ int fd = open(j->source, O_RDONLY | O_CLOEXEC);
                        uint64_t size;
                        if (fd >= 0 && bv_fd_size(fd, &size) >= 0)
                                sum += size;
                }
        }
        return sum;
}

/* What gc would delete now (a dry run): the packs of failed and interrupted runs, which the next
 * backup of the same source continues from, and what prune forgot. */
static int collectable(BvRepo *repo, uint64_t *ret)
{
        BvGcOptions o = { .dry_run = true, .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st = {};
        int r = bv_gc(repo, &o, &st);
        if (r < 0)
                return r;
        *ret = st.bytes_condemned > st.bytes_copied ? st.bytes_condemned - st.bytes_copied : 0;
        return 0;
}

/* Room first: a run that failed on a full drive (or was interrupted, or lost its drive) left
 * packs that no snapshot uses, and retention only runs after a backup succeeds. Only when the
 * drive's free space and what gc could delete together are less than the sources could add does
 * gc delete it before the jobs: otherwise the next backup continues from what an interrupted run
 * kept (a resumed backup needs only the rest), and a backup that meets a full drive all the same
 * collects once and runs again (backup_job). */
static void collect_for_room(const BvConfig *c, const BvConfTarget *t, const char *only_job,
                             const char *repo_path, BvTargetRun *run)
{
        struct statvfs sv;
        uint64_t need = sources_size(c, t, only_job), can = 0;
        if (need == 0 || statvfs(repo_path, &sv) < 0 || (uint64_t)sv.f_bavail * sv.f_frsize >= need)
                return;
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        BvSecret secret = { .key_file = t->key_file };
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st = {};
        int r = bv_repo_open(repo_path, &secret, BV_OPEN_GC | BV_OPEN_WAIT, &repo);
        if (r >= 0)
                r = collectable(repo, &can);
        if (r >= 0 && (can == 0 || (uint64_t)sv.f_bavail * sv.f_frsize + can >= need))
                return;
        if (r >= 0)
                r = bv_gc(repo, &o, &st);
        run->room_collected = true;
        run->room_result = r < 0 ? r : 0;
        run->room_packs = st.packs_deleted, run->room_bytes = st.bytes_deleted + st.tmp_bytes_deleted;
}

/* The repository's directory on the drive, opened beneath the mountpoint without following a
 * symbolic link (-ELOOP; the configuration refuses '..'): nothing on the drive may lead off it, to
 * a host repository that would get the lock, the lease and the backup. Every open of the run then
 * goes through /proc/self/fd/N: this very directory, whatever the drive says later. */
static int open_on_drive(const char *mnt, const char *repository, int *ret_fd)
{
        _cleanup_close_ int mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (mfd < 0)
                return -errno;
        int fd = bv_open_dir_beneath(mfd, repository);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

static int run_jobs(const BvConfig *c, const BvConfTarget *t, const char *mnt, const char *only_job,
                    BvTargetRun *run)
{
        _cleanup_free_ char *repo_path = NULL;
        _cleanup_close_ int repo_fd = -EBADF;
        BvSecret secret = { .key_file = t->key_file };
        /* the host's key file first: a drive is not blamed for a key file the host lost */
        if (access(t->key_file, R_OK) < 0)
                return run->step = "key file", -errno;
        int r = open_on_drive(mnt, t->repository, &repo_fd);
        if (r < 0)
                return run->step = "identify", r;
        if (asprintf(&repo_path, "/proc/self/fd/%d", repo_fd) < 0)
                return -ENOMEM;
        /* Only a repository that opens with the target's key file proves the drive is the registered
         * one: an unencrypted one would open with any key. A drive that copies the registered UUID
         * (which anyone who held the real drive can read) must get nothing: no hook runs, no lock
         * or lease is taken before this proof, and each job's open refuses a repository without a
         * cipher again from the config it reads itself (a drive can answer differently each time). */
        r = bv_repo_prove(repo_path, &secret, NULL);
        if (r < 0)
                return run->step = "identify", r;
        run->jobs = calloc(c->n_jobs ? c->n_jobs : 1, sizeof(*run->jobs));
        if (!run->jobs)
                return -ENOMEM;
        collect_for_room(c, t, only_job, repo_path, run);
        for (size_t i = 0; i < c->n_jobs; i++) {
                if (!job_runs(&c->jobs[i], t, only_job))
                        continue;
                if (bv_job_cancelled()) {
                        run->cancelled = true;
                        break;
                }
                BvTargetRunJob *rj = &run->jobs[run->n_jobs++];
                rj->job = &c->jobs[i];
                rj->progress = run->progress, rj->target_name = t->name;
                if (rj->job->mistake) { /* skipped, and reported as a failed job */
                        rj->step = "configuration", rj->result = -EINVAL;
                        snprintf(rj->detail, sizeof(rj->detail), "%s", rj->job->mistake);
                } else {
                        uint64_t start = bv_now_monotonic_ns();
                        run_job(t, repo_path, rj);
                        rj->duration_ms = (bv_now_monotonic_ns() - start) / 1000000;
                }
                run->bytes_new += rj->bytes_new, run->bytes_stored += rj->bytes_stored;
                if (rj->repo_bytes)
                        run->repo_bytes = rj->repo_bytes;
                run->n_failed += rj->result < 0;
                /* also while the last job ran; one that finished before the signal is done (the
                 * jobs after it are left out above) */
                run->cancelled |= rj->result < 0 && bv_job_cancelled();
        }
        return 0;
}

/* After the jobs: what the run wrote reaches the drive (syncfs), and the drive's filesystem is
 * still writable. One that hit I/O errors and gave up (an ext4 journal abort, an XFS shutdown, a
 * btrfs forced read-only) unmounts all the same, and "safe to unplug" would then be a lie. */
static int drive_settle(const char *mnt)
{
        _cleanup_close_ int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct statvfs sv;
        if (fd < 0 || syncfs(fd) < 0 || fstatvfs(fd, &sv) < 0)
                return -errno;
        return sv.f_flag & ST_RDONLY ? -EROFS : 0;
}

/* Mounted: the jobs (none for a restore-only drive), then the unmount. */
static int run_mounted(const BvConfig *c, const BvConfTarget *t, const char *fsdev, const char *mnt,
                       const char *only_job, BvTargetRun *run)
{
        BvDriveProbe pr;
        bool ro = t->mode == BV_TARGET_RESTORE_ONLY;
        int r = bv_drive_probe(fsdev, &pr);
        /* Only what target format makes: a stick must not choose which filesystem driver of this
         * kernel parses it (ext2 through ext4 without errors=remount-ro, or any module that loads
         * on demand). */
        if (r >= 0 && (!pr.type[0] || !bv_drive_mount_options_known(pr.type)))
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
        int q = ro ? 0 : drive_settle(mnt);
        if (q < 0 && r >= 0)
                r = q, run->step = "sync";
        if (umount2(mnt, 0) < 0 && r >= 0)
                r = -errno, run->step = "unmount";
        rmdir(mnt);
        return r;
}

/* Who holds the run lock, as run_lock recorded it in dir/targets.holder: its target into buf, the
 * remote it copies to (a copy's hold, else "") into copy, and its pid; 0 when there is no record of
 * a process that still runs. */
static int lock_holder(const char *dir, char *buf, size_t size, char *copy, size_t copy_size)
{
        _cleanup_free_ char *path = NULL, *text = NULL;
        size_t len;
        int pid = 0;
        copy[0] = '\0';
        if (asprintf(&path, "%s/targets.holder", dir) < 0 ||
            bv_read_file(AT_FDCWD, path, 4096, (void **)&text, &len) < 0)
                return 0;
        buf[0] = '\0';
        for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                if (strncmp(l, "pid=", 4) == 0)
                        pid = atoi(l + 4);
                else if (strncmp(l, "target=", 7) == 0)
                        snprintf(buf, size, "%s", l + 7);
                else if (strncmp(l, "copy=", 5) == 0)
                        snprintf(copy, copy_size, "%s", l + 5);
        if (pid <= 0 || !buf[0] || (kill(pid, 0) < 0 && errno == ESRCH))
                return 0;
        return pid;
}

/* The run lock (dir/targets.lock): one run of a drive at a time on this host. A run that must
 * wait says so once (progress->waiting), naming the holder it recorded; the holder records
 * itself (best effort: the lock, not the record, orders the runs). A remote's copy holds the lock
 * too (copy: its remote), but a backup never waits on the network: a run that finds a copy
 * holding it stops it (SIGTERM: the copy stops within a buffer and continues after the run, never
 * sending again what it finished) and takes the lock once the copy has unmounted the drive. A
 * copy waits for a run. */
static int run_lock(const char *dir, const char *target, const char *copy, const BvRunProgress *progress,
                    int *ret_fd)
{
        _cleanup_free_ char *lock = NULL, *holder = NULL;
        char who[BV_CONF_NAME_MAX + 1], whose[BV_CONF_NAME_MAX + 1], text[2 * BV_CONF_NAME_MAX + 64];
        if (asprintf(&lock, "%s/targets.lock", dir) < 0 || asprintf(&holder, "%s/targets.holder", dir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return -errno;
                int pid = lock_holder(dir, who, sizeof(who), whose, sizeof(whose));
                if (pid > 0 && whose[0] && !copy) {
                        (void)kill(pid, SIGTERM);
                        if (progress && progress->stopping_copy)
                                progress->stopping_copy(target, who, whose, pid, progress->userdata);
                } else if (progress && progress->waiting)
                        progress->waiting(target, pid ? who : NULL, pid, progress->userdata);
                if (flock(fd, LOCK_EX) < 0)
                        return -errno;
        }
        int n = snprintf(text, sizeof(text), "pid=%d\ntarget=%s\n%s%s%s", (int)getpid(), target, copy ? "copy=" : "",
                         copy ? copy : "", copy ? "\n" : "");
        _cleanup_close_ int hfd = open(holder, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (hfd >= 0 && n > 0 && (size_t)n < sizeof(text))
                (void)bv_write_all(hfd, text, (size_t)n);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* What a run or copy of this target killed with SIGKILL left (systemd's stop past its timeout, an
 * OOM kill): its mount at mnt, where it ran in this mount namespace, and its device-mapper
 * mapping, which is the kernel's and outlives every namespace. Under the run lock no blkvault
 * process uses them: both go, so that the unlock that follows does not fail on a name in use. A
 * mapping that something else holds open stays (its close fails), and the unlock says so. */
static void clear_leftovers(const char *mnt, const char *mapname)
{
        if (bv_is_mountpoint(mnt) && umount2(mnt, 0) < 0)
                (void)umount2(mnt, MNT_DETACH);
        (void)bv_luks_close(mapname); /* by device-mapper's name: /dev/mapper may lack the node (no udev) */
}

int bv_target_hold_drive(const BvConfTarget *t, const char *dev, const char *run_dir, const char *copy,
                         BvDriveHold *ret)
{
        const char *dir = run_dir ? run_dir : BV_RUN_DIR;
        char mapper[256];
        BvDriveProbe pr;

        *ret = (BvDriveHold){ .lock_fd = -EBADF, .repo_fd = -EBADF };
        if (asprintf(&ret->mnt, "%s/target-%s", dir, t->name) < 0 || asprintf(&ret->mapname, "blkvault-%s", t->name) < 0)
                return -ENOMEM;
        int r = run_lock(dir, t->name, copy, NULL, &ret->lock_fd);
        if (r < 0)
                return ret->step = "lock", r;
        clear_leftovers(ret->mnt, ret->mapname);
        const char *fsdev = dev;
        if (t->luks) {
                r = bv_luks_open(dev, ret->mapname, t->key_file, mapper, sizeof(mapper));
                if (r < 0)
                        return ret->step = "unlock", r;
                ret->luks = true;
                fsdev = mapper;
        }
        r = bv_drive_probe(fsdev, &pr);
        if (r >= 0 && (!pr.type[0] || !bv_drive_mount_options_known(pr.type)))
                r = -EMEDIUMTYPE;
        if (r < 0)
                return ret->step = "probe", r;
        if (mkdir(ret->mnt, 0700) < 0 && errno != EEXIST)
                return ret->step = "mount", -errno;
        r = bv_drive_mount(fsdev, pr.type, ret->mnt, t->fs_options, true);
        if (r < 0)
                return ret->step = "mount", r;
        ret->mounted = true;
        BvSecret secret = { .key_file = t->key_file };
        r = open_on_drive(ret->mnt, t->repository, &ret->repo_fd);
        if (r >= 0 && asprintf(&ret->repo_path, "/proc/self/fd/%d", ret->repo_fd) < 0)
                r = -ENOMEM;
        if (r >= 0) /* as a run: only the registered drive's repository is read */
                r = bv_repo_prove(ret->repo_path, &secret, NULL);
        if (r < 0)
                return ret->step = "identify", r;
        return 0;
}

int bv_target_release_drive(BvDriveHold *h, const char **ret_step)
{
        int r = 0;
        h->repo_fd = safe_close(h->repo_fd);
        if (h->mounted && umount2(h->mnt, 0) < 0) {
                /* a pulled drive: what it read is gone, its mount must go too */
                r = -errno, *ret_step = "unmount";
                (void)umount2(h->mnt, MNT_DETACH);
        }
        if (h->mnt)
                rmdir(h->mnt);
        if (h->luks) {
                int q = bv_luks_close(h->mapname);
                if (q < 0 && r >= 0)
                        r = q, *ret_step = "close";
        }
        h->lock_fd = safe_close(h->lock_fd);
        free(h->mnt), free(h->mapname), free(h->repo_path);
        *h = (BvDriveHold){ .lock_fd = -EBADF, .repo_fd = -EBADF };
        return r;
}

int bv_target_run_drive(const BvConfig *c, const BvConfTarget *t, const char *dev, const char *only_job,
                        const char *run_dir, const BvRunProgress *progress, BvTargetRun *ret)
{
        _cleanup_free_ char *mnt = NULL, *mapname = NULL;
        _cleanup_close_ int lfd = -EBADF;
        char mapper[256];
        const char *dir = run_dir ? run_dir : BV_RUN_DIR;

        uint64_t start = bv_now_monotonic_ns();
        *ret = (BvTargetRun){ .target = t, .device = dev, .progress = progress };
        if (asprintf(&mnt, "%s/target-%s", dir, t->name) < 0 || asprintf(&mapname, "blkvault-%s", t->name) < 0)
                return ret->result = -ENOMEM;
        int lr = run_lock(dir, t->name, NULL, progress, &lfd);
        if (lr < 0)
                return ret->step = "lock", ret->result = lr;
        clear_leftovers(mnt, mapname);
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
        ret->duration_ms = (bv_now_monotonic_ns() - start) / 1000000;
        return ret->result = r;
}

void bv_target_run_done(BvTargetRun *run)
{
        for (size_t i = 0; run->jobs && i < run->n_jobs; i++)
                bv_libvirt_result_done(&run->jobs[i].libvirt);
        free(run->jobs);
        run->jobs = NULL;
}
