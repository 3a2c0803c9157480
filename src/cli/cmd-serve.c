/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage_text[] =
        "Usage: blkvault serve REPO SNAPSHOT [OPTIONS]\n\n"
        "Serve SNAPSHOT over NBD with nbdkit in the foreground (Ctrl-C stops it) and print its URI.\n"
        "The export is read-only unless --writable, which stacks nbdkit's cow filter: writes go to\n"
        "a temporary overlay that is thrown away; the repository is never written.\n\n"
        "  --socket=PATH            listen on a Unix socket (default: TCP)\n"
        "  --port=N                 TCP port on localhost only (default 10809)\n"
        "  --writable               accept writes into a throw-away overlay (boot a VM from it)\n"
        "  --cache=SIZE             decoded chunk cache (default 256M)\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -h, --help\n";

int cmd_serve(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "socket", required_argument, NULL, 's' },
                { "port", required_argument, NULL, 'p' },
                { "writable", no_argument, NULL, 'w' },
                { "cache", required_argument, NULL, 'c' },
                SECRET_OPTIONS,
                {},
        };
        SecretArgs sargs = {};
        const char *socket = NULL, *port = NULL, *cache = NULL;
        bool writable = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (secret_args_parse(&sargs, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 's':
                        socket = optarg;
                        break;
                case 'p':
                        port = optarg;
                        break;
                case 'w':
                        writable = true;
                        break;
                case 'c':
                        cache = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 2 != argc) {
                log_error("expected two arguments: REPO SNAPSHOT (see 'blkvault serve --help')");
                return EXIT_USAGE;
        }
        if (socket && port) {
                log_error("--socket and --port exclude each other");
                return EXIT_USAGE;
        }
        const char *path = argv[optind], *spec = argv[optind + 1];

        /* Check the repository, the secret and the snapshot here, with our own messages, before
         * nbdkit takes over. */
        BvSecret secret = {};
        char id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        r = check_export(path, &sargs, spec, id, &secret);
        if (r != EXIT_OK)
                return r;

        PluginArgs pa;
        char *args[32];
        size_t n = 0;
        args[n++] = "nbdkit";
        args[n++] = "--foreground";
        args[n++] = "--exit-with-parent";
        if (socket) {
                args[n++] = "--unix";
                args[n++] = (char *)socket;
        } else {
                if (!port)
                        port = "10809";
                args[n++] = "--port";
                args[n++] = (char *)port;
                /* the export is the decrypted backup: only this machine may reach it, as the
                 * printed URI says (run nbdkit directly to listen elsewhere) */
                args[n++] = "--ipaddr=localhost";
        }
        args[n++] = (char *)nbdkit_threads_arg(&pa);
        if (writable)
                args[n++] = "--filter=cow";
        else
                args[n++] = "--readonly";
        r = plugin_args(&pa, path, id, cache, &sargs, &secret, args, &n);
        secret_done(&secret);
        if (r != EXIT_OK)
                return r;
        args[n] = NULL;

        if (socket)
                printf("nbd+unix:///?socket=%s\n", socket);
        else
                printf("nbd://localhost:%s\n", port);
        fflush(stdout);
        log_info("serving snapshot %.8s of '%s'%s; stop with Ctrl-C", id, path,
                 writable ? " (writes go to a throw-away overlay)" : " read-only");
        execvp("nbdkit", args);
        return log_error_errno(-errno, "cannot run nbdkit");
}
