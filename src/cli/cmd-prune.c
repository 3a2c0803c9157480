/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gc.h"
#include "prune.h"

static const char usage_text[] =
        "Usage: blkvault prune REPO --keep-...=N [OPTIONS]\n\n"
        "Forget the snapshots that no rule keeps, per name, then reclaim their space (gc).\n"
        "Protected snapshots are always kept. At least one --keep-* rule is needed.\n\n"
        "  --keep-last=N      the N newest\n"
        "  --keep-hourly=N, --keep-daily=N, --keep-weekly=N, --keep-monthly=N, --keep-yearly=N\n"
        "                     the newest snapshot of each of the N newest hours, days, ISO weeks,\n"
        "                     months or years (local time); -1: of every one\n"
        "  --keep-within=DURATION  every snapshot within DURATION (s, min, h, d, w: 7d) of the newest\n"
        "  --name=NAME        only the snapshots named NAME\n"
        "  --dry-run          say what would be forgotten; change nothing\n"
        "  --no-gc            forget only; leave reclaiming space to 'blkvault gc'\n"
        "  --json             a JSON object: dry_run, forgotten, snapshots (each with action and rule), gc\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

static const char *const count_names[6] = { "keep-last",  "keep-hourly",  "keep-daily",
                                            "keep-weekly", "keep-monthly", "keep-yearly" };

static int parse_count(const char *option, const char *arg, int *ret)
{
        char *end;
        if (!arg)
                return EXIT_OK;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (errno || end == arg || *end || v < -1 || v > INT_MAX) {
                log_error("invalid --%s '%s' (a number of snapshots, or -1 for all)", option, arg);
                return EXIT_USAGE;
        }
        *ret = (int)v;
        return EXIT_OK;
}

/* The rules, given as strings: each checked after the command line is parsed. */
int prune_args_check(PruneArgs *a)
{
        BvPolicy *p = &a->policy;
        int *dest[6] = { &p->last, &p->hourly, &p->daily, &p->weekly, &p->monthly, &p->yearly };
        uint64_t w;
        for (size_t i = 0; i < 6; i++) {
                int r = parse_count(count_names[i], a->counts[i], dest[i]);
                if (r != EXIT_OK)
                        return r;
        }
        if (!a->within)
                return EXIT_OK;
        if (bv_conf_parse_duration(a->within, &w) < 0 || w == 0 || w > INT64_MAX) {
                log_error("invalid --keep-within '%s' (a number and a unit: s, min, h, d or w, as in 7d)", a->within);
                return EXIT_USAGE;
        }
        p->within = (int64_t)w;
        return EXIT_OK;
}

bool prune_args_given(const PruneArgs *a)
{
        for (size_t i = 0; i < 6; i++)
                if (a->counts[i])
                        return true;
        return a->within != NULL;
}

static void print_items(const BvPruneItem *items, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const BvSnapshot *s = items[i].snap;
                char when[64];
                format_time_local(s->time, when);
                _cleanup_free_ char *name = escape_text(s->name ? s->name : "", 0);
                printf("%-6s  %-8.8s  %-25s  %-24s %s\n", items[i].rule == BV_KEEP_NONE ? "forget" : "keep", s->id,
                       when, name ? name : "?",
                       items[i].rule == BV_KEEP_NONE ? "no rule keeps it" : bv_keep_rule_name(items[i].rule));
        }
}

static struct json_object *json_items(const BvPruneItem *items, size_t n)
{
        _cleanup_(json_object_putp) struct json_object *arr = json_object_new_array();
        for (size_t i = 0; arr && i < n; i++) {
                BvKeepRule rule = items[i].rule;
                struct json_object *o = json_snapshot(items[i].snap);
                if (!o || bv_json_add(o, "action", json_object_new_string(rule == BV_KEEP_NONE ? "forget" : "keep")) < 0 ||
                    (rule == BV_KEEP_NONE ? json_object_object_add(o, "rule", NULL)
                                          : bv_json_add(o, "rule", json_object_new_string(bv_keep_rule_name(rule)))) < 0 ||
                    bv_json_add(o, "protected", json_object_new_boolean(rule == BV_KEEP_PROTECTED)) < 0 ||
                    json_object_array_add(arr, o) < 0) {
                        json_object_put(o);
                        return NULL;
                }
        }
        return TAKE_PTR(arr);
}

/* A policy that keeps nothing: no rule, or counts that are all 0. */
static int refuse_empty_policy(const char *const counts[6])
{
        char given[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < 6; i++)
                if (counts[i] && used < sizeof(given))
                        used += (size_t)snprintf(given + used, sizeof(given) - used, "%s--%s=%s", used ? " " : "",
                                                 count_names[i], counts[i]);
        if (!given[0])
                log_error("prune needs a --keep-* rule (without one it would forget every snapshot)");
        else
                log_error("the rules %s keep nothing: prune would forget every snapshot (give a count above 0, or -1; "
                          "'blkvault delete' forgets snapshots by name)",
                          given);
        return EXIT_USAGE;
}

/* --name that no snapshot has (a typo?): says so, with the names there are. */
static void warn_no_such_name(BvRepo *repo, const char *path, const char *name)
{
        BvSnapshot *const *list;
        char names[1024];
        size_t n;

        if (bv_repo_snapshots(repo, &list, &n) < 0)
                return;
        _cleanup_free_ char *e = escape_text(name, 0);
        if (snapshot_names(list, n, names, sizeof(names)) == 0)
                log_warning("no snapshot is named '%s' in '%s' (it has none)", e ? e : "?", path);
        else
                log_warning("no snapshot is named '%s' in '%s' (names: %s)", e ? e : "?", path, names);
}

int prune_repo(const char *path, const SecretArgs *sargs, PruneArgs *a)
{
        bool gc = !a->dry_run && !a->no_gc;
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        int r = open_repo(path, sargs, gc ? BV_OPEN_GC : BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        _cleanup_free_ BvPruneItem *items = NULL;
        size_t n = 0;
        BvRepoProblem problem;
        r = bv_prune(repo, &a->policy, a->name, a->dry_run, &items, &n, &problem);
        report_snapshot_damage(repo);
        if (r == -EINVAL)
                return refuse_empty_policy(a->counts);
        char said[STORAGE_SAID_MAX];
        if (r < 0)
                storage_said(repo, said, sizeof(said));
        if (r < 0 && problem.path[0])
                return log_error_errno(r, "cannot prune '%s': cannot forget '%s'%s", path, problem.path, said);
        if (r < 0)
                return log_error_errno(r, "cannot prune '%s'%s", path, said);
        int forgot = r;
        if (a->name && n == 0)
                warn_no_such_name(repo, path, a->name);
        if (!a->json)
                print_items(items, n);
        if (a->dry_run)
                log_info("would forget %d of %zu snapshots (dry run: nothing changed)", forgot, n);
        else
                log_info("forgot %d of %zu snapshots", forgot, n);
        BvGcStats st;
        if (gc) {
                BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
                r = run_gc(repo, path, &o, &st);
                if (r != EXIT_OK)
                        return r;
                if (!a->json)
                        print_gc_stats(&st, false);
        }
        if (a->json) {
                _cleanup_(json_object_putp) struct json_object *o = BV_JSON_OBJECT(
                        { "dry_run", json_object_new_boolean(a->dry_run) },
                        { "forgotten", json_object_new_int(forgot) }, { "snapshots", json_items(items, n) },
                        { gc ? "gc" : NULL, gc ? json_gc_stats(&st) : NULL });
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot prune '%s'", path);
                json_print(o);
        }
        return EXIT_OK;
}

int cmd_prune(int argc, char **argv)
{
        SecretArgs sargs = {};
        PruneArgs a = {};
        const CliOption options[] = {
                PRUNE_POLICY_OPTIONS(&a),        CLI_STR("name", &a.name),
                CLI_FLAG("dry-run", &a.dry_run), CLI_FLAG("no-gc", &a.no_gc),
                CLI_FLAG("json", &a.json),       {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "prune", .usage = usage_text, .options = options, .secret = &sargs,
                            .args = "REPO", .repo = true);
        int r = prune_args_check(&a);
        return r != EXIT_OK ? r : prune_repo(argv[optind], &sargs, &a);
}
