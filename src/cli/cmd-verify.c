/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "conf.h"
#include "verify.h"

static const char usage_text[] =
        "Usage: blkvault verify REPO [SNAPSHOT] [OPTIONS]\n\n"
        "Check the structure of REPO (or of one snapshot): snapshot records, map trees, that every\n"
        "chunk is indexed, index segment checksums and pack footers. With --read-data every chunk\n"
        "is also read, authenticated and re-hashed. Damage is reported by snapshot and image offset;\n"
        "the exit status is 4 when anything is damaged.\n\n"
        "  --read-data              read and check every chunk\n"
        "  --sample=PERCENT         with --read-data: read only the packs verified least recently,\n"
        "                           PERCENT of the repository's bytes, and record them in REPO, so\n"
        "                           that successive runs cover every pack\n"
        "  --max-duration=DURATION  with --read-data: the same, stopping after DURATION (30min, 2h)\n"
        "  --written                with SNAPSHOT and --read-data: read only the chunks that the\n"
        "                           snapshot before it of the same name does not reference\n"
        "  --json                   print the result as JSON\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

/* --sample, --max-duration and --written (scheduled verification) */
static int parse_sample(const char *arg, void *ret)
{
        return parse_unsigned_arg("--sample", arg, 1, 100, ret);
}

static int parse_max_duration(const char *arg, void *ret)
{
        uint64_t secs;
        if (bv_conf_parse_duration(arg, &secs) < 0 || secs == 0) {
                log_error("--max-duration=%s: expected a duration such as 30min, 2h or 1d", arg);
                return -EINVAL;
        }
        *(uint64_t *)ret = secs * 1000000000ull;
        return 0;
}

static int schedule_check(const BvVerifyOptions *o)
{
        if ((o->sample_percent || o->max_duration_ns) && (!o->read_data || o->snapshot)) {
                log_error("--sample and --max-duration need --read-data and no SNAPSHOT");
                return EXIT_USAGE;
        }
        if (o->written && (!o->read_data || !o->snapshot)) {
                log_error("--written needs --read-data and a SNAPSHOT");
                return EXIT_USAGE;
        }
        return EXIT_OK;
}

static void schedule_report(const BvVerifyOptions *o, const BvVerifyStats *st, bool json)
{
        if (st->state_reset)
                log_warning("verify-state in the repository did not parse; starting the schedule anew");
        if (json || !(o->sample_percent || o->max_duration_ns))
                return;
        log_info("scheduled: data of %llu of %llu packs read%s; %llu packs never read yet",
                 (unsigned long long)st->packs_read, (unsigned long long)st->packs,
                 st->stopped ? " (stopped at --max-duration)" : "", (unsigned long long)st->packs_never);
}

/* What the verified snapshots' backups could not read (backup --skip-unreadable). */
static void note_unreadable(BvRepo *repo, const char *spec, bool json)
{
        BvSnapshot *const *list;
        const BvSnapshot *one;
        size_t n;

        if (json)
                return; /* in each snapshot's record, which 'info --json' prints */
        if (spec ? bv_repo_find_snapshot(repo, spec, &one) < 0 : bv_repo_snapshots(repo, &list, &n) < 0)
                return;
        if (spec)
                list = (BvSnapshot *const *)&one, n = 1;
        for (size_t i = 0; i < n; i++) {
                char prefix[64];
                snprintf(prefix, sizeof(prefix), "note: snapshot %.8s: ", list[i]->id);
                print_unreadable(list[i], stderr, prefix);
        }
}

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
        BvVerifyOptions vo = {};
        const CliOption options[] = { CLI_FLAG("read-data", &vo.read_data), CLI_FLAG("json", &rep.json),
                                      CLI_PARSED("sample", parse_sample, &vo.sample_percent),
                                      CLI_PARSED("max-duration", parse_max_duration, &vo.max_duration_ns),
                                      CLI_FLAG("written", &vo.written), POINT_IN_TIME_OPTION(&sargs), {} };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "verify", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "REPO [SNAPSHOT]", .repo = true);
        int r;
        const char *path = argv[optind], *spec = optind + 1 < argc ? argv[optind + 1] : NULL;
        vo.snapshot = spec;
        r = schedule_check(&vo);
        if (r != EXIT_OK)
                return r;

        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_READ);
        if (spec) {
                const BvSnapshot *snap;
                r = find_snapshot(repo, spec, &snap);
                if (r != EXIT_OK)
                        return r;
                vo.snapshot = spec = snap->id; /* NAME@latest and short ids resolved once, here */
        }
        if (rep.json)
                rep.problems = json_object_new_array();
        BvVerifyStats stats = {};
        BvRepoProblem problem;
        Progress progress;
        progress_init(&progress, "verify: read", rep.json || !vo.read_data);
        rep.progress = &progress;
        vo.progress = progress_update, vo.progress_userdata = &progress;
        vo.problem = &problem;
        r = bv_verify_opts(repo, &vo, on_problem, &rep, &stats);
        progress_done(&progress);
        if (r < 0 && r != -EBADMSG) {
                int e;
                json_object_put(rep.problems);
                if ((e = report_open_problem(path, &problem, r)) >= 0)
                        return e; /* verify-state refused */
                char said[STORAGE_SAID_MAX];
                storage_said(repo, said, sizeof(said));
                if (problem.path[0])
                        return log_error_errno(r, "cannot verify '%s': '%s'%s", path, problem.path, said);
                return log_error_errno(r, "cannot verify '%s'%s", path, said);
        }
        if (rep.json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "ok", json_object_new_boolean(r == 0));
                json_object_object_add(o, "snapshots", json_object_new_uint64(stats.snapshots));
                json_object_object_add(o, "map_nodes", json_object_new_uint64(stats.map_nodes));
                json_object_object_add(o, "chunks_checked", json_object_new_uint64(stats.chunks_checked));
                json_object_object_add(o, "bytes_checked", json_object_new_uint64(stats.bytes_checked));
                json_object_object_add(o, "packs", json_object_new_uint64(stats.packs));
                if (vo.sample_percent || vo.max_duration_ns) {
                        json_object_object_add(o, "packs_read", json_object_new_uint64(stats.packs_read));
                        json_object_object_add(o, "packs_never_read", json_object_new_uint64(stats.packs_never));
                }
                json_object_object_add(o, "problems", rep.problems);
                json_print(o);
                json_object_put(o);
        } else if (r == 0) {
                char b[32];
                log_info("ok: %llu snapshots, %llu map nodes, %llu packs%s%llu chunks (%s) read and checked",
                         (unsigned long long)stats.snapshots, (unsigned long long)stats.map_nodes,
                         (unsigned long long)stats.packs, vo.read_data ? ", " : "; no data read, ",
                         (unsigned long long)stats.chunks_checked, format_bytes(stats.bytes_checked, b));
        } else
                log_error("%llu problems found in '%s'", (unsigned long long)stats.problems, path);
        schedule_report(&vo, &stats, rep.json);
        note_unreadable(repo, spec, rep.json);
        return r == 0 ? EXIT_OK : EXIT_DAMAGE;
}
