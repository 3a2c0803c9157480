/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"
#include "snapshot-json.h"
#include "snapshot.h"

static const char usage_text[] =
        "Usage: blkvault backup REPO SOURCE [OPTIONS]\n\n"
        "Back up SOURCE (a block device, a raw image file, - for stdin, or an NBD export:\n"
        "nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH) as a new snapshot.\n\n"
        "  --name=NAME              snapshot name (default: the source's file name, or 'stdin'): at most\n"
        "                           255 bytes, no control characters, not 4 to 32 hex digits, not 'latest'\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              compression/encryption threads (default: one per CPU)\n"
        "  --no-direct              read through the page cache instead of O_DIRECT\n"
        "  --force-read             read a file even if it is unchanged since its last snapshot\n"
        "  --full-read-every=N      read an unchanged file (or a whole NBD export) on every Nth backup\n"
        "  --dirty-bitmap=NAME      NBD: read only what qemu's dirty bitmap NAME marks dirty since the\n"
        "                           last snapshot of the same name (qemu-nbd -B NAME)\n"
        "  --compare-with=PATH      a file on btrfs or XFS: PATH is the version the last snapshot of the\n"
        "                           same name read, kept as a reflink copy (cp --reflink=always\n"
        "                           --preserve=timestamps) or in a btrfs snapshot: extents the two still\n"
        "                           share are not read\n"
        "  --wait                   wait for another writer instead of failing\n"
        "  -q, --quiet              no progress line\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -h, --help\n";

/* The new snapshot, its stats nested as list prints them, and how the source was read. Until
 * 0.3 the stats are also repeated at the top level, where earlier releases printed them. */
static struct json_object *backup_json(const BvBackupStats *s, const char *name)
{
        _cleanup_(json_object_putp) struct json_object *stats = bv_snapshot_stats_json(&s->counts);
        _cleanup_(json_object_putp) struct json_object *o = NULL;

        if (!stats)
                return NULL;
        o = BV_JSON_OBJECT({ "snapshot", json_object_new_string(s->snapshot_id) },
                           { "name", json_object_new_string(name) },
                           { "size", json_object_new_uint64(s->size) },
                           { "stats", json_object_get(stats) },
                           { "io", json_object_new_string(s->used_uring ? "io_uring" : "pread") },
                           { "direct", json_object_new_boolean(s->used_direct) },
                           { s->reused_from[0] ? "reused_from" : NULL,
                             s->reused_from[0] ? json_object_new_string(s->reused_from) : NULL },
                           { s->changed_from[0] ? "changed_from" : NULL,
                             s->changed_from[0] ? json_object_new_string(s->changed_from) : NULL },
                           { s->changed_reason[0] ? "read_whole_because" : NULL,
                             s->changed_reason[0] ? json_object_new_string(s->changed_reason) : NULL });
        if (!o || json_add_members(o, stats) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* The result line, or the JSON document with --json. */
static int backup_report(const BvBackupStats *stats, const char *name, const char *source, bool json)
{
        const char *base = strrchr(source, '/');

        if (!name)
                name = strcmp(source, "-") == 0 ? "stdin" : base ? base + 1 : source;
        if (json) {
                _cleanup_(json_object_putp) struct json_object *o = backup_json(stats, name);
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot print the result");
                json_print(o);
        } else {
                char a[32], b[32], d[32], e[32];
                log_info("snapshot %.8s: %s image, %s data, %s new, %s stored, in %.1f s", stats->snapshot_id,
                         format_bytes(stats->size, a), format_bytes(stats->counts.bytes_data, b),
                         format_bytes(stats->counts.bytes_new, d), format_bytes(stats->counts.bytes_stored, e),
                         stats->counts.seconds);
                if (stats->reused_from[0])
                        log_info("unchanged since snapshot %.8s: not read (--force-read reads it)",
                                 stats->reused_from);
                if (stats->changed_from[0])
                        log_info("read only what changed since snapshot %.8s: %s", stats->changed_from,
                                 format_bytes(stats->counts.bytes_read, a));
        }
        if (stats->counts.bytes_map_wrong > 0)
                log_warning("the changed-block map was wrong: %llu bytes it called unchanged had changed (this "
                            "snapshot read them; do not trust the map: recreate the bitmap or the copy)",
                            (unsigned long long)stats->counts.bytes_map_wrong);
        return EXIT_OK;
}

static int parse_full_read_every(const char *arg, unsigned *ret)
{
        char *end;
        unsigned long v = strtoul(arg, &end, 10);

        if (end == arg || *end || v == 0 || v > 1000000) {
                log_error("invalid --full-read-every '%s' (1 to 1000000)", arg);
                return -EINVAL;
        }
        *ret = (unsigned)v;
        return 0;
}

static int backup_error(int r, const char *source)
{
        if (r == -EACCES || r == -EPERM) {
                log_error("cannot read '%s': %s (reading a block device needs root or the disk group)", source,
                          strerror(-r));
                return EXIT_PERM;
        }
        if (r == -ENOSPC)
                return log_error_errno(r, "backup of '%s' failed: the repository's target is full "
                                          "(earlier snapshots are intact)", source);
        return log_error_errno(r, "backup of '%s' failed (nothing was published)", source);
}

/* The source could not be opened: nothing was read. */
static int open_error(int r, const char *source, const BvSourceOptions *o)
{
        if (o->compare_with && r == -EOPNOTSUPP) {
                log_error("cannot compare '%s' with '%s': the filesystem cannot map their extents (FIEMAP; btrfs "
                          "and XFS can)", source, o->compare_with);
                return EXIT_ERROR;
        }
        if (o->compare_with && r == -EINVAL) {
                log_error("--compare-with needs SOURCE and PATH to be two regular files ('%s', '%s')", source,
                          o->compare_with);
                return EXIT_USAGE;
        }
        if (o->compare_with && r == -ENOENT)
                return log_error_errno(r, "cannot open '%s' or '%s'", source, o->compare_with);
        if (!bv_source_is_nbd_uri(source))
                return backup_error(r, source);
        if (r == -ENOMSG) {
                log_error("the NBD server at '%s' exports no dirty bitmap '%s' (serve it with qemu-nbd -B %s, "
                          "or name it in block-export-add's bitmaps)", source, o->dirty_bitmap, o->dirty_bitmap);
                return EXIT_ERROR;
        }
        return log_error_errno(r, "cannot read the NBD export '%s' (is the server running?)", source);
}

int cmd_backup(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "name", required_argument, NULL, 'n' },
                { "json", no_argument, NULL, 'j' },
                { "threads", required_argument, NULL, 't' },
                { "no-direct", no_argument, NULL, 'D' },
                { "force-read", no_argument, NULL, 'R' },
                { "full-read-every", required_argument, NULL, 'E' },
                { "dirty-bitmap", required_argument, NULL, 'B' },
                { "compare-with", required_argument, NULL, 'M' },
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
                case 'R':
                        opts.force_read = true;
                        break;
                case 'E':
                        if (parse_full_read_every(optarg, &opts.full_read_every) < 0)
                                return EXIT_USAGE;
                        break;
                case 'B':
                        opts.source.dirty_bitmap = optarg;
                        break;
                case 'M':
                        opts.source.compare_with = optarg;
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
        if (opts.source.dirty_bitmap && !bv_source_is_nbd_uri(source)) {
                log_error("--dirty-bitmap needs an NBD source (nbd://HOST/EXPORT or nbd+unix:///EXPORT?socket=PATH)");
                return EXIT_USAGE;
        }
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
        BvSource *src = NULL;
        r = bv_source_open(source, &opts.source, &src);
        if (r < 0) {
                progress_done(&progress);
                return open_error(r, source, &opts.source);
        }
        r = bv_backup(repo, src, &opts, &stats);
        bv_source_free(src);
        progress_done(&progress);
        if (r < 0)
                return backup_error(r, source);
        if (!stats.used_uring && !json && !bv_source_is_nbd_uri(source))
                log_info("note: io_uring is unavailable, read with pread");
        if (stats.changed_reason[0] && opts.source.dirty_bitmap)
                log_warning("dirty bitmap '%s' not used, read everything: %s", opts.source.dirty_bitmap,
                            stats.changed_reason);
        else if (stats.changed_reason[0])
                log_warning("'%s' not compared with, read everything: %s", opts.source.compare_with,
                            stats.changed_reason);

        return backup_report(&stats, opts.name, source, json);
}
