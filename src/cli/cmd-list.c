/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>

#include "cli.h"
#include "timeutil.h"

static const char usage_text[] =
        "Usage: blkvault list REPO [OPTIONS]\n\n"
        "List the snapshots of REPO, oldest first.\n\n"
        "  --json       a JSON list: snapshot, name, time, time_utc, size, source, chunker, stats\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -h, --help\n";

/* "gpt: ext4 'root', xfs 'data'" from the probe, for the table. */
static void describe_probe(const BvSnapshotSource *src, char *buf, size_t size)
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
                used += (size_t)snprintf(buf + used, size - used, " %s%s%s%s", q->fstype ?: "?", q->label ? "'" : "",
                                         q->label ?: "", q->label ? "'" : "");
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
        report_snapshot_damage(repo);
        if (r < 0)
                return log_error_errno(r, "cannot read the snapshots of '%s'", path);

        if (json) {
                _cleanup_(json_object_putp) struct json_object *arr = json_object_new_array();
                if (!arr)
                        return log_error_errno(-ENOMEM, "cannot list '%s'", path);
                for (size_t i = 0; i < n; i++) {
                        struct json_object *o = json_snapshot(list[i]);
                        if (!o || json_object_array_add(arr, o) < 0) {
                                json_object_put(o);
                                return log_error_errno(-ENOMEM, "cannot list '%s'", path);
                        }
                }
                json_print(arr);
        } else {
                if (n > 0)
                        printf("%-8s  %-20s  %10s  %-24s %s\n", "ID", "TIME (UTC)", "SIZE", "NAME", "CONTENT");
                for (size_t i = 0; i < n; i++) {
                        const BvSnapshot *s = list[i];
                        char when[32], size[32], content[256];
                        bv_format_time_utc(s->time, when);
                        describe_probe(&s->source, content, sizeof(content));
                        printf("%-8.8s  %-20s  %10s  %-24s %s\n", s->id, when, format_bytes(s->size, size),
                               s->name ? s->name : "", content);
                }
        }
        return EXIT_OK;
}
