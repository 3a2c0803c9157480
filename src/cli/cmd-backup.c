/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"
#include "snapshot.h"

static const char usage_text[] =
        "Usage: blkvault backup REPO SOURCE [OPTIONS]\n\n"
        "Back up SOURCE (a block device, a raw image file, or - for stdin) as a new snapshot.\n\n"
        "  --name=NAME              snapshot name (default: the source's file name, or 'stdin'): at most\n"
        "                           255 bytes, no control characters, not 4 to 32 hex digits, not 'latest'\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              compression/encryption threads (default: one per CPU)\n"
        "  --no-direct              read through the page cache instead of O_DIRECT\n"
        "  --wait                   wait for another writer instead of failing\n"
        "  -q, --quiet              no progress line\n"
        "  --passphrase-file=FILE, --key-file=FILE\n"
        "  -h, --help\n";

static struct json_object *stats_json(const BvBackupStats *s, const char *name)
{
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "snapshot", json_object_new_string(s->snapshot_id));
        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "size", json_object_new_uint64(s->size));
        json_object_object_add(o, "bytes_read", json_object_new_uint64(s->bytes_read));
        json_object_object_add(o, "bytes_zero", json_object_new_uint64(s->bytes_zero));
        json_object_object_add(o, "bytes_hole", json_object_new_uint64(s->bytes_hole));
        json_object_object_add(o, "bytes_data", json_object_new_uint64(s->bytes_data));
        json_object_object_add(o, "bytes_new", json_object_new_uint64(s->bytes_new));
        json_object_object_add(o, "bytes_stored", json_object_new_uint64(s->bytes_stored));
        json_object_object_add(o, "chunks", json_object_new_uint64(s->chunks));
        json_object_object_add(o, "chunks_new", json_object_new_uint64(s->chunks_new));
        json_object_object_add(o, "packs", json_object_new_uint64(s->packs));
        json_object_object_add(o, "seconds", json_object_new_double(s->seconds));
        json_object_object_add(o, "io", json_object_new_string(s->used_uring ? "io_uring" : "pread"));
        json_object_object_add(o, "direct", json_object_new_boolean(s->used_direct));
        return o;
}

int cmd_backup(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "name", required_argument, NULL, 'n' },
                { "json", no_argument, NULL, 'j' },
                { "threads", required_argument, NULL, 't' },
                { "no-direct", no_argument, NULL, 'D' },
                { "wait", no_argument, NULL, 'w' },
                { "quiet", no_argument, NULL, 'q' },
                SECRET_OPTIONS,
                {},
        };
        SecretArgs sargs = {};
        BvBackupOptions opts = {};
        bool json = false, quiet = false, wait = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "hq", options, NULL)) >= 0) {
                if (secret_args_parse(&sargs, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 'n':
                        opts.name = optarg;
                        break;
                case 'j':
                        json = true;
                        break;
                case 't':
                        if (parse_threads(optarg, &opts.threads) < 0)
                                return EXIT_USAGE;
                        break;
                case 'D':
                        opts.source.no_direct = true;
                        break;
                case 'w':
                        wait = true;
                        break;
                case 'q':
                        quiet = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 2 != argc) {
                log_error("expected two arguments: REPO SOURCE (see 'blkvault backup --help')");
                return EXIT_USAGE;
        }
        const char *path = argv[optind], *source = argv[optind + 1];
        const char *name = opts.name ? opts.name : bv_backup_default_name(source);
        const char *problem = bv_snapshot_name_problem(name);
        if (problem) {
                _cleanup_free_ char *shown = escape_text(name, 64);
                log_error("invalid snapshot name '%s'%s: %s", shown ? shown : "?",
                          opts.name ? "" : " (the source's file name: choose one with --name)", problem);
                return EXIT_USAGE;
        }

        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_WRITE | (wait ? BV_OPEN_WAIT : 0), &repo);
        if (r != EXIT_OK)
                return r;

        Progress progress;
        progress_init(&progress, "backup", quiet || json);
        opts.progress = progress_update;
        opts.progress_userdata = &progress;

        BvBackupStats stats = {};
        r = bv_backup(repo, source, &opts, &stats);
        progress_done(&progress);
        if (r < 0) {
                if (r == -ENOSPC)
                        return log_error_errno(r, "backup of '%s' failed: the repository's target is full "
                                                  "(earlier snapshots are intact)", source);
                return log_error_errno(r, "backup of '%s' failed (nothing was published)", source);
        }
        if (!stats.used_uring && !json)
                log_info("note: io_uring is unavailable, read with pread");

        if (json) {
                struct json_object *o = stats_json(&stats, name);
                json_print(o);
                json_object_put(o);
        } else {
                char a[32], b[32], d[32], e[32];
                log_info("snapshot %.8s: %s image, %s data, %s new, %s stored, in %.1f s", stats.snapshot_id,
                         format_bytes(stats.size, a), format_bytes(stats.bytes_data, b),
                         format_bytes(stats.bytes_new, d), format_bytes(stats.bytes_stored, e), stats.seconds);
        }
        return EXIT_OK;
}
