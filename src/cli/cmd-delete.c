/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>

#include "cli.h"
#include "snapshot-forget.h"

static const char usage_text[] =
        "Usage: blkvault delete REPO SNAP... [OPTIONS]\n\n"
        "Forget snapshots. Their space is reclaimed by 'blkvault gc'.\n\n"
        "  --force      forget protected snapshots too\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -q, --quiet              no progress or status lines\n"
        "  -v, --verbose            more detail (timings, how the repository was opened)\n"
        "  -h, --help\n";

int cmd_delete(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "force", no_argument, NULL, 'f' },
                SECRET_OPTIONS,
                COMMON_OPTIONS,
                {},
        };
        SecretArgs sargs = {};
        bool force = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "hqv", options, NULL)) >= 0) {
                if (verbosity_parse(c))
                        continue;
                if (secret_args_parse(&sargs, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 'f':
                        force = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 2 > argc) {
                log_error("expected: blkvault delete REPO SNAP... (see 'blkvault delete --help')");
                return EXIT_USAGE;
        }
        const char *path = argv[optind];
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        /* resolve every name first: a typo forgets nothing */
        const BvSnapshot *s;
        for (int i = optind + 1; i < argc; i++) {
                r = bv_repo_find_snapshot(repo, argv[i], &s);
                if (r < 0)
                        return log_error_errno(r, "cannot find snapshot '%s' in '%s'", argv[i], path);
        }
        for (int i = optind + 1; i < argc; i++) {
                r = bv_repo_find_snapshot(repo, argv[i], &s); /* the list read at open: resolves as above */
                if (r < 0)
                        return log_error_errno(r, "cannot find snapshot '%s' in '%s'", argv[i], path);
                r = bv_snapshot_forget(bv_repo_dirfd(repo, "snapshots"), s->id, force);
                if (r == -EPERM) {
                        log_error("snapshot %.8s is protected (use --force, or 'blkvault protect --unprotect')",
                                  s->id);
                        return EXIT_ERROR;
                }
                if (r < 0 && !(r == -ENOENT && i > optind + 1))
                        return log_error_errno(r, "cannot delete snapshot %.8s", s->id);
                log_info("snapshot %.8s deleted", s->id);
        }
        return EXIT_OK;
}
