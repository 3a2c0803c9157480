/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "drive.h"
#include "jobsource.h"
#include "run.h"
#include "state.h"

static const char usage_text[] =
        "Usage: blkvault job run NAME [--config=FILE]\n\n"
        "Run the configured job NAME on every registered drive it names (or every one, for\n"
        "targets = any) that is attached and not restore-only, one drive after the other: unlock,\n"
        "mount, back up, verify, unmount, lock. No such drive attached is not an error. The last\n"
        "line sums up: \"job NAME: N targets, M failed\" (exit status 0 when none failed).\n\n"
        APPLIANCE_OPTIONS_HELP;

static int job_run(const char *config, const char *run_dir, const char *state_dir, const char *name)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        int ec = load_config(config, true, &conf);
        if (ec != EXIT_OK)
                return ec;
        const BvConfJob *j = bv_conf_job_by_name(conf, name);
        if (!j) {
                log_error("no job '%s' in the configuration", name);
                return EXIT_ERROR;
        }
        if (j->mistake) {
                log_error("job %s is not run: its section has a mistake (%s)", name, j->mistake);
                return EXIT_ERROR;
        }
        ec = catch_interrupts(bv_job_cancel);
        if (ec != EXIT_OK)
                return ec;
        size_t ran = 0, failed = 0, ro_len = 0;
        char ro[512] = ""; /* the attached restore-only targets, left alone */
        for (size_t i = 0; i < conf->n_targets; i++) {
                const BvConfTarget *t = &conf->targets[i];
                _cleanup_free_ char *dev = NULL;
                if (!bv_conf_job_wants(j, t->name) || !t->uuid || bv_drive_find_by_uuid(t->uuid, &dev) < 0)
                        continue;
                if (t->mistake) {
                        log_error("target %s is skipped: its section has a mistake (%s)", t->name, t->mistake);
                        ec = EXIT_ERROR, failed++, ran++;
                        continue;
                }
                if (t->mode == BV_TARGET_RESTORE_ONLY) {
                        if (ro_len < sizeof(ro))
                                ro_len += (size_t)snprintf(ro + ro_len, sizeof(ro) - ro_len, "%s%s",
                                                           ro_len ? ", " : "", t->name);
                        continue;
                }
                BvTargetRun run;
                BvRunProgress bp;
                RunProgress rp;
                run_progress_init(&rp, &bp);
                bv_target_run_drive(conf, t, dev, j->name, run_dir, &bp, &run);
                run_progress_done(&rp);
                int r = report_run(&run, conf, state_dir);
                request_copies(&run, conf);
                bv_target_run_done(&run);
                if (r != EXIT_OK && ec == EXIT_OK)
                        ec = r;
                failed += r != EXIT_OK;
                ran++;
        }
        if (ran == 0 && ro[0]) {
                printf("job %s: its attached targets are restore-only (%s); nothing done\n", j->name, ro);
                return ec;
        }
        if (ran == 0) {
                printf("job %s: none of its targets is attached; nothing done\n", j->name);
                return ec;
        }
        printf("job %s: %zu targets, %zu failed\n", j->name, ran, failed);
        return ec;
}

int cmd_job(int argc, char **argv)
{
        const char *config = NULL, *run_dir = NULL, *state_dir = NULL;
        const CliOption options[] = { CLI_STR("config", &config), CLI_STR("run-dir", &run_dir),
                                      CLI_STR("state-dir", &state_dir), {} };
        static const CliKeyword keywords[] = { { "run", "NAME" }, {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "job", .usage = usage_text, .options = options, .keywords = keywords);
        return job_run(config, run_dir, state_dir, argv[optind + 1]);
}
