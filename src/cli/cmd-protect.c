/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>

#include "cli.h"
#include "snapshot-forget.h"

static const char usage_text[] =
        "Usage: blkvault protect REPO SNAPSHOT [OPTIONS]\n\n"
        "Protect a snapshot from prune and delete (or, with --unprotect, lift that).\n\n"
        "  --unprotect              lift the protection\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

int cmd_protect(int argc, char **argv)
{
        SecretArgs sargs = {};
        bool on = true;
        const CliOption options[] = { CLI_UNSET("unprotect", &on), {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "protect", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO SNAPSHOT", .repo = true);
        int r;
        const char *path = argv[optind], *spec = argv[optind + 1];
        if ((r = refuse_s3_write(path)) != EXIT_OK) /* it writes snapshot records */
                return r;
        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_READ);
        const BvSnapshot *s;
        r = find_snapshot(repo, spec, &s);
        if (r != EXIT_OK)
                return r;
        r = bv_snapshot_protect(bv_repo_backend(repo), s->id, on);
        if (r < 0)
                return log_error_errno(r, "cannot %s snapshot %.8s", on ? "protect" : "unprotect", s->id);
        log_info("snapshot %.8s is %s", s->id, on ? "protected" : "no longer protected");
        return EXIT_OK;
}
