/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault-generator (a link to blkvault; systemd runs it at boot and on daemon-reload with
 * NORMAL_DIR EARLY_DIR LATE_DIR): for every job with a schedule, blkvault-job@NAME.timer in
 * NORMAL_DIR, wanted by timers.target; for every [export NAME], blkvault-nbd@NAME.socket wanted
 * by sockets.target (a link to the installed template), so that the exports the configuration
 * declares listen from boot on, or after daemon-reload and a start of sockets.target; for every
 * [remote NAME], blkvault-copy@NAME.timer wanted by timers.target (the copy's retries). A job,
 * export or remote whose section holds a mistake gets no unit (each mistake is logged); the others do. A
 * generator never fails the boot.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "fileio.h"

static int write_timer(const char *dir, const BvConfJob *j)
{
        _cleanup_free_ char *text = NULL, *name = NULL, *link = NULL, *target = NULL;
        if (asprintf(&name, "blkvault-job@%s.timer", j->name) < 0 ||
            asprintf(&text,
                     "# Made by blkvault-generator from %s:%u\n"
                     "[Unit]\n"
                     "Description=blkvault job %s on its schedule\n"
                     "Documentation=man:blkvault(1)\n"
                     "SourcePath=%s\n\n"
                     "[Timer]\n"
                     "OnCalendar=%s\n"
                     "Persistent=yes\n",
                     j->schedule_where.file, j->schedule_where.line, j->name, j->schedule_where.file,
                     j->schedule) < 0 ||
            asprintf(&link, "%s/timers.target.wants/%s", dir, name) < 0 || asprintf(&target, "../%s", name) < 0)
                return -ENOMEM;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        int r = bv_write_file_durable(dfd, name, text, strlen(text), true);
        if (r < 0)
                return r;
        r = bv_mkdir_p(dfd, "timers.target.wants");
        if (r < 0)
                return r;
        if (symlink(target, link) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* DIR/WANTS/PREFIX@NAME.SUFFIX, a link to the installed template PREFIX@.SUFFIX. */
static int want_instance(const char *dir, const char *wants, const char *prefix, const char *name, const char *suffix)
{
        _cleanup_free_ char *link = NULL, *template = NULL;
        if (asprintf(&link, "%s/%s/%s@%s.%s", dir, wants, prefix, name, suffix) < 0 ||
            asprintf(&template, SYSTEMD_UNIT_DIR "/%s@.%s", prefix, suffix) < 0)
                return -ENOMEM;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        int r = bv_mkdir_p(dfd, wants);
        if (r < 0)
                return r;
        if (symlink(template, link) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int cmd_generator(int argc, char **argv)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        if (argc != 2 && argc != 4) {
                log_error("expected NORMAL_DIR [EARLY_DIR LATE_DIR] (blkvault-generator is run by systemd)");
                return EXIT_USAGE;
        }
        bool must_exist;
        const char *main_path = bv_conf_main_path(NULL, &must_exist);
        int r = bv_conf_load(main_path, false, &conf);
        if (r < 0)
                return log_error_errno(r, "cannot read the configuration '%s'", main_path), EXIT_OK;
        for (size_t i = 0; i < conf->n_errors; i++)
                if (conf->errors[i].line > 0)
                        fprintf(stderr, "blkvault-generator: %s:%u: %s\n", conf->errors[i].file,
                                conf->errors[i].line, conf->errors[i].message);
                else
                        fprintf(stderr, "blkvault-generator: %s: %s\n", conf->errors[i].file, conf->errors[i].message);
        for (size_t i = 0; i < conf->n_jobs; i++) {
                const BvConfJob *j = &conf->jobs[i];
                if (!j->schedule || j->mistake)
                        continue;
                r = write_timer(argv[1], j);
                if (r < 0)
                        fprintf(stderr, "blkvault-generator: cannot write the timer of job %s: %s\n", j->name,
                                strerror(-r));
        }
        for (size_t i = 0; i < conf->n_exports; i++) {
                if (conf->exports[i].mistake)
                        continue;
                r = want_instance(argv[1], "sockets.target.wants", "blkvault-nbd", conf->exports[i].name, "socket");
                if (r < 0)
                        fprintf(stderr, "blkvault-generator: cannot start the socket of export %s: %s\n",
                                conf->exports[i].name, strerror(-r));
        }
        for (size_t i = 0; i < conf->n_remotes; i++) {
                if (conf->remotes[i].mistake)
                        continue;
                r = want_instance(argv[1], "timers.target.wants", "blkvault-copy", conf->remotes[i].name, "timer");
                if (r < 0)
                        fprintf(stderr, "blkvault-generator: cannot start the timer of remote %s: %s\n",
                                conf->remotes[i].name, strerror(-r));
        }
        return EXIT_OK;
}
