/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <json-c/json.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "timeutil.h"

static const char usage_text[] =
        "Usage: blkvault list REPO [OPTIONS]\n\n"
        "List the snapshots of REPO, oldest first, with times in local time.\n\n"
        "  --name=NAME  only the snapshots named NAME\n"
        "  --last=N     only the newest N (of NAME, with --name)\n"
        "  --utc        times in UTC\n"
        "  --json       a JSON list: snapshot, name, time, time_utc, size, protected, source, chunker, stats\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

/* "gpt: ext4 'root', xfs 'data'" from the probe, for the table. */
void describe_probe(const BvSnapshotSource *src, char *buf, size_t size)
{
        const BvProbe *p = &src->probe;
        size_t used = 0;

        buf[0] = '\0';
        if (!src->probed)
                return;
        if (p->pttype)
                used += (size_t)snprintf(buf + used, size - used, "%s:", p->pttype);
        else if (p->fstype) {
                snprintf(buf, size, "%s%s%s%s", p->fstype, p->label ? " '" : "", p->label ?: "", p->label ? "'" : "");
                return;
        }
        for (size_t i = 0; i < p->n_partitions && used < size; i++) {
                const BvProbePartition *q = &p->partitions[i];
                used += (size_t)snprintf(buf + used, size - used, "%s %s%s%s%s", i ? "," : "", q->fstype ?: "?",
                                         q->label ? " '" : "", q->label ?: "", q->label ? "'" : "");
        }
}

typedef struct ListArgs {
        const char *name;
        size_t last; /* 0: all */
        bool utc, json;
} ListArgs;

static int parse_last(const char *arg, void *ret)
{
        char *end;

        errno = 0;
        unsigned long v = strtoul(arg, &end, 10);
        if (end == arg || *end || errno || v == 0 || arg[0] == '-') {
                log_error("invalid --last '%s' (a number of snapshots, 1 or more)", arg);
                return -EINVAL;
        }
        *(size_t *)ret = v;
        return 0;
}

/* Returns -1 to go on, otherwise an exit code. */
static int parse_list_args(int argc, char **argv, SecretArgs *s, ListArgs *a, const char **ret_repo)
{
        const CliOption options[] = {
                CLI_FLAG("json", &a->json), CLI_STR("name", &a->name), CLI_PARSED("last", parse_last, &a->last),
                CLI_FLAG("utc", &a->utc),   POINT_IN_TIME_OPTION(s), {},
        };
        int r = cli_parse(&(CliCommand){ .name = "list", .usage = usage_text, .options = options, .secret = s,
                                         .args = "REPO", .repo = true },
                          &argc, &argv);
        if (r < 0)
                *ret_repo = argv[optind];
        return r;
}

void format_time_local(uint64_t t, char out[64])
{
        time_t tt = (time_t)t;
        struct tm tm;
        if (!localtime_r(&tt, &tm) || !strftime(out, 64, "%Y-%m-%d %H:%M:%S %z", &tm))
                snprintf(out, 64, "%llu", (unsigned long long)t);
}

static void print_table(BvSnapshot *const *list, const bool *prot, size_t n, bool utc)
{
        if (n > 0)
                printf("%-8s  %-25s  %10s  %-24s  %s\n", "ID", utc ? "TIME (UTC)" : "TIME", "SIZE", "NAME", "CONTENT");
        for (size_t i = 0; i < n; i++) {
                const BvSnapshot *s = list[i];
                char when[64], size[32], content[256];
                if (utc)
                        bv_format_time_utc(s->time, when);
                else
                        format_time_local(s->time, when);
                describe_probe(&s->source, content, sizeof(content));
                /* names and labels come from whoever wrote the repository or the source */
                _cleanup_free_ char *name = escape_text(s->name ? s->name : "", 0),
                                   *shown = escape_text(content, 0);
                printf("%-8.8s  %-25s  %10s  %-24s  %s%s\n", s->id, when, format_bytes(s->size, size),
                       name ? name : "?", shown ? shown : "?", prot[i] ? " [protected]" : "");
        }
}

static int print_json_list(BvSnapshot *const *list, const bool *prot, size_t n, const char *path)
{
        _cleanup_(json_object_putp) struct json_object *arr = json_object_new_array();
        if (!arr)
                return log_error_errno(-ENOMEM, "cannot list '%s'", path);
        for (size_t i = 0; i < n; i++) {
                struct json_object *o = json_snapshot(list[i]);
                if (!o || bv_json_add(o, "protected", json_object_new_boolean(prot[i])) < 0 ||
                    json_object_array_add(arr, o) < 0) {
                        json_object_put(o);
                        return log_error_errno(-ENOMEM, "cannot list '%s'", path);
                }
        }
        json_print(arr);
        return EXIT_OK;
}

int cmd_list(int argc, char **argv)
{
        SecretArgs sargs = {};
        ListArgs a = {};
        const char *path = NULL;
        int r;

        r = parse_list_args(argc, argv, &sargs, &a, &path);
        if (r >= 0)
                return r;
        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_RECORDS);
        BvSnapshot *const *all;
        size_t n_all, n = 0;
        char said[STORAGE_SAID_MAX];
        r = bv_repo_snapshots(repo, &all, &n_all);
        report_snapshot_damage(repo);
        if (r < 0)
                return log_error_errno(r, "cannot read the snapshots of '%s'%s", path,
                                       storage_said(repo, said, sizeof(said)));
        _cleanup_free_ BvSnapshot **list = calloc(n_all + 1, sizeof(*list));
        if (!list)
                return log_error_errno(-ENOMEM, "cannot list '%s'", path);
        for (size_t i = 0; i < n_all; i++)
                if (!a.name || (all[i]->name && strcmp(all[i]->name, a.name) == 0))
                        list[n++] = all[i];
        size_t skip = a.last && a.last < n ? n - a.last : 0;
        _cleanup_free_ bool *prot = calloc(n + 1, sizeof(bool));
        if (!prot)
                return log_error_errno(-ENOMEM, "cannot list '%s'", path);
        for (size_t i = skip; i < n; i++) /* the listing that found the records showed their markers */
                prot[i - skip] = list[i]->protect_listed;
        if (a.json)
                return print_json_list(list + skip, prot, n - skip, path);
        print_table(list + skip, prot, n - skip, a.utc);
        return EXIT_OK;
}
