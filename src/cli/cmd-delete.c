/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>

#include "cli.h"
#include "snapshot-forget.h"

static const char usage_text[] =
        "Usage: blkvault delete REPO SNAPSHOT... [OPTIONS]\n\n"
        "Forget snapshots. Their space is reclaimed by 'blkvault gc'.\n\n"
        "  --force                  forget protected snapshots too\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

int cmd_delete(int argc, char **argv)
{
        SecretArgs sargs = {};
        bool force = false;
        const CliOption options[] = { CLI_FLAG("force", &force), {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "delete", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO SNAPSHOT...", .repo = true);
        int r, n = argc - optind - 1;
        const char *path = argv[optind];
        if ((r = refuse_s3_write(path)) != EXIT_OK) /* it writes snapshot records */
                return r;
        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_READ);
        _cleanup_free_ const BvSnapshot **snaps = calloc((size_t)n, sizeof(*snaps));
        if (!snaps)
                return log_error_errno(-ENOMEM, "cannot delete snapshots");
        /* resolve every name first: a typo forgets nothing */
        for (int i = 0; i < n; i++) {
                r = find_snapshot(repo, argv[optind + 1 + i], &snaps[i]);
                if (r != EXIT_OK)
                        return r;
        }
        /* and every protection: a protected one among them forgets nothing either */
        for (int i = 0; i < n && !force; i++) {
                r = bv_snapshot_is_protected(bv_repo_backend(repo), snaps[i]->id);
                if (r < 0)
                        return log_error_errno(r, "cannot delete snapshot %.8s", snaps[i]->id);
                if (r > 0) {
                        log_error("snapshot %.8s is protected (use --force, or 'blkvault protect --unprotect'); "
                                  "nothing was deleted",
                                  snaps[i]->id);
                        return EXIT_ERROR;
                }
        }
        for (int i = 0; i < n; i++) {
                const BvSnapshot *s = snaps[i];
                bool again = false;
                for (int j = 0; j < i && !again; j++) /* named twice (by name and by id, say): once */
                        again = snaps[j] == s;
                if (again)
                        continue;
                r = bv_snapshot_forget(bv_repo_backend(repo), s->id, force);
                if (r == -EPERM) {
                        log_error("snapshot %.8s is protected (use --force, or 'blkvault protect --unprotect')",
                                  s->id);
                        return EXIT_ERROR;
                }
                if (r < 0)
                        return log_error_errno(r, "cannot delete snapshot %.8s", s->id);
                log_info("snapshot %.8s deleted", s->id);
        }
        return EXIT_OK;
}
