/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault remote copy NAME: the off-site copy of every attached drive copied to [remote NAME]
 * (remote.h), as blkvault-copy@NAME.service runs it after a drive's run and on its timer. Each
 * drive's copy leaves a line on stdout, a journal entry, sd_notify STATUS and its state file
 * (STATE/copy-NAME@TARGET), which `blkvault status` and the age alarm read.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sd-dl.h" /* libsystemd loaded on first use */
#include "drive.h"
#include "jobsource.h"
#include "notify.h"
#include "remote.h"
#include "run.h"
#include "state.h"
#include "timeutil.h"

#define BV_MESSAGE_ID_REMOTE_COPY "MESSAGE_ID=5b7e2c914d0a4f6e8b3c2d1e0f9a8b7c"

static const char usage_text[] =
        "Usage: blkvault remote copy NAME [--config=FILE]\n\n"
        "Copy the repository of every attached drive copied to the configured remote NAME (copy-to\n"
        "on the target, or on a job that runs on it) to LOCATION/TARGET, the remote's location and\n"
        "the target's name, sending only what the remote lacks: every snapshot of a target that names\n"
        "the remote, else the snapshots of its jobs that do. The drive is unlocked and mounted\n"
        "read-only while it is read (pulling it loses nothing: the copy continues at the next plug-in);\n"
        "a run of a drive stops the copy instead of waiting for it. blkvault-copy@NAME.service runs\n"
        "this after a drive's run, and blkvault-copy@NAME.timer to retry. No such drive attached is\n"
        "not an error.\n\n"
        APPLIANCE_OPTIONS_HELP;

/* "copy to offsite of usb1 (s3://b/p/usb1): 2 snapshots copied, 3 there already, 40.0 MiB sent" */
static void copy_line(const BvRemoteCopy *rc, char *line, size_t size)
{
        const char *r = rc->remote->name, *t = rc->target->name;
        char b[32], why[256];

        if (rc->result >= 0 && !rc->all && rc->n_wanted == 0) {
                snprintf(line, size, "copy of target %s to %s (%s): none of its jobs that copy to %s has a snapshot "
                         "on the drive yet; nothing to copy", t, r, rc->dst, r);
                return;
        }
        if (rc->result >= 0) {
                char kept[160] = "", d[32];
                if (rc->pruned)
                        snprintf(kept, sizeof(kept), "; retention there kept %zu snapshots, forgot %zu, gc deleted %llu "
                                 "packs, %s", rc->kept, rc->forgotten, (unsigned long long)rc->packs_deleted,
                                 format_bytes(rc->bytes_deleted, d));
                snprintf(line, size, "copy of target %s to %s (%s): %llu snapshots copied, %llu there already, %s sent%s%s",
                         t, r, rc->dst, (unsigned long long)rc->stats.snapshots_copied,
                         (unsigned long long)rc->stats.snapshots_present, format_bytes(rc->stats.bytes_sent, b),
                         rc->created ? " (the remote's repository created)" : "", kept);
                return;
        }
        if (rc->result == -ECANCELED)
                snprintf(why, sizeof(why), "stopped (a run of the drive, or the service stopping); what was sent stays, "
                         "and the next copy continues from it");
        else if (strcmp(rc->step, "identify") == 0)
                snprintf(why, sizeof(why), "cannot prove that the drive is the registered one (%s); nothing was read",
                         strerror(-rc->result));
        else if (rc->result == -ENOLCK)
                snprintf(why, sizeof(why), "object-lock is set, but the bucket has no Object Lock enabled (it is "
                         "enabled when a bucket is made); nothing was written");
        else if (rc->result == -EXDEV)
                snprintf(why, sizeof(why), "the remote holds a repository not related to the drive's (another "
                         "repository id): give the drive's copy another location");
        else
                describe_failure(rc->step, rc->result, 0, why, sizeof(why));
        snprintf(line, size, "copy of target %s to %s (%s) failed: %s%s%s%s", t, r, rc->dst, why, rc->said[0] ? " (" : "",
                 rc->said, rc->said[0] ? ")" : "");
}

/* What a drive's copy leaves: the line, the journal, the state file, the notification. */
static int report_copy(const BvConfig *conf, const BvRemoteCopy *rc, const char *state_dir)
{
        char line[1024], subject[BV_NOTIFY_SUBJECT_MAX];
        uint64_t now = bv_now_realtime_ns() / 1000000000ull;
        BvRunNumbers numbers = { .duration_ms = rc->duration_ms, .bytes_new = rc->stats.bytes_sent,
                                 .bytes_stored = rc->stats.bytes_sent };

        copy_line(rc, line, sizeof(line));
        sd_journal_send("MESSAGE=%s", line, BV_MESSAGE_ID_REMOTE_COPY, "PRIORITY=%d", rc->result < 0 ? 3 : 5,
                        "REMOTE=%s", rc->remote->name, "TARGET=%s", rc->target->name, "BYTES=%llu",
                        (unsigned long long)rc->stats.bytes_sent, "RESULT=%s", rc->result < 0 ? "failed" : "ok", NULL);
        sd_notifyf(false, "STATUS=%s", line);
        int r = bv_state_record_copy(state_dir, rc->remote->name, rc->target->name, now, rc->result, rc->step, &numbers);
        if (r < 0)
                log_warning("cannot record the copy of target %s to %s in '%s': %s", rc->target->name,
                            rc->remote->name, state_dir, strerror(-r));
        snprintf(subject, sizeof(subject), "copy-%s@%s", rc->remote->name, rc->target->name);
        notify_change(conf, state_dir, subject, rc->result < 0, false, NULL, rc->target->name, line);
        if (rc->result < 0) {
                log_error("%s", line);
                return exit_code_for(rc->result);
        }
        printf("%s\n", line);
        return EXIT_OK;
}

static int remote_copy(const char *config, const char *run_dir, const char *state_dir, const char *name)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        int ec = load_config(config, true, &conf);
        if (ec != EXIT_OK)
                return ec;
        const BvConfRemote *rm = bv_conf_remote_by_name(conf, name);
        if (!rm) {
                log_error("no remote '%s' in the configuration (no [remote %s])", name, name);
                return EXIT_ERROR;
        }
        if (rm->mistake) {
                log_error("remote %s is not copied to: its section has a mistake (%s)", name, rm->mistake);
                return EXIT_ERROR;
        }
        ec = catch_interrupts(bv_job_cancel);
        if (ec != EXIT_OK)
                return ec;
        state_dir = bv_state_dir(state_dir);
        size_t copied = 0, failed = 0, feeds = 0;
        for (size_t i = 0; i < conf->n_targets; i++) {
                const BvConfTarget *t = &conf->targets[i];
                _cleanup_free_ char *dev = NULL;
                if (!bv_conf_target_copies_to(conf, t, rm->name))
                        continue;
                feeds++;
                if (t->mistake) {
                        log_error("target %s is not copied to %s: its section has a mistake (%s)", t->name, name,
                                  t->mistake);
                        ec = EXIT_ERROR, failed++, copied++;
                        continue;
                }
                if (!t->uuid || bv_drive_find_by_uuid(t->uuid, &dev) < 0) {
                        printf("target %s: not attached; its copy to %s waits for it\n", t->name, name);
                        continue;
                }
                sd_notifyf(false, "STATUS=copying target %s to %s: the drive is read, unplugging it stops the copy",
                           t->name, name);
                BvRemoteCopy rc;
                bv_remote_copy_drive(conf, rm, t, dev, run_dir, bv_job_cancelled, &rc);
                int r = report_copy(conf, &rc, state_dir);
                bv_remote_copy_done(&rc);
                if (r != EXIT_OK && ec == EXIT_OK)
                        ec = r;
                failed += r != EXIT_OK;
                copied++;
                if (bv_job_cancelled())
                        break;
        }
        write_metrics(conf, state_dir);
        if (feeds == 0)
                printf("remote %s: no target copies to it (copy-to on a target or job); nothing done\n", name);
        else if (copied == 0)
                printf("remote %s: none of its targets is attached; nothing done\n", name);
        else
                printf("remote %s: %zu targets, %zu failed\n", name, copied, failed);
        return ec;
}

int cmd_remote(int argc, char **argv)
{
        const char *config = NULL, *run_dir = NULL, *state_dir = NULL;
        const CliOption options[] = { CLI_STR("config", &config), CLI_STR("run-dir", &run_dir),
                                      CLI_STR("state-dir", &state_dir), {} };
        static const CliKeyword keywords[] = { { "copy", "NAME" }, {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "remote", .usage = usage_text, .options = options,
                            .keywords = keywords);
        return remote_copy(config, run_dir, state_dir, argv[optind + 1]);
}
