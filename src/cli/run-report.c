/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a run of a drive leaves: a line per job and the one-line summary ("safe to unplug") on
 * stdout, the journal entry with structured fields, sd_notify STATUS, the state files that
 * `blkvault status` and the age alarm read, and the operator's on-success / on-failure commands.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sd-dl.h" /* libsystemd loaded on first use */
#include "drive.h"
#include "hooks.h"
#include "notify.h"
#include "run.h"
#include "state.h"
#include "timeutil.h"

#define BV_MESSAGE_ID_TARGET_RUN "MESSAGE_ID=3f1c9a0e6b2d4c5e8a7f01b2c3d4e5f6"

/* "backup failed: No such file or directory", "pre failed: exit status 3" */
void describe_failure(const char *step, int result, int status, char *buf, size_t size)
{
        if (strcmp(step, "jobs") == 0)
                snprintf(buf, size, "%d %s failed", status, status == 1 ? "job" : "jobs");
        else if (strcmp(step, "cancelled") == 0)
                snprintf(buf, size, "cancelled");
        else if (strcmp(step, "source") == 0)
                snprintf(buf, size, "cannot open its source: %s", strerror(-result));
        else if (strcmp(step, "configuration") == 0)
                snprintf(buf, size, "not run: its section of the configuration has a mistake");
        else if (strcmp(step, "probe") == 0 && result == -EMEDIUMTYPE)
                snprintf(buf, size, "its filesystem is not one that target format makes (ext4, xfs or btrfs): "
                                    "refused, nothing was mounted");
        else if (result == -ECHILD && status > 0)
                snprintf(buf, size, "%s failed: exit status %d", step, status);
        else if (result == -EKEYREJECTED)
                snprintf(buf, size, "%s failed: the repository is not encrypted (refused: it opens with any key)",
                         step);
        else
                snprintf(buf, size, "%s failed: %s", step, strerror(-result));
}

/* What an interrupted backup left: "interrupted by SIGTERM: nothing was published; it kept 160.3 MiB in
 * 5 packs, which the next backup continues from" (a plain backup's error and a run's job line);
 * "cancelled: ..." when no signal was caught. */
void describe_interrupt(uint64_t kept_packs, uint64_t kept_bytes, char *buf, size_t size)
{
        char a[32], how[32] = "cancelled";
        const char *sig = interrupted ? sigabbrev_np(interrupted) : NULL;

        if (sig)
                snprintf(how, sizeof(how), "interrupted by SIG%s", sig);
        if (kept_packs == 0)
                snprintf(buf, size, "%s: nothing was published or kept", how);
        else
                snprintf(buf, size, "%s: nothing was published; it kept %s in %llu packs, which the next backup "
                         "continues from", how, format_bytes(kept_bytes, a), (unsigned long long)kept_packs);
}

int run_hook(const char *what, const char *cmd, const char *job, const char *target, bool ok, const char *summary)
{
        _cleanup_free_ char *vj = NULL, *vt = NULL, *vr = NULL, *vs = NULL;
        if (!cmd)
                return 0;
        if ((job && asprintf(&vj, "BLKVAULT_JOB=%s", job) < 0) ||
            (target && asprintf(&vt, "BLKVAULT_TARGET=%s", target) < 0) ||
            asprintf(&vr, "BLKVAULT_RESULT=%s", ok ? "ok" : "failed") < 0 ||
            asprintf(&vs, "BLKVAULT_SUMMARY=%s", summary) < 0)
                return -ENOMEM;
        const char *vars[5] = {}, **v = vars;
        *v++ = vr, *v++ = vs;
        if (vj)
                *v++ = vj;
        if (vt)
                *v++ = vt;
        fflush(stdout);
        int r = bv_hook_run(cmd, vars);
        if (r > 0)
                log_warning("%s exited with status %d", what, r);
        else if (r < 0)
                log_warning("cannot run %s: %s", what, strerror(-r));
        return r;
}

/* A thin volume's job: what it read, and why everything when it did not use the delta. */
static void report_thin(const BvTargetRunJob *j)
{
        char a[32], b[32];

        if (j->read_whole_because[0])
                log_warning("job %s: thin delta not used, read everything: %s", j->job->name, j->read_whole_because);
        printf("job %s: read %s of %s (%llu bytes)%s\n", j->job->name, format_bytes(j->bytes_read, a),
               format_bytes(j->size, b), (unsigned long long)j->bytes_read,
               j->read_whole_because[0] ? "" : " with the thin delta");
}

/* A job with used-only = yes: what it read and did not, or why it read everything. */
static void report_used(const BvTargetRunJob *j)
{
        char a[32], b[32], c[32];

        if (j->used_why[0])
                log_warning("job %s: read whole, not only its used blocks: %s", j->job->name, j->used_why);
        else
                printf("job %s: read %s of %s (%llu bytes), only the used blocks: %s free not read\n", j->job->name,
                       format_bytes(j->bytes_read, a), format_bytes(j->size, b), (unsigned long long)j->bytes_read,
                       format_bytes(j->bytes_free_skipped, c));
}

/* A job that succeeded after an interrupted run of it (recorded in prev) or after a killed
 * backup's packs were adopted: says it continued, unless gc deleted what it could continue from. */
static void report_continued(const BvTargetRun *run, const BvTargetRunJob *j, const BvRunState *prev, bool had_prev)
{
        char a[32];

        if (j->result < 0 || run->room_bytes > 0 || j->room_bytes > 0)
                return;
        if (j->resumed_packs > 0)
                printf("job %s: continued from what a killed backup left (%s in %llu packs)\n", j->job->name,
                       format_bytes(j->resumed_bytes, a), (unsigned long long)j->resumed_packs);
        else if (had_prev && prev->result == -ECANCELED && strcmp(prev->step, "backup") == 0 &&
                 prev->numbers.bytes_stored > 0)
                printf("job %s: continued from what the interrupted run kept (%s)\n", j->job->name,
                       format_bytes(prev->numbers.bytes_stored, a));
}

/* A job's disk image that did not open, in the words backup uses: true when there are some. */
static bool source_image_message(const BvTargetRunJob *j, char *buf, size_t size)
{
        const BvConfJob *job = j->job;
        const char *format = job->image_format;

        if (job->as_file || bv_conf_job_command(job) || job->snapshot)
                return false;
        if (!format && bv_source_detect_image(job->source, &format) <= 0)
                return false;
        return image_open_message(j->result, job->source, format, j->source_detail, true, buf, size);
}

/* A libvirt job's disks that were published: a line each (its snapshot, what it read, whether
 * only what changed since its parent's checkpoint), into disks for the state file; their number.
 * Then what the backup tidied in libvirt. */
static size_t report_libvirt(const BvTargetRunJob *j, uint64_t now, BvRunDisk *disks)
{
        const BvLibvirtResult *res = &j->libvirt;
        size_t n = 0;
        char a[32], b[32], c[32];

        report_libvirt_freeze(res, j->job->name);
        for (size_t i = 0; i < res->n_disks; i++) {
                const BvLibvirtDiskResult *dk = &res->disks[i];
                const BvBackupStats *s = &dk->stats;
                bool inc = s->changed_from[0] != 0;
                if (dk->error < 0 || !s->snapshot_id[0])
                        continue;
                printf("job %s: disk %s: snapshot %.8s (%s), %s disk, %s read, %s new, %s%s%s\n", j->job->name,
                       dk->target, s->snapshot_id, dk->name, format_bytes(s->size, a),
                       format_bytes(s->counts.bytes_read, b), format_bytes(s->counts.bytes_new, c),
                       inc ? "incremental from checkpoint '" : "read whole", inc ? dk->incremental : "",
                       inc ? "'" : "");
                if (!inc && s->changed_reason[0])
                        printf("job %s: disk %s: read whole: %s\n", j->job->name, dk->target, s->changed_reason);
                if (n == BV_STATE_DISKS_MAX)
                        continue;
                BvRunDisk *d = &disks[n++];
                *d = (BvRunDisk){ .when = now, .incremental = inc };
                snprintf(d->disk, sizeof(d->disk), "%s", dk->target);
                snprintf(d->snapshot, sizeof(d->snapshot), "%s", s->snapshot_id);
                snprintf(d->name, sizeof(d->name), "%s", dk->name);
        }
        if (res->domain[0])
                report_libvirt_tidy(res, res->domain);
        return n;
}

/* The job's line of the report: what went wrong, or the snapshot; the room gc made when the drive
 * was full. */
static void job_line(const BvTargetRun *run, const BvTargetRunJob *j, char *line, size_t size)
{
        const char *t = run->target->name, *name = j->job->name;
        char b[32], why[1200];

        if (j->room_collected && j->room_result < 0)
                log_warning("target %s: job %s: the drive is full and gc failed: %s", t, name, strerror(-j->room_result));
        else if (j->room_bytes > 0)
                printf("job %s: the drive was full: gc deleted %llu packs, %s%s\n", name,
                       (unsigned long long)j->room_packs, format_bytes(j->room_bytes, b),
                       j->ran_again ? ", and the backup ran again" : " (the next run has the room)");
        if (j->result < 0) {
                if (strcmp(j->step, "source") == 0 && source_image_message(j, why, sizeof(why)))
                        ;
                else if (strcmp(j->step, "source") == 0)
                        snprintf(why, sizeof(why), "cannot open its source '%s': %s", j->detail, strerror(-j->result));
                else if (strcmp(j->step, "backup") == 0 && j->result == -ECANCELED)
                        describe_interrupt(j->kept_packs, j->kept_bytes, why, sizeof(why));
                else {
                        describe_failure(j->step, j->result, j->status, why, sizeof(why));
                        if (j->detail[0])
                                snprintf(why + strlen(why), sizeof(why) - strlen(why), " (%s)", j->detail);
                }
                snprintf(line, size, "job %s on %s: %s", name, t, why);
                log_error("target %s: job %s: %s", t, name, why);
        } else if (bv_conf_job_libvirt(j->job)) {
                snprintf(line, size, "job %s on %s: domain %s, %zu %s, %s new, verified", name, t,
                         j->libvirt.domain, j->libvirt.n_disks, j->libvirt.n_disks == 1 ? "disk" : "disks",
                         format_bytes(j->bytes_new, b));
                printf("job %s: domain %s, %zu %s, %s new, verified\n", name, j->libvirt.domain, j->libvirt.n_disks,
                       j->libvirt.n_disks == 1 ? "disk" : "disks", format_bytes(j->bytes_new, b));
        } else {
                snprintf(line, size, "job %s on %s: snapshot %.8s, %s new, verified", name, t, j->snapshot_id,
                         format_bytes(j->bytes_new, b));
                printf("job %s: snapshot %.8s, %s new, verified\n", name, j->snapshot_id, format_bytes(j->bytes_new, b));
        }
}

static void report_job(const BvTargetRun *run, const BvTargetRunJob *j, const BvConfig *conf, const char *state_dir,
                       uint64_t now)
{
        const char *t = run->target->name, *name = j->job->name;
        char b[32], line[800], what[160], subject[BV_NOTIFY_SUBJECT_MAX];
        /* a failed backup's kept packs are what it stored: the next run says it continued from them */
        BvRunNumbers numbers = { .duration_ms = j->duration_ms, .bytes_new = j->bytes_new,
                                 .bytes_stored = j->result < 0 ? j->kept_bytes : j->bytes_stored,
                                 .repo_bytes = j->repo_bytes };
        BvRunState prev;
        bool had_prev = bv_state_read(state_dir, name, t, &prev) >= 0;

        BvRunDisk disks[BV_STATE_DISKS_MAX];
        size_t n_disks = 0;

        report_continued(run, j, &prev, had_prev);
        if (bv_conf_job_libvirt(j->job))
                n_disks = report_libvirt(j, now, disks);
        job_line(run, j, line, sizeof(line));
        if (j->thin && j->snapshot_id[0])
                report_thin(j);
        if (j->used_only && j->snapshot_id[0])
                report_used(j);
        if (j->pruned && j->packs_deleted > 0)
                printf("job %s: retention kept %zu snapshots, forgot %zu; gc deleted %llu packs, %s\n", name, j->kept,
                       j->forgotten, (unsigned long long)j->packs_deleted, format_bytes(j->bytes_deleted, b));
        else if (j->pruned) /* nothing deleted: nothing to say of gc */
                printf("job %s: retention kept %zu snapshots, forgot %zu\n", name, j->kept, j->forgotten);
        int r = bv_state_record(state_dir, name, t, now, j->result, j->step, j->status, j->snapshot_id, &numbers,
                                disks, n_disks);
        if (r < 0)
                log_warning("cannot record the run of job %s in '%s': %s", name, state_dir, strerror(-r));
        snprintf(subject, sizeof(subject), "job-%s@%s", name, t);
        notify_change(conf, state_dir, subject, j->result < 0, false, name, t, line);
        snprintf(what, sizeof(what), "the %s command of job %s", j->result < 0 ? "on-failure" : "on-success", name);
        run_hook(what, j->result < 0 ? j->job->on_failure : j->job->on_success, name, t, j->result >= 0, line);
}

static void run_summary(const BvTargetRun *run, char *line, size_t size)
{
        const BvConfTarget *t = run->target;
        char b[32], why[256];
        const char *off = run->powered_off ? "; powered off" : "";

        if (run->result == -EKEYREJECTED && strcmp(run->step, "identify") == 0)
                snprintf(line, size,
                         "target %s: the repository '%s' on the drive is not encrypted, so it is not the one "
                         "registered with key file '%s' (a drive that only pretends to be %s?); nothing was written",
                         t->name, t->repository, t->key_file, t->name);
        else if (run->result == -ENOKEY && strcmp(run->step, "identify") == 0)
                snprintf(line, size,
                         "target %s: the repository '%s' on the drive does not open with key file '%s' (a drive "
                         "that only pretends to be %s?); nothing was written",
                         t->name, t->repository, t->key_file, t->name);
        else if (run->result == -ELOOP && strcmp(run->step, "identify") == 0)
                snprintf(line, size,
                         "target %s: the repository '%s' on the drive is reached through a symbolic link, which may "
                         "lead off the drive (refused); nothing was written",
                         t->name, t->repository);
        else if (run->result < 0 && strcmp(run->step, "key file") == 0)
                snprintf(line, size, "target %s: cannot read its key file '%s' (%s); nothing was written", t->name,
                         t->key_file, strerror(-run->result));
        else if (run->result < 0 && strcmp(run->step, "identify") == 0)
                snprintf(line, size,
                         "target %s: cannot prove that the drive is the registered one: its repository '%s' does "
                         "not open (%s); nothing was written",
                         t->name, t->repository, strerror(-run->result));
        else if (run->result < 0 && strcmp(run->step, "sync") == 0)
                snprintf(line, size,
                         "target %s: %zu jobs, %zu failed, %s new, but the drive's filesystem failed at the end (%s): "
                         "it was unmounted, but not all the run wrote may be on the drive: check it (fsck) before "
                         "trusting it",
                         t->name, run->n_jobs, run->n_failed, format_bytes(run->bytes_new, b), strerror(-run->result));
        else if (run->result < 0) {
                describe_failure(run->step, run->result, 0, why, sizeof(why));
                snprintf(line, size, "target %s: %s", t->name, why);
        } else if (t->mode == BV_TARGET_RESTORE_ONLY)
                snprintf(line, size, "target %s: restore-only, mounted read-only and nothing written%s; safe to unplug",
                         t->name, off);
        else
                snprintf(line, size, "target %s: %s%zu jobs, %zu failed, %s new%s; safe to unplug", t->name,
                         run->cancelled ? "cancelled, " : "", run->n_jobs, run->n_failed,
                         format_bytes(run->bytes_new, b), off);
}

int report_run(const BvTargetRun *run, const BvConfig *conf, const char *state_dir)
{
        const BvConfTarget *t = run->target;
        const char *result = run->result < 0 ? "failed" : run->n_failed > 0 || run->cancelled ? "partial" : "ok";
        uint64_t now = bv_now_realtime_ns() / 1000000000ull;
        bool ok = run->result >= 0 && run->n_failed == 0 && !run->cancelled;
        char line[600], what[160], subject[BV_NOTIFY_SUBJECT_MAX];
        BvRunNumbers numbers = { .duration_ms = run->duration_ms, .bytes_new = run->bytes_new,
                                 .bytes_stored = run->bytes_stored, .repo_bytes = run->repo_bytes };

        state_dir = bv_state_dir(state_dir);
        if (run->room_collected && run->room_result < 0)
                log_warning("target %s: the drive is short of room and gc failed before the jobs: %s, ignoring", t->name,
                            strerror(-run->room_result));
        else if (run->room_collected && run->room_bytes > 0) /* nothing deleted: nothing to say */
                printf("target %s: the drive was short of room: gc deleted %llu packs, %s before the jobs\n", t->name,
                       (unsigned long long)run->room_packs, format_bytes(run->room_bytes, line));
        for (size_t i = 0; i < run->n_jobs; i++)
                report_job(run, &run->jobs[i], conf, state_dir, now);
        run_summary(run, line, sizeof(line));
        sd_journal_send("MESSAGE=%s", line, BV_MESSAGE_ID_TARGET_RUN, "PRIORITY=%d", ok ? 5 : 3, "TARGET=%s", t->name,
                        "JOBS=%zu", run->n_jobs, "BYTES=%llu", (unsigned long long)run->bytes_new, "RESULT=%s", result,
                        NULL);
        sd_notifyf(false, "STATUS=%s", line);
        int r = bv_state_record(state_dir, t->name, NULL, now, ok ? 0 : run->result < 0 ? run->result : -EIO,
                                run->result < 0 ? run->step : run->cancelled ? "cancelled" : "jobs", (int)run->n_failed,
                                NULL, &numbers, NULL, 0);
        if (r < 0)
                log_warning("cannot record the run of target %s in '%s': %s", t->name, state_dir, strerror(-r));
        write_metrics(conf, state_dir);
        snprintf(subject, sizeof(subject), "target-%s", t->name);
        notify_change(conf, state_dir, subject, run->result < 0, false, NULL, t->name, line);
        if (run->result < 0)
                log_error("%s", line);
        else
                printf("%s\n", line);
        bool own = ok ? !!t->on_success : !!t->on_failure;
        snprintf(what, sizeof(what), "the %s command of %s%s", ok ? "on-success" : "on-failure",
                 own ? "target " : "[global]", own ? t->name : "");
        run_hook(what, own ? (ok ? t->on_success : t->on_failure) : (ok ? conf->on_success : conf->on_failure), NULL,
                 t->name, ok, line);
        if (run->result < 0)
                return exit_code_for(run->result);
        return ok ? EXIT_OK : EXIT_ERROR;
}

/* Does the run hold new snapshots for remote rm: a job that succeeded and copies to it, or any
 * job that succeeded on a target that copies everything to it? */
static bool run_feeds(const BvTargetRun *run, const BvConfRemote *rm)
{
        for (size_t i = 0; i < run->n_jobs; i++)
                if (run->jobs[i].result >= 0 && (bv_conf_target_copies_all(run->target, rm->name) ||
                                                  bv_conf_job_copies_to(run->jobs[i].job, rm->name)))
                        return true;
        return false;
}

void request_copies(const BvTargetRun *run, const BvConfig *conf)
{
        /* a run that failed before its jobs wrote nothing new; the timer still copies what is there */
        for (size_t i = 0; run->result >= 0 && i < conf->n_remotes; i++) {
                const BvConfRemote *rm = &conf->remotes[i];
                _cleanup_free_ char *unit = NULL;
                char out[512] = "";
                if (!run_feeds(run, rm))
                        continue;
                if (rm->mistake) {
                        log_warning("target %s: not copied to %s: its section has a mistake (%s)", run->target->name,
                                    rm->name, rm->mistake);
                        continue;
                }
                if (asprintf(&unit, "blkvault-copy@%s.service", rm->name) < 0)
                        return;
                char *argv[] = { (char *)"systemctl", (char *)"start", (char *)"--no-block", unit, NULL };
                fflush(stdout);
                int r = bv_target_run(argv, out, sizeof(out));
                if (r != 0) {
                        char why[300];
                        out[strcspn(out, "\n")] = '\0';
                        if (r < 0)
                                snprintf(why, sizeof(why), "%s", strerror(-r));
                        else
                                snprintf(why, sizeof(why), "systemctl: exit status %d%s%s", r, *out ? ": " : "", out);
                        log_warning("target %s: cannot start %s (%s): blkvault-copy@%s.timer copies later",
                                    run->target->name, unit, why, rm->name);
                        continue;
                }
                printf("target %s: its new snapshots go off-site to %s next (%s): it reads the drive, mounted "
                       "read-only; unplugging stops it, and it continues at the next plug-in\n",
                       run->target->name, rm->name, unit);
        }
}
