/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault status [--json] [--check-age]: for each target and job what the runs recorded (the
 * state files, state.h), the next scheduled run, and the age alarm: a job is in alarm when no
 * drive it may run on has a good backup younger than its max-age; for each remote its copies, in
 * alarm when no drive copied to it has a copy that completed within the remote's max-age. --check-age (run by
 * blkvault-alarm.timer) logs each alarm as a journal warning and runs on-failure, tells notify
 * of each alarm that began or ended (once), and writes the metrics textfile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "notify.h"
#include "schedule.h"
#include "state.h"
#include "timeutil.h"
#include <systemd/sd-journal.h>

#define BV_MESSAGE_ID_AGE_ALARM "MESSAGE_ID=8d2e4b7c1a9f4e3d9c6b5a4f3e2d1c0b"

static const char usage_text[] =
        "Usage: blkvault status [--json] [--check-age] [--config=FILE] [--state-dir=DIR]\n\n"
        "For each registered drive (target) and job: the last run and its result, the last good\n"
        "backup and its age, the next scheduled run, and the age alarm: a job is in alarm when no\n"
        "drive it may run on has a good backup younger than its max-age (default 7d). For each\n"
        "off-site remote: the last copy, the last good copy and its age, and the same alarm over\n"
        "the drives copied to it. A job of a libvirt domain shows each disk's last good backup\n"
        "(its snapshot, and whether it was incremental).\n\n"
        "  --json                   print a JSON object (targets, jobs, remotes)\n"
        "  --check-age              for each job or remote in alarm, log a warning to the journal and run its\n"
        "                           on-failure command (else [global]'s), tell [global] notify of an\n"
        "                           alarm that began or ended, write the metrics; exit status 11 if any\n"
        "  --config=FILE            the configuration (also $" BV_CONF_ENV ")\n"
        "  --state-dir=DIR          where runs are recorded (default " BV_STATE_DIR ", also $" BV_STATE_ENV ")\n"
        COMMON_OPTIONS_HELP;

typedef struct StatusArgs {
        const char *config, *state_dir;
        bool json, check_age;
} StatusArgs;

/* "3d 4h", "5min", "12s" */
static const char *format_age(uint64_t s, char buf[32])
{
        if (s >= 86400)
                snprintf(buf, 32, "%llud %lluh", (unsigned long long)(s / 86400), (unsigned long long)(s % 86400 / 3600));
        else if (s >= 3600)
                snprintf(buf, 32, "%lluh %llumin", (unsigned long long)(s / 3600), (unsigned long long)(s % 3600 / 60));
        else if (s >= 60)
                snprintf(buf, 32, "%llumin", (unsigned long long)(s / 60));
        else
                snprintf(buf, 32, "%llus", (unsigned long long)s);
        return buf;
}

static struct json_object *json_time(uint64_t t)
{
        char buf[32];
        if (t == 0)
                return NULL;
        bv_format_time_utc(t, buf);
        return json_object_new_string(buf);
}

/* Appends name to the list in buf ("a, b"). */
static void list_add(char *buf, size_t size, const char *name)
{
        size_t n = strlen(buf);
        snprintf(buf + n, size - n, "%s%s", n ? ", " : "", name);
}

/* What plugging in t will do: "back up a, b (then prune: a) and verify, unmount and lock" (no
 * "lock" for a drive without LUKS). */
static void describe_plug(const BvConfig *c, const BvConfTarget *t, char *buf, size_t size)
{
        char jobs[512] = "", prune[512] = "", bad[512] = "";
        if (t->mistake) {
                snprintf(buf, size, "nothing: its section has a mistake (the run fails)");
                return;
        }
        if (t->mode == BV_TARGET_RESTORE_ONLY) {
                snprintf(buf, size, "mount it read-only and write nothing, unmount%s%s", t->luks ? " and lock" : "",
                         t->power_off ? ", power off" : "");
                return;
        }
        for (size_t i = 0; i < c->n_jobs; i++) {
                const BvConfJob *j = &c->jobs[i];
                if (!bv_conf_job_wants(j, t->name))
                        continue;
                list_add(j->mistake ? bad : jobs, sizeof(jobs), j->name);
                if (!j->mistake && bv_conf_job_prunes(j))
                        list_add(prune, sizeof(prune), j->name);
        }
        /* a drive without LUKS (target format --no-luks) is only unmounted */
        snprintf(buf, size, "%s%s%s%s%s%s, unmount%s%s", jobs[0] ? "back up and verify " : "back up nothing",
                 jobs, prune[0] ? ", prune and collect garbage for " : "", prune,
                 bad[0] ? ", report as failed (a mistake in their sections) " : "", bad, t->luks ? " and lock" : "",
                 t->power_off ? ", power off" : "");
}

static void print_target(const BvConfig *c, const BvConfTarget *t, const BvRunState *s, bool ran,
                         struct json_object *arr)
{
        char when[32], why[256] = "", plug[1600];
        describe_plug(c, t, plug, sizeof(plug));
        if (ran && s->result < 0)
                describe_failure(s->step, s->result, s->status, why, sizeof(why));
        if (arr) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "name", json_object_new_string(t->name));
                json_object_object_add(o, "mode", json_object_new_string(t->mode == BV_TARGET_RESTORE_ONLY ?
                                                                                  "restore-only" : "backup"));
                json_object_object_add(o, "last_run", ran ? json_time(s->last_run) : NULL);
                json_object_object_add(o, "result", !ran ? NULL : json_object_new_string(s->result < 0 ? "failed" : "ok"));
                json_object_object_add(o, "error", *why ? json_object_new_string(why) : NULL);
                json_object_object_add(o, "mistake", t->mistake ? json_object_new_string(t->mistake) : NULL);
                json_object_object_add(o, "plugged_in", json_object_new_string(plug));
                json_object_array_add(arr, o);
                return;
        }
        if (!ran)
                printf("target %s: never run\n", t->name);
        else {
                bv_format_time_utc(s->last_run, when);
                printf("target %s: last run %s: %s\n", t->name, when, s->result < 0 ? why : "ok");
        }
        if (t->mistake)
                printf("target %s: skipped: its section has a mistake (%s)\n", t->name, t->mistake);
        printf("target %s: plugged in, it will %s\n", t->name, plug);
}

/* The object of a job or remote: its name, then its runs (or copies) over the targets, its age. */
static struct json_object *runs_json(const char *name, const BvJobStatus *st, uint64_t max_age, uint64_t now)
{
        char why[256] = "";
        bool ran = st->last.last_run > 0;
        if (ran && st->last.result < 0)
                describe_failure(st->last.step, st->last.result, st->last.status, why, sizeof(why));
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "last_run", ran ? json_time(st->last.last_run) : NULL);
        json_object_object_add(o, "last_run_target", ran ? json_object_new_string(st->last_target) : NULL);
        json_object_object_add(o, "result", !ran ? NULL : json_object_new_string(st->last.result < 0 ? "failed" : "ok"));
        json_object_object_add(o, "error", *why ? json_object_new_string(why) : NULL);
        json_object_object_add(o, "last_good", json_time(st->last_good));
        json_object_object_add(o, "last_good_target", st->last_good ? json_object_new_string(st->good_target) : NULL);
        json_object_object_add(o, "age_seconds", st->last_good && now >= st->last_good ?
                                                         json_object_new_uint64(now - st->last_good) : NULL);
        json_object_object_add(o, "max_age_seconds", json_object_new_uint64(max_age));
        return o;
}

/* A libvirt job's disks: each one's last good backup (over the targets). */
static struct json_object *disks_json(const BvJobStatus *st)
{
        struct json_object *a = json_object_new_array();
        for (size_t i = 0; a && i < st->n_disks; i++) {
                const BvRunDisk *d = &st->disks[i];
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "disk", json_object_new_string(d->disk));
                json_object_object_add(o, "name", json_object_new_string(d->name));
                json_object_object_add(o, "snapshot", json_object_new_string(d->snapshot));
                json_object_object_add(o, "last_good", json_time(d->when));
                json_object_object_add(o, "last_good_target", json_object_new_string(st->disk_targets[i]));
                json_object_object_add(o, "incremental", json_object_new_boolean(d->incremental));
                json_object_array_add(a, o);
        }
        return a;
}

static void job_json(const BvConfJob *j, const BvJobStatus *st, const char *next, uint64_t now, struct json_object *arr)
{
        struct json_object *o = runs_json(j->name, st, j->max_age, now);
        if (bv_conf_job_libvirt(j))
                json_object_object_add(o, "disks", disks_json(st));
        json_object_object_add(o, "schedule", j->schedule ? json_object_new_string(j->schedule) : NULL);
        json_object_object_add(o, "next_run", next ? json_object_new_string(next) : NULL);
        json_object_object_add(o, "alarm", json_object_new_boolean(st->alarm));
        json_object_object_add(o, "mistake", j->mistake ? json_object_new_string(j->mistake) : NULL);
        json_object_array_add(arr, o);
}

/* job NAME (SOURCE): last run TIME on TARGET: ok; last good backup TIME on TARGET (AGE old); next
 * run NEXT; max-age 7d: ok|ALARM. SOURCE: the path it backs up, or "command" for a command's
 * output (the command itself may be long, or hold what status should not print). */
/* "last run TIME on TARGET: ok; last good backup TIME on TARGET (AGE old); " of a job, or of a
 * remote "last copy TIME of TARGET: ...; last good copy ...; " (remote). */
static void runs_text(const BvJobStatus *st, uint64_t now, bool remote)
{
        char when[32], good[32], age[32], why[256];
        const char *run = remote ? "copy" : "run", *on = remote ? "of" : "on", *what = remote ? "copy" : "backup";
        if (st->last.last_run == 0)
                printf("%s; ", remote ? "never copied to" : "never run");
        else {
                bv_format_time_utc(st->last.last_run, when);
                if (st->last.result < 0)
                        describe_failure(st->last.step, st->last.result, st->last.status, why, sizeof(why));
                printf("last %s %s %s %s: %s; ", run, when, on, st->last_target, st->last.result < 0 ? why : "ok");
        }
        if (st->last_good == 0)
                printf("no good %s; ", what);
        else {
                bv_format_time_utc(st->last_good, good);
                printf("last good %s %s %s %s (%s old); ", what, good, on, st->good_target,
                       format_age(now > st->last_good ? now - st->last_good : 0, age));
        }
}

/* job NAME (SOURCE): last run TIME on TARGET: ok; last good backup TIME on TARGET (AGE old); next
 * run NEXT; max-age 7d: ok|ALARM. SOURCE: the path it backs up, or "command" for a command's
 * output (the command itself may be long, or hold what status should not print). */
static void job_text(const BvConfJob *j, const BvJobStatus *st, const char *next, uint64_t now)
{
        char max[32];
        bv_conf_format_duration(j->max_age, max);
        _cleanup_free_ char *source = j->source && !bv_conf_job_command(j) ? escape_text(j->source, 0) : NULL;
        printf("job %s (%s): ", j->name, source ? source : bv_conf_job_command(j) ? "command" : "no source");
        runs_text(st, now, false);
        printf("next run %s; max-age %s: %s\n", next ? next : j->schedule ? "never" : "not scheduled", max,
               st->alarm ? "ALARM" : "ok");
        for (size_t i = 0; bv_conf_job_libvirt(j) && i < st->n_disks; i++) {
                const BvRunDisk *d = &st->disks[i];
                char when[32];
                bv_format_time_utc(d->when, when);
                printf("job %s: disk %s: last good backup %s on %s: snapshot %.8s (%s), %s\n", j->name, d->disk, when,
                       st->disk_targets[i], d->snapshot, d->name, d->incremental ? "incremental" : "full");
        }
        if (j->mistake)
                printf("job %s: skipped: its section has a mistake (%s)\n", j->name, j->mistake);
}

/* Tells notify of the job's alarm once, and once more when it is over. */
static void check_age_notify(const BvConfig *c, const BvConfJob *j, bool alarm, const char *line, const char *dir)
{
        char subject[BV_NOTIFY_SUBJECT_MAX], ok[256];
        snprintf(subject, sizeof(subject), "alarm-%s", j->name);
        if (!alarm)
                snprintf(ok, sizeof(ok), "job %s: a good backup within its max-age again", j->name);
        notify_change(c, dir, subject, alarm, true, j->name, NULL, alarm ? line : ok);
}

/* An alarm's line, "WHAT within its max-age of M (last good: TIME SEP TARGET)", logged and sent
 * to the journal with FIELD=NAME, into line. */
static void alarm_announce(const char *field, const char *name, const char *what, const char *sep, uint64_t max_age,
                           const BvJobStatus *st, char *line, size_t size)
{
        char max[32], good[32] = "never";
        bv_conf_format_duration(max_age, max);
        if (st->last_good)
                bv_format_time_utc(st->last_good, good);
        snprintf(line, size, "%s within its max-age of %s (last good: %s%s%s)", what, max, good,
                 st->last_good ? sep : "", st->last_good ? st->good_target : "");
        log_warning("%s", line);
        sd_journal_send("MESSAGE=%s", line, BV_MESSAGE_ID_AGE_ALARM, "PRIORITY=4", "%s=%s", field, name,
                        "MAX_AGE=%llu", (unsigned long long)max_age, "LAST_GOOD=%s", good,
                        "LAST_GOOD_TARGET=%s", st->last_good ? st->good_target : "", NULL);
}

/* The warning and on-failure of a job in alarm, and the notification of a change. */
static void alarm_job(const BvConfig *c, const BvConfJob *j, const BvJobStatus *st, const char *dir)
{
        char line[512], what[256];
        snprintf(what, sizeof(what), "job %s: no good backup on any drive", j->name);
        alarm_announce("JOB", j->name, what, " on ", j->max_age, st, line, sizeof(line));
        snprintf(what, sizeof(what), "the on-failure command of %s%s", j->on_failure ? "job " : "[global]",
                 j->on_failure ? j->name : "");
        run_hook(what, j->on_failure ? j->on_failure : c->on_failure, j->name, NULL, false, line);
        check_age_notify(c, j, true, line, dir);
}

/* The newest notification: "last notification: TIME: EVENT of SUBJECT: SUMMARY". */
static void print_notified(const char *dir, struct json_object *top)
{
        char subject[BV_NOTIFY_SUBJECT_MAX], when[32];
        BvNotified n;
        int r = bv_notify_latest(dir, subject, &n);
        if (r < 0 && r != -ENOENT)
                log_warning("cannot read the notifications in '%s': %s, ignoring", dir, strerror(-r));
        if (r >= 0)
                bv_format_time_utc(n.when, when);
        if (top) {
                struct json_object *o = NULL;
                if (r >= 0) {
                        o = json_object_new_object();
                        json_object_object_add(o, "time", json_time(n.when));
                        json_object_object_add(o, "event", json_object_new_string(n.event));
                        json_object_object_add(o, "subject", json_object_new_string(subject));
                        json_object_object_add(o, "summary", json_object_new_string(n.summary));
                }
                json_object_object_add(top, "last_notification", o);
        } else if (r >= 0)
                printf("last notification: %s: %s of %s: %s\n", when, n.event, subject, n.summary);
        else
                printf("last notification: none\n");
}

/* remote NAME (LOCATION): last copy TIME of TARGET: ok; last good copy TIME of TARGET (AGE old);
 * max-age 7d: ok|ALARM */
static void remote_text(const BvConfRemote *rm, const BvJobStatus *st, uint64_t now)
{
        char max[32];
        bv_conf_format_duration(rm->max_age, max);
        printf("remote %s (%s): ", rm->name, rm->location ? rm->location : "no location");
        runs_text(st, now, true);
        printf("max-age %s: %s\n", max, st->alarm ? "ALARM" : "ok");
        if (rm->mistake)
                printf("remote %s: skipped: its section has a mistake (%s)\n", rm->name, rm->mistake);
}

static void remote_json(const BvConfRemote *rm, const BvJobStatus *st, uint64_t now, struct json_object *arr)
{
        struct json_object *o = runs_json(rm->name, st, rm->max_age, now);
        json_object_object_add(o, "location", rm->location ? json_object_new_string(rm->location) : NULL);
        json_object_object_add(o, "alarm", json_object_new_boolean(st->alarm));
        json_object_object_add(o, "mistake", rm->mistake ? json_object_new_string(rm->mistake) : NULL);
        json_object_array_add(arr, o);
}

/* The warning, [global] on-failure and notification of a remote in alarm (or of its end). */
static void alarm_remote(const BvConfig *c, const BvConfRemote *rm, const BvJobStatus *st, const char *dir)
{
        char line[512], what[256], subject[BV_NOTIFY_SUBJECT_MAX];
        snprintf(subject, sizeof(subject), "alarm-remote-%s", rm->name);
        if (!st->alarm) {
                snprintf(line, sizeof(line), "remote %s: a good copy within its max-age again", rm->name);
                notify_change(c, dir, subject, false, true, NULL, NULL, line);
                return;
        }
        snprintf(what, sizeof(what), "remote %s: no good copy off-site", rm->name);
        alarm_announce("REMOTE", rm->name, what, " of ", rm->max_age, st, line, sizeof(line));
        run_hook("the on-failure command of [global]", c->on_failure, NULL, NULL, false, line);
        notify_change(c, dir, subject, true, true, NULL, NULL, line);
}

/* Each remote: shown (text or JSON), and with --check-age its alarm; the number in alarm. */
static size_t status_remotes(const BvConfig *conf, const StatusArgs *a, const char *dir, uint64_t now, bool show,
                             struct json_object *arr)
{
        size_t alarms = 0;
        for (size_t i = 0; i < conf->n_remotes; i++) {
                const BvConfRemote *rm = &conf->remotes[i];
                BvJobStatus st;
                if (bv_state_remote_status(dir, conf, rm, now, &st) < 0) {
                        log_warning("cannot read the state of remote %s in '%s', ignoring", rm->name, dir);
                        continue;
                }
                if (st.bad_target)
                        log_warning("cannot read the state of the copy of %s to %s ('%s/%s'): %s, ignoring",
                                    st.bad_target, rm->name, dir, st.bad_file, strerror(-st.bad_error));
                if (arr)
                        remote_json(rm, &st, now, arr);
                else if (show)
                        remote_text(rm, &st, now);
                if (a->check_age)
                        alarm_remote(conf, rm, &st, dir);
                alarms += st.alarm;
        }
        return alarms;
}

static int status(const StatusArgs *a)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        _cleanup_(json_object_putp) struct json_object *top = NULL;
        struct json_object *targets = NULL, *jobs = NULL, *remotes = NULL;
        uint64_t now = bv_now_realtime_ns() / 1000000000ull;
        const char *dir = bv_state_dir(a->state_dir);
        size_t alarms = 0;
        bool show = a->json || !a->check_age; /* --check-age alone prints only the alarms */

        int ec = load_config(a->config, true, &conf);
        if (ec != EXIT_OK)
                return ec;
        if (a->json) {
                top = json_object_new_object();
                json_object_object_add(top, "targets", targets = json_object_new_array());
                json_object_object_add(top, "jobs", jobs = json_object_new_array());
                json_object_object_add(top, "remotes", remotes = json_object_new_array());
        }
        for (size_t i = 0; i < conf->n_targets && show; i++) {
                BvRunState s;
                int r = bv_state_read(dir, conf->targets[i].name, NULL, &s);
                if (r < 0 && r != -ENOENT)
                        return log_error_errno(r, "cannot read the state of target %s in '%s'", conf->targets[i].name, dir);
                print_target(conf, &conf->targets[i], &s, r >= 0, targets);
        }
        for (size_t i = 0; i < conf->n_jobs; i++) {
                const BvConfJob *j = &conf->jobs[i];
                _cleanup_free_ char *next = NULL;
                BvJobStatus st;
                int r = bv_state_job_status(dir, conf, j, now, &st);
                if (r < 0)
                        return log_error_errno(r, "cannot read the state of job %s in '%s'", j->name, dir);
                if (st.bad_target)
                        log_warning("cannot read the state of job %s on %s ('%s/%s'): %s, ignoring", j->name,
                                    st.bad_target, dir, st.bad_file, strerror(-st.bad_error));
                if (show && j->schedule && !j->mistake) /* systemd-analyze: only for the next run shown */
                        (void)bv_schedule_check(j->schedule, &next, NULL);
                if (a->json)
                        job_json(j, &st, next, now, jobs);
                else if (show)
                        job_text(j, &st, next, now);
                if (st.alarm && a->check_age)
                        alarm_job(conf, j, &st, dir);
                else if (a->check_age)
                        check_age_notify(conf, j, false, NULL, dir);
                alarms += st.alarm;
        }
        size_t remote_alarms = status_remotes(conf, a, dir, now, show, remotes);
        if (a->check_age)
                write_metrics(conf, dir);
        if (show)
                print_notified(dir, top);
        if (a->json)
                json_print(top);
        else if (a->check_age)
                printf("age check: %zu jobs, %zu without a good backup within their max-age\n", conf->n_jobs, alarms);
        if (a->check_age && !a->json && conf->n_remotes > 0)
                printf("age check: %zu remotes, %zu without a good copy within their max-age\n", conf->n_remotes,
                       remote_alarms);
        return a->check_age && alarms + remote_alarms > 0 ? EXIT_ALARM : EXIT_OK;
}

int cmd_status(int argc, char **argv)
{
        StatusArgs a = {};
        const CliOption options[] = {
                CLI_FLAG("json", &a.json),          CLI_FLAG("check-age", &a.check_age),
                CLI_STR("config", &a.config),       CLI_STR("state-dir", &a.state_dir), {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "status", .usage = usage_text, .options = options, .args = "");
        return status(&a);
}
