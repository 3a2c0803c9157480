/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <json-c/json.h>
#include <errno.h>
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
        "  --json       a JSON list: id, name, time, time_utc, size, source, stats\n"
        "  --passphrase-file=FILE, --key-file=FILE\n"
        "  -h, --help\n";

const char *json_str(struct json_object *o, const char *key)
{
        struct json_object *v;
        if (!o || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return json_object_get_string(v);
}

/* "gpt: ext4 'root', xfs 'data'" from the probe, for the table. */
void describe_probe(struct json_object *source, char *buf, size_t size)
{
        struct json_object *probe = NULL, *parts = NULL;
        size_t used = 0;
        buf[0] = '\0';
        if (!source || !json_object_object_get_ex(source, "probe", &probe))
                return;
        const char *pttype = json_str(probe, "pttype"), *fstype = json_str(probe, "fstype");
        if (pttype)
                used += (size_t)snprintf(buf + used, size - used, "%s:", pttype);
        else if (fstype) {
                const char *label = json_str(probe, "label");
                snprintf(buf, size, "%s%s%s%s", fstype, label ? " '" : "", label ? label : "", label ? "'" : "");
                return;
        }
        if (json_object_object_get_ex(probe, "partitions", &parts) && json_object_is_type(parts, json_type_array))
                for (size_t i = 0; i < json_object_array_length(parts) && used < size; i++) {
                        struct json_object *p = json_object_array_get_idx(parts, i);
                        const char *fs = json_str(p, "fstype"), *label = json_str(p, "label");
                        used += (size_t)snprintf(buf + used, size - used, " %s%s%s%s", fs ? fs : "?",
                                                 label ? "'" : "", label ? label : "", label ? "'" : "");
                }
}

typedef struct ListArgs {
        const char *name;
        size_t last; /* 0: all */
        bool utc, json;
} ListArgs;

/* Returns -1 to go on, otherwise an exit code. */
static int parse_list_args(int argc, char **argv, SecretArgs *s, ListArgs *a, const char **ret_repo)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "name", required_argument, NULL, 'n' },
                { "last", required_argument, NULL, 'l' },
                { "utc", no_argument, NULL, 'u' },
                SECRET_OPTIONS,
                {},
        };
        int c;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (secret_args_parse(s, c, optarg))
                        continue;
                char *end;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 'j':
                        a->json = true;
                        break;
                case 'n':
                        a->name = optarg;
                        break;
                case 'l':
                        a->last = strtoul(optarg, &end, 10);
                        if (end == optarg || *end || a->last == 0 || optarg[0] == '-') {
                                log_error("invalid --last '%s' (a number of snapshots, 1 or more)", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'u':
                        a->utc = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 1 != argc) {
                log_error("expected exactly one argument: REPO (see 'blkvault help list')");
                return EXIT_USAGE;
        }
        *ret_repo = argv[optind];
        return -1;
}

static void print_table(BvSnapshot *const *list, size_t n, bool utc)
{
        if (n > 0)
                printf("%-8s  %-25s  %10s  %-24s %s\n", "ID", utc ? "TIME (UTC)" : "TIME", "SIZE", "NAME", "CONTENT");
        for (size_t i = 0; i < n; i++) {
                const BvSnapshot *s = list[i];
                char when[64], size[32], content[256];
                time_t t = (time_t)s->time;
                struct tm tm;
                if (utc)
                        bv_format_time_utc(s->time, when);
                else if (!localtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", &tm))
                        snprintf(when, sizeof(when), "%llu", (unsigned long long)s->time);
                describe_probe(s->source, content, sizeof(content));
                printf("%-8.8s  %-25s  %10s  %-24s %s\n", s->id, when, format_bytes(s->size, size),
                       s->name ? s->name : "", content);
        }
}

static void print_json(BvSnapshot *const *list, size_t n)
{
        struct json_object *arr = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                const BvSnapshot *s = list[i];
                char when[32];
                struct json_object *o = json_object_new_object();
                bv_format_time_utc(s->time, when);
                json_object_object_add(o, "id", json_object_new_string(s->id));
                json_object_object_add(o, "name", json_object_new_string(s->name ? s->name : ""));
                json_object_object_add(o, "time", json_object_new_uint64(s->time));
                json_object_object_add(o, "time_utc", json_object_new_string(when));
                json_object_object_add(o, "size", json_object_new_uint64(s->size));
                json_object_object_add(o, "source", json_object_get(s->source));
                json_object_object_add(o, "stats", json_object_get(s->stats));
                json_object_array_add(arr, o);
        }
        json_print(arr);
        json_object_put(arr);
}

int cmd_list(int argc, char **argv)
{
        SecretArgs sargs = {};
        ListArgs a = {};
        const char *path;
        int r;

        r = parse_list_args(argc, argv, &sargs, &a, &path);
        if (r >= 0)
                return r;
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        BvSnapshot *const *all;
        size_t n_all, n = 0;
        r = bv_repo_snapshots(repo, &all, &n_all);
        if (r < 0)
                return log_error_errno(r, "cannot read the snapshots of '%s'", path);
        _cleanup_free_ BvSnapshot **list = calloc(n_all + 1, sizeof(*list));
        if (!list)
                return log_error_errno(-ENOMEM, "cannot list the snapshots");
        for (size_t i = 0; i < n_all; i++)
                if (!a.name || (all[i]->name && strcmp(all[i]->name, a.name) == 0))
                        list[n++] = all[i];
        size_t skip = a.last && a.last < n ? n - a.last : 0;
        if (a.json)
                print_json(list + skip, n - skip);
        else
                print_table(list + skip, n - skip, a.utc);
        return EXIT_OK;
}
