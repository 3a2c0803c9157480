/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lock.h"
#include "repair.h"

static const char usage_text[] =
        "Usage: blkvault repair REPO [OPTIONS]\n\n"
        "Read every pack and every object in it, compare what is whole with the chunk index, and\n"
        "list what is damaged and what each snapshot has lost, by byte range. Nothing is written\n"
        "without --force. The exit status is 4 when data is lost or the index needs --force.\n\n"
        "  --force      rebuild the index from the packs (damaged objects are left out, so the\n"
        "               next backup that meets their content stores it again)\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

static void on_event(const BvRepairEvent *e, void *userdata)
{
        char size[32], when[64];

        if (e->kind == BV_REPAIR_DAMAGED) {
                if (strcmp(e->what, "object") == 0)
                        fprintf(stderr, "damaged: object %s at offset %llu: %s\n", e->detail,
                                (unsigned long long)e->offset, strerror(-e->error));
                else
                        fprintf(stderr, "damaged: %s %s: %s\n", e->what, e->detail ? e->detail : "",
                                strerror(-e->error));
                return;
        }
        _cleanup_free_ char *name = escape_text(e->snapshot->name ? e->snapshot->name : "", 64);
        format_time_local(e->snapshot->time, when);
        printf("lost: snapshot %.8s (%s, %s): bytes %llu-%llu (%s): %s\n", e->snapshot->id, name ? name : "?", when,
               (unsigned long long)e->offset, (unsigned long long)(e->offset + e->length - 1),
               format_bytes(e->length, size), e->what);
}

static void summary(const BvRepairStats *st)
{
        if (st->segments_damaged || st->index_missing || st->index_stale)
                log_info("index: %llu objects it does not locate, %llu entries that locate nothing whole, "
                         "%llu damaged segments",
                         (unsigned long long)st->index_missing, (unsigned long long)st->index_stale,
                         (unsigned long long)st->segments_damaged);
        if (st->index_rebuilt)
                log_info("index rebuilt from %llu packs: %llu segments written, %llu removed",
                         (unsigned long long)(st->packs - st->packs_damaged), (unsigned long long)st->segments_written,
                         (unsigned long long)st->segments_removed);
        if (st->ranges_lost) {
                char b[32];
                log_info("%llu snapshots of %llu lost %s in %llu ranges", (unsigned long long)st->snapshots_lossy,
                         (unsigned long long)st->snapshots, format_bytes(st->bytes_lost, b),
                         (unsigned long long)st->ranges_lost);
        }
}

int cmd_repair(int argc, char **argv)
{
        SecretArgs sargs = {};
        bool force = false;
        const CliOption options[] = { CLI_FLAG("force", &force), {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "repair", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO", .repo = true);
        int r;
        const char *path = argv[optind];
        /* Without --force nothing is written, but no backup may change the packs meanwhile. */
        OPEN_REPO_OR_RETURN(repo, path, &sargs, force ? BV_OPEN_WRITE | BV_OPEN_REPAIR : BV_OPEN_READ);
        _cleanup_close_ int wlock = force ? -EBADF : bv_backend_lock(bv_repo_backend(repo), BV_LOCK_WRITE, false);
        BvRepoProblem problem;
        int e;
        if (wlock == -EBUSY) {
                log_error("repository '%s' is locked by another writer (a backup or key change is running)", path);
                return EXIT_BUSY;
        }
        if (!force && wlock < 0) {
                bv_repo_problem_note(&problem, bv_repo_backend(repo), "locks/write", false, wlock);
                if ((e = report_open_problem(path, &problem, wlock)) >= 0)
                        return e; /* refused: a FIFO or a symbolic link */
                return log_error_errno(wlock, "cannot lock '%s': 'locks/write'", path);
        }

        BvRepairStats st = {};
        r = bv_repair(repo, force, on_event, NULL, &st, &problem);
        if (r < 0 && (e = report_open_problem(path, &problem, r)) >= 0)
                return e; /* refused: an entry of packs/ */
        if (r == -EBUSY) {
                log_error("repository '%s' is in use (an export, a reader or gc holds locks/gc): stop it, then "
                          "repair again", path);
                return EXIT_IN_USE;
        }
        if (r < 0 && r != -EUCLEAN && r != -EBADMSG)
                return log_error_errno(r, "cannot repair '%s'", path);
        summary(&st);
        if (r == -EUCLEAN) {
                log_error("the index of '%s' needs a rebuild: run 'blkvault repair %s --force' (nothing was written)",
                          path, path);
                return EXIT_DAMAGE;
        }
        if (r == -EBADMSG) {
                log_error("data is lost in '%s': back its sources up again to heal what they still hold", path);
                return EXIT_DAMAGE;
        }
        log_info("ok: %llu packs, %llu objects whole, %llu snapshots whole%s", (unsigned long long)st.packs,
                 (unsigned long long)(st.objects - st.objects_damaged), (unsigned long long)st.snapshots,
                 st.index_rebuilt ? "; index rebuilt" : "; nothing to repair");
        return EXIT_OK;
}
