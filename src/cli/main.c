/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"

static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
} commands[] = {
        { "init", cmd_init, "create a repository" },
        { "backup", cmd_backup, "back up a block device, image file or stdin as a new snapshot" },
        { "list", cmd_list, "list snapshots" },
        { "restore", cmd_restore, "restore a snapshot to a new file or a block device" },
        { "verify", cmd_verify, "check a repository, optionally reading every chunk" },
        { "info", cmd_info, "sizes, deduplication and compression of a repository" },
        { "key", cmd_key, "change the passphrase or key file" },
        { "delete", cmd_delete, "forget snapshots" },
        { "protect", cmd_protect, "protect a snapshot from prune and delete" },
        { "serve", cmd_serve, "serve a snapshot over NBD (nbdkit)" },
        { "mount", cmd_mount, "mount a snapshot's filesystem read-only (nbdkit, nbdfuse, loop)" },
        { "umount", cmd_umount, "undo 'blkvault mount'" },
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

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (strcmp(argv[1], "help") == 0 && argc == 3) {
                /* blkvault help CMD: the command's own --help */
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
                        int r = commands[i].run(argc - 1, argv + 1);
                        if (r == EXIT_USAGE && !error_printed())
                                log_option_error(argc - 1, argv + 1, argv[1]);
                        return r;
                }
        log_error("unknown command '%s' (see 'blkvault --help')", argv[1]);
        return EXIT_USAGE;
}
