/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gc.h"

static const char usage_text[] =
        "Usage: blkvault gc REPO [OPTIONS]\n\n"
        "Reclaim the space of what no snapshot references: packs with nothing in use, packs of\n"
        "interrupted backups, and (rewritten) packs whose unused share exceeds --max-unused.\n"
        "Runs beside backups and NBD exports: what they may still read is deleted by a later gc.\n\n"
        "  --dry-run              say what would be condemned; change nothing\n"
        "  --max-unused=PERCENT   rewrite packs with more unused entries than this (default 10; a % may follow)\n"
        "  --json                 the counters as a JSON object\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

struct json_object *json_gc_stats(const BvGcStats *s)
{
        return BV_JSON_OBJECT({ "snapshots", json_object_new_uint64(s->snapshots) },
                              { "entries", json_object_new_uint64(s->entries) },
                              { "entries_live", json_object_new_uint64(s->entries_live) },
                              { "missing", json_object_new_uint64(s->missing) },
                              { "packs", json_object_new_uint64(s->packs) },
                              { "packs_dead", json_object_new_uint64(s->packs_dead) },
                              { "packs_orphan", json_object_new_uint64(s->packs_orphan) },
                              { "packs_rewritten", json_object_new_uint64(s->packs_rewritten) },
                              { "bytes_condemned", json_object_new_uint64(s->bytes_condemned) },
                              { "bytes_copied", json_object_new_uint64(s->bytes_copied) },
                              { "groups_reencoded", json_object_new_uint64(s->groups_reencoded) },
                              { "packs_deleted", json_object_new_uint64(s->packs_deleted) },
                              { "bytes_deleted", json_object_new_uint64(s->bytes_deleted) },
                              { "packs_locked", json_object_new_uint64(s->packs_locked) },
                              { "locked_until", json_object_new_uint64(s->locked_until) },
                              { "lists_locked", json_object_new_uint64(s->lists_locked) },
                              { "tmp_deleted", json_object_new_uint64(s->tmp_deleted) },
                              { "tmp_bytes_deleted", json_object_new_uint64(s->tmp_bytes_deleted) },
                              { "entries_resurrected", json_object_new_uint64(s->entries_resurrected) },
                              { "lists_finalized", json_object_new_uint64(s->lists_finalized) },
                              { "lists_waiting", json_object_new_uint64(s->lists_waiting) },
                              { "leases_live", json_object_new_uint64(s->leases_live) },
                              { "leases_reaped", json_object_new_uint64(s->leases_reaped) },
                              { "epoch", json_object_new_uint64(s->epoch) });
}

void print_gc_stats(const BvGcStats *s, bool dry_run)
{
        char a[32], b[32];
        printf("%s snapshots reference %llu of %llu index entries\n", dry_run ? "gc (dry run):" : "gc:",
               (unsigned long long)s->entries_live, (unsigned long long)s->entries);
        printf("%s %llu of %llu packs (%llu unused, %llu of interrupted backups, %llu rewritten), %s; %s copied\n",
               dry_run ? "would condemn" : "condemned",
               (unsigned long long)(s->packs_dead + s->packs_orphan + s->packs_rewritten), (unsigned long long)s->packs,
               (unsigned long long)s->packs_dead, (unsigned long long)s->packs_orphan,
               (unsigned long long)s->packs_rewritten, format_bytes(s->bytes_condemned, a),
               format_bytes(s->bytes_copied, b));
        if (s->groups_reencoded > 0)
                printf("re-encoded %llu partly unused compression groups: only their live members were copied\n",
                       (unsigned long long)s->groups_reencoded);
        if (!dry_run)
                printf("deleted %llu packs, %s\n", (unsigned long long)s->packs_deleted,
                       format_bytes(s->bytes_deleted, a));
        if (s->packs_locked > 0) {
                time_t t = (time_t)s->locked_until;
                struct tm tm;
                char when[32] = "?";
                if (gmtime_r(&t, &tm))
                        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
                printf("%llu packs kept: locked until %s (S3 Object Lock; a later gc deletes them)\n",
                       (unsigned long long)s->packs_locked, when);
        }
        if (s->tmp_deleted > 0)
                printf("deleted %llu temporary files interrupted writers left, %s\n",
                       (unsigned long long)s->tmp_deleted, format_bytes(s->tmp_bytes_deleted, a));
        if (s->lists_waiting > 0)
                printf("note: %llu condemned lists wait for older backups, restores or exports to end "
                       "(a later gc deletes them)\n",
                       (unsigned long long)s->lists_waiting);
        if (s->missing > 0)
                log_warning("%llu objects that snapshots reference are missing (run 'blkvault verify')",
                            (unsigned long long)s->missing);
}

int run_gc(BvRepo *repo, const char *path, const BvGcOptions *o, BvGcStats *ret)
{
        BvRepoProblem problem;
        BvGcOptions named = *o;
        named.problem = &problem;
        int e, r = bv_gc(repo, &named, ret);
        if (ret->epoch_start > ret->epoch_read)
                log_warning("'gc/epoch' in '%s' went back (restored or edited?): it read %llu, behind a running "
                            "backup, restore or export or a condemned list; gc went on from %llu",
                            path, (unsigned long long)ret->epoch_read, (unsigned long long)ret->epoch_start);
        if (r < 0 && (e = report_open_problem(path, &problem, r)) >= 0)
                return e; /* refused: a lease, gc/, gc/epoch, a list, a pack that is not what it must be */
        char said[STORAGE_SAID_MAX];
        if (r < 0)
                storage_said(repo, said, sizeof(said));
        if (r < 0 && problem.path[0])
                return log_error_errno(r, "cannot collect garbage in '%s' (nothing was lost): '%s'%s", path,
                                       problem.path, said);
        if (r == -EUCLEAN) {
                log_error("cannot collect garbage in '%s': a damaged index segment, snapshot record or map hides "
                          "what is in use (run 'blkvault verify')",
                          path);
                return EXIT_DAMAGE;
        }
        if (r == -EOVERFLOW) {
                log_error("cannot collect garbage in '%s' (nothing was lost): 'gc/epoch' holds the largest epoch "
                          "(%llu): remove it once no backup, restore or export runs",
                          path, (unsigned long long)ret->epoch);
                return EXIT_ERROR;
        }
        if (r < 0)
                return log_error_errno(r, "cannot collect garbage in '%s' (nothing was lost)%s", path, said);
        return EXIT_OK;
}

/* PERCENT, with or without its sign: "10" or "10%". */
static int parse_max_unused(const char *arg, void *ret)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(arg, &end, 10);
        if (end == arg || errno || arg[0] == '-' || v > 100 || (*end && strcmp(end, "%") != 0)) {
                log_error("invalid --max-unused '%s' (0 to 100)", arg);
                return -EINVAL;
        }
        *(unsigned *)ret = (unsigned)v;
        return 0;
}

int cmd_gc(int argc, char **argv)
{
        SecretArgs sargs = {};
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        bool json = false;
        const CliOption options[] = {
                CLI_FLAG("dry-run", &o.dry_run),
                CLI_PARSED("max-unused", parse_max_unused, &o.max_unused),
                CLI_FLAG("json", &json),
                {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "gc", .usage = usage_text, .options = options, .secret = &sargs,
                            .args = "REPO", .repo = true);
        int r;
        const char *path = argv[optind];
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_GC, &repo);
        if (r != EXIT_OK)
                return r;
        BvGcStats st;
        r = run_gc(repo, path, &o, &st);
        if (r != EXIT_OK)
                return r;
        if (json) {
                _cleanup_(json_object_putp) struct json_object *j = json_gc_stats(&st);
                if (!j || bv_json_add(j, "dry_run", json_object_new_boolean(o.dry_run)) < 0)
                        return log_error_errno(-ENOMEM, "cannot collect garbage in '%s'", path);
                json_print(j);
        } else
                print_gc_stats(&st, o.dry_run);
        return EXIT_OK;
}
