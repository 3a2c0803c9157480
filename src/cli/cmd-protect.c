/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>

#include "cli.h"
#include "snapshot-forget.h"

static const char usage_text[] =
        "Usage: blkvault protect REPO SNAP [OPTIONS]\n\n"
        "Protect a snapshot from prune and delete (or, with --unprotect, lift that).\n\n"
        "  --unprotect\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -q, --quiet              no progress or status lines\n"
        "  -v, --verbose            more detail (timings, how the repository was opened)\n"
        "  -h, --help\n";

int cmd_protect(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "unprotect", no_argument, NULL, 'u' },
                SECRET_OPTIONS,
                COMMON_OPTIONS,
                {},
        };
        SecretArgs sargs = {};
        bool on = true;
        int c, r;

        while ((c = getopt_long(argc, argv, "hqv", options, NULL)) >= 0) {
                if (verbosity_parse(c))
                        continue;
                if (secret_args_parse(&sargs, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 'u':
                        on = false;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 2 != argc) {
                log_error("expected: blkvault protect REPO SNAP (see 'blkvault protect --help')");
                return EXIT_USAGE;
        }
        const char *path = argv[optind], *spec = argv[optind + 1];
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        const BvSnapshot *s;
        r = bv_repo_find_snapshot(repo, spec, &s);
        if (r < 0)
                return log_error_errno(r, "cannot find snapshot '%s' in '%s'", spec, path);
        r = bv_snapshot_protect(bv_repo_dirfd(repo, "snapshots"), s->id, on);
        if (r < 0)
                return log_error_errno(r, "cannot %s snapshot %.8s", on ? "protect" : "unprotect", s->id);
        log_info("snapshot %.8s is %s", s->id, on ? "protected" : "no longer protected");
        return EXIT_OK;
}
