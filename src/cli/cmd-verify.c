/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "verify.h"

static const char usage_text[] =
        "Usage: blkvault verify REPO [SNAPSHOT] [OPTIONS]\n\n"
        "Check the structure of REPO (or of one snapshot): snapshot records, map trees, that every\n"
        "chunk is indexed, index segment checksums and pack footers. With --read-data every chunk\n"
        "is also read, authenticated and re-hashed. Damage is reported by snapshot and image offset;\n"
        "the exit status is 4 when anything is damaged.\n\n"
        "  --read-data              read and check every chunk\n"
        "  --json                   print the result as JSON\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -q, --quiet              no progress or status lines\n"
        "  -v, --verbose            more detail (timings, how the repository was opened)\n"
        "  -h, --help\n";

typedef struct Report {
        bool json;
        struct json_object *problems;
        Progress *progress; /* cleared before a problem is printed */
} Report;

static void on_problem(const BvVerifyProblem *p, void *userdata)
{
        Report *rep = userdata;
        if (rep->json) {
                struct json_object *o = json_object_new_object();
                if (p->snapshot_id) {
                        json_object_object_add(o, "snapshot", json_object_new_string(p->snapshot_id));
                        json_object_object_add(o, "offset", json_object_new_uint64(p->offset));
                }
                json_object_object_add(o, "what", json_object_new_string(p->what ? p->what : ""));
                json_object_object_add(o, "detail", json_object_new_string(p->detail ? p->detail : ""));
                json_object_object_add(o, "error", json_object_new_string(strerror(-p->error)));
                json_object_array_add(rep->problems, o);
                return;
        }
        if (rep->progress)
                progress_done(rep->progress);
        if (p->snapshot_id)
                fprintf(stderr, "damaged: snapshot %.8s, image offset %llu (0x%llx): %s %s: %s\n", p->snapshot_id,
                        (unsigned long long)p->offset, (unsigned long long)p->offset, p->what ? p->what : "",
                        p->detail ? p->detail : "", strerror(-p->error));
        else
                fprintf(stderr, "damaged: %s %s: %s\n", p->what ? p->what : "", p->detail ? p->detail : "",
                        strerror(-p->error));
}

int cmd_verify(int argc, char **argv)
{
        SecretArgs sargs = {};
        Report rep = {};
        bool read_data = false;
        const CliOption options[] = { CLI_FLAG("read-data", &read_data), CLI_FLAG("json", &rep.json), {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "verify", .usage = usage_text, .options = options, .secret = &sargs,
                                        .min_args = 1, .max_args = 2,
                                        .expected = "expected REPO [SNAPSHOT] (see 'blkvault verify --help')");
        int r;
        const char *path = argv[optind], *spec = optind + 1 < argc ? argv[optind + 1] : NULL;

        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_READ);
        if (spec) {
                const BvSnapshot *snap;
                r = find_snapshot(repo, spec, &snap);
                if (r != EXIT_OK)
                        return r;
        }
        if (rep.json)
                rep.problems = json_object_new_array();
        BvVerifyStats stats = {};
        Progress progress;
        progress_init(&progress, "verify: read", rep.json || !read_data);
        rep.progress = &progress;
        r = bv_verify_progress(repo, spec, read_data, on_problem, &rep, progress_update, &progress, &stats);
        progress_done(&progress);
        if (r < 0 && r != -EBADMSG) {
                json_object_put(rep.problems);
                return log_error_errno(r, "cannot verify '%s'", path);
        }
        if (rep.json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "ok", json_object_new_boolean(r == 0));
                json_object_object_add(o, "snapshots", json_object_new_uint64(stats.snapshots));
                json_object_object_add(o, "map_nodes", json_object_new_uint64(stats.map_nodes));
                json_object_object_add(o, "chunks_checked", json_object_new_uint64(stats.chunks_checked));
                json_object_object_add(o, "bytes_checked", json_object_new_uint64(stats.bytes_checked));
                json_object_object_add(o, "packs", json_object_new_uint64(stats.packs));
                json_object_object_add(o, "problems", rep.problems);
                json_print(o);
                json_object_put(o);
        } else if (r == 0) {
                char b[32];
                log_info("ok: %llu snapshots, %llu map nodes, %llu packs%s%llu chunks (%s) read and checked",
                         (unsigned long long)stats.snapshots, (unsigned long long)stats.map_nodes,
                         (unsigned long long)stats.packs, read_data ? ", " : "; no data read, ",
                         (unsigned long long)stats.chunks_checked, format_bytes(stats.bytes_checked, b));
        } else
                log_error("%llu problems found in '%s'", (unsigned long long)stats.problems, path);
        return r == 0 ? EXIT_OK : EXIT_DAMAGE;
}
