/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
        "Usage: blkvault config check [--config=FILE]\n\n"
        "Read the appliance's configuration (" BV_CONF_DEFAULT_PATH " and then conf.d/*.conf\n"
        "beside it, in name order) and report every mistake as FILE:LINE: MESSAGE. Schedules are\n"
        "checked with systemd-analyze calendar. The exit status is 1 when anything is wrong.\n\n"
        "  --config=FILE            read FILE and FILE's directory/conf.d instead (also $" BV_CONF_ENV ")\n"
        COMMON_OPTIONS_HELP;

static void print_conf_error(const BvConfError *e)
{
        if (e->line > 0)
                fprintf(stderr, "%s:%u: %s\n", e->file, e->line, e->message);
        else
                fprintf(stderr, "%s: %s\n", e->file, e->message);
}

int load_config(const char *path, bool may_be_missing, BvConfig **ret)
{
        _cleanup_(bv_conf_freep) BvConfig *c = NULL;
        bool must_exist;
        const char *main_path = bv_conf_main_path(path, &must_exist);

        int r = bv_conf_load(main_path, must_exist && !may_be_missing, &c);
        if (r < 0)
                return log_error_errno(r, "cannot read the configuration '%s'", main_path);
        if (c->n_errors > 0) {
                /* a mistake costs its section (marked), not the whole: the rest runs */
                for (size_t i = 0; i < c->n_errors; i++)
                        print_conf_error(&c->errors[i]);
                log_warning("%zu %s in the configuration: %s (see 'blkvault config check')", c->n_errors,
                            c->n_errors == 1 ? "mistake" : "mistakes",
                            c->n_errors == 1 ? "its section is skipped" : "the sections that hold them are skipped");
        }
        *ret = TAKE_PTR(c);
        return EXIT_OK;
}

static int config_check(const char *path)
{
        _cleanup_(bv_conf_freep) BvConfig *c = NULL;
        bool must_exist;
        const char *main_path = bv_conf_main_path(path, &must_exist);

        int r = bv_conf_load(main_path, must_exist, &c);
        if (r < 0)
                return log_error_errno(r, "cannot read the configuration '%s'", main_path);
        r = bv_conf_check_schedules(c);
        if (r == -ENOENT)
                log_warning("systemd-analyze is not installed: schedules not checked");
        else if (r < 0)
                return log_error_errno(r, "cannot check the schedules");
        for (size_t i = 0; i < c->n_errors; i++)
                print_conf_error(&c->errors[i]);
        size_t n_bad = c->n_errors;
        if (n_bad > 0) {
                log_error("%zu %s in the configuration", n_bad, n_bad == 1 ? "mistake" : "mistakes");
                return EXIT_ERROR;
        }
        char remotes[48] = ""; /* named when there are any */
        if (c->n_remotes > 0)
                snprintf(remotes, sizeof(remotes), ", %zu %s", c->n_remotes, c->n_remotes == 1 ? "remote" : "remotes");
        printf("configuration ok: %zu %s, %zu %s, %zu %s%s (%zu %s read)\n", c->n_targets,
               c->n_targets == 1 ? "target" : "targets", c->n_jobs, c->n_jobs == 1 ? "job" : "jobs", c->n_exports,
               c->n_exports == 1 ? "export" : "exports", remotes, c->n_files, c->n_files == 1 ? "file" : "files");
        return EXIT_OK;
}

int cmd_config(int argc, char **argv)
{
        const char *path = NULL;
        const CliOption options[] = { CLI_STR("config", &path), {} };
        static const CliKeyword keywords[] = { { "check", "" }, {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "config", .usage = usage_text, .options = options,
                            .keywords = keywords);
        return config_check(path);
}
