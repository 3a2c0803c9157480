/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "secmem.h"

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
        fprintf(f, "\nRun 'blkvault COMMAND --help' for a command's options. See blkvault(1).\n");
}

int main(int argc, char **argv)
{
        /* before any secret is read: no core dump of this process (or its children) holds keys */
        int r = bv_secure_process();
        if (r < 0)
                return log_error_errno(r, "cannot keep keys out of core dumps");
        if (argc < 2) {
                usage(stderr);
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
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(argv[1], commands[i].name) == 0)
                        return commands[i].run(argc - 1, argv + 1);
        log_error("unknown command '%s' (see 'blkvault --help')", argv[1]);
        return EXIT_USAGE;
}
