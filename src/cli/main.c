/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "s3.h"
#include "secmem.h"

static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
} commands[] = {
        { "init", cmd_init, "create a repository" },
        { "backup", cmd_backup, "back up a block device, image file, stdin or libvirt domain as snapshots" },
        { "list", cmd_list, "list snapshots" },
        { "restore", cmd_restore, "restore a snapshot to a new file or a block device" },
        { "verify", cmd_verify, "check a repository, optionally reading every chunk" },
        { "info", cmd_info, "sizes, deduplication and compression of a repository" },
        { "key", cmd_key, "export, import, add, list, remove or change key slots" },
        { "repair", cmd_repair, "rebuild the index from the packs, list what snapshots lost" },
        { "delete", cmd_delete, "forget snapshots" },
        { "protect", cmd_protect, "protect a snapshot from prune and delete" },
        { "prune", cmd_prune, "forget snapshots by a retention policy, then reclaim their space" },
        { "copy", cmd_copy, "copy snapshots to a related repository (a drive, S3), sending only what it lacks" },
        { "gc", cmd_gc, "reclaim the space no snapshot uses (beside backups and exports)" },
        { "files", cmd_files, "list, print, copy out, find and compare a snapshot's files, without root" },
        { "serve", cmd_serve, "serve a snapshot over NBD (nbdkit)" },
        { "mount", cmd_mount, "mount a snapshot's filesystem read-only (nbdkit, nbdfuse, loop)" },
        { "umount", cmd_umount, "undo 'blkvault mount'" },
        { "target", cmd_target, "register a backup drive (target format), list them (target list)" },
        { "job", cmd_job, "run a configured job on every attached target it names (job run)" },
        { "remote", cmd_remote, "copy the attached drives off-site to a configured remote (remote copy)" },
        { "config", cmd_config, "check the appliance's configuration (config check)" },
        { "status", cmd_status, "last runs, good backups, next runs and age alarms of targets and jobs" },
};

static void usage(FILE *f)
{
        fprintf(f, "Usage: blkvault COMMAND [OPTIONS] ...\n\n"
                   "Block-level backups into a deduplicated, compressed, encrypted repository.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
        fprintf(f, "\nRun 'blkvault help COMMAND' for a command's options. See blkvault(1).\n");
}

/* An S3 request being retried (s3.h): said, so that a store that does not answer is not waited
 * on in silence. */
static void s3_retrying(const char *message, void *userdata)
{
        log_warning("%s", message);
}

int main(int argc, char **argv)
{
        /* before any secret is read: no core dump of this process (or its children) holds keys */
        int r = bv_secure_process();
        if (r < 0)
                return log_error_errno(r, "cannot keep keys out of core dumps");
        bv_s3_set_retry_notify(s3_retrying, NULL);
        const char *base = strrchr(argv[0], '/');
        if (strcmp(base ? base + 1 : argv[0], "blkvault-generator") == 0)
                return cmd_generator(argc, argv);
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (strcmp(argv[1], "help") == 0 && argc >= 3 && strcmp(argv[2], "help") != 0) {
                /* blkvault help CMD [SUB...]: the command's own --help */
                for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                        if (strcmp(argv[2], commands[i].name) == 0) {
                                char *args[] = { argv[2], (char *)"--help", NULL };
                                return commands[i].run(2, args);
                        }
                log_error("unknown command '%s' (see 'blkvault help')", argv[2]);
                return EXIT_USAGE;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
                usage(stdout);
                return EXIT_OK;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("blkvault %s\n", PACKAGE_VERSION);
                return EXIT_OK;
        }
        /* getopt_long's own messages lack "error:" and a hint: log_option_error says it instead */
        opterr = 0;
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(argv[1], commands[i].name) == 0) {
                        r = commands[i].run(argc - 1, argv + 1);
                        if (r == EXIT_USAGE && !error_printed())
                                log_option_error(argc - 1, argv + 1, argv[1]);
                        return r;
                }
        log_error("unknown command '%s' (see 'blkvault help')", argv[1]);
        return EXIT_USAGE;
}
