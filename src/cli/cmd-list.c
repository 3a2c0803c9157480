/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "timeutil.h"

static const char usage_text[] =
        "Usage: blkvault list REPO [OPTIONS]\n\n"
        "List the snapshots of REPO, oldest first.\n\n"
        "  --json       a JSON list: id, name, time, time_utc, size, source, stats\n"
        "  --passphrase-file=FILE, --key-file=FILE\n"
        "  -h, --help\n";

static const char *json_str(struct json_object *o, const char *key)
{
        struct json_object *v;
        if (!o || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return json_object_get_string(v);
}

/* "gpt: ext4 'root', xfs 'data'" from the probe, for the table. */
static void describe_probe(struct json_object *source, char *buf, size_t size)
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

int cmd_list(int argc, char **argv)
{
        SecretArgs sargs = {};
        const char *path;
        bool json;
        int r;

        r = parse_repo_json_args(argc, argv, usage_text, "list", &sargs, &json, &path);
        if (r >= 0)
                return r;
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        BvSnapshot *const *list;
        size_t n;
        r = bv_repo_snapshots(repo, &list, &n);
        if (r < 0)
                return log_error_errno(r, "cannot read the snapshots of '%s'", path);

        if (json) {
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
        } else {
                if (n > 0)
                        printf("%-8s  %-20s  %10s  %-24s %s\n", "ID", "TIME (UTC)", "SIZE", "NAME", "CONTENT");
                for (size_t i = 0; i < n; i++) {
                        const BvSnapshot *s = list[i];
                        char when[32], size[32], content[256];
                        bv_format_time_utc(s->time, when);
                        describe_probe(s->source, content, sizeof(content));
                        /* names and labels come from whoever wrote the repository or the source */
                        _cleanup_free_ char *name = escape_text(s->name ? s->name : "", 0),
                                           *shown = escape_text(content, 0);
                        if (!name || !shown)
                                return log_error_errno(-ENOMEM, "cannot list the snapshots of '%s'", path);
                        printf("%-8.8s  %-20s  %10s  %-24s %s\n", s->id, when, format_bytes(s->size, size), name,
                               shown);
                }
        }
        return EXIT_OK;
}
