/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "cli.h"
#include "macro.h"
#include "mounts.h"
#include "snapshot-json.h"
#include "snapshot.h"

static const char usage_text[] =
        "Usage: blkvault backup REPO SOURCE [OPTIONS]\n\n"
        "Back up SOURCE (a block device, a raw image file, or - for stdin) as a new snapshot.\n\n"
        "  --name=NAME              snapshot name (default: the source's file name, or 'stdin'): at most\n"
        "                           255 bytes, no control characters, not 4 to 32 hex digits, not 'latest'\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              compression/encryption threads (default: one per CPU)\n"
        "  --no-direct              read through the page cache instead of O_DIRECT\n"
        "  --force-read             read a file even if it is unchanged since its last snapshot\n"
        "  --full-read-every=N      read an unchanged file anyway on every Nth backup\n"
        "  --wait                   wait for another writer instead of failing\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -q, --quiet              no progress or status lines\n"
        "  -v, --verbose            more detail (timings, how the repository was opened)\n"
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
                             s->reused_from[0] ? json_object_new_string(s->reused_from) : NULL });
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
        }
        return EXIT_OK;
}

/* A block device whose filesystem is mounted read-write changes while it is read: the image
 * may hold a filesystem that was never on the disk as a whole. Says so, and how to avoid it. */
static void warn_mounted_rw(const char *source)
{
        char mp[4096], dev[64];
        struct stat st;

        if (stat(source, &st) < 0 || !S_ISBLK(st.st_mode) ||
            bv_blockdev_mounted_rw(st.st_rdev, mp, sizeof(mp), dev, sizeof(dev)) <= 0)
                return;
        _cleanup_free_ char *shown = escape_text(mp, 0), *real = realpath(source, NULL);
        const char *base = real ? strrchr(real, '/') : NULL, *m = shown ? shown : mp;
        char what[128] = "";
        if (!base || strcmp(base + 1, dev) != 0) /* a partition or a device stacked on it */
                snprintf(what, sizeof(what), " holds /dev/%s, which", dev);
        log_warning("'%s'%s is mounted read-write on '%s': the image may be inconsistent (the filesystem "
                    "changes while it is read); back up an LVM or filesystem snapshot instead, or freeze it "
                    "for the backup (fsfreeze --freeze '%s', then fsfreeze --unfreeze '%s')",
                    source, what, m, m, m);
}

static int parse_full_read_every(const char *arg, void *ret)
{
        return parse_unsigned_arg("--full-read-every", arg, 1, 1000000, ret);
}

int cmd_backup(int argc, char **argv)
{
        SecretArgs sargs = {};
        BvBackupOptions opts = {};
        bool json = false, wait = false;
        const CliOption options[] = {
                CLI_STR("name", &opts.name),
                CLI_FLAG("json", &json),
                CLI_PARSED("threads", parse_threads, &opts.threads),
                CLI_FLAG("no-direct", &opts.source.no_direct),
                CLI_FLAG("force-read", &opts.force_read),
                CLI_PARSED("full-read-every", parse_full_read_every, &opts.full_read_every),
                CLI_FLAG("wait", &wait),
                {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "backup", .usage = usage_text, .options = options, .secret = &sargs,
                                        .min_args = 2, .max_args = 2,
                                        .expected = "expected two arguments: REPO SOURCE"
                                                    " (see 'blkvault backup --help')");
        int r;
        const char *path = argv[optind], *source = argv[optind + 1];
        const char *name = opts.name ? opts.name : bv_backup_default_name(source);
        const char *problem = bv_snapshot_name_problem(name);
        if (problem) {
                _cleanup_free_ char *shown = escape_text(name, 64);
                log_error("invalid snapshot name '%s'%s: %s", shown ? shown : "?",
                          opts.name ? "" : " (the source's file name: choose one with --name)", problem);
                return EXIT_USAGE;
        }

        OPEN_REPO_OR_RETURN(repo, path, &sargs, BV_OPEN_WRITE | (wait ? BV_OPEN_WAIT : 0));

        Progress progress;
        progress_init(&progress, "backup", json);
        opts.progress = progress_update;
        opts.progress_userdata = &progress;

        BvBackupStats stats = {};
        BvSource *src = NULL;
        r = bv_source_open(source, &opts.source, &src);
        if (r >= 0 && bv_source_kind(src) == BV_SOURCE_BLOCKDEV)
                warn_mounted_rw(source);
        if (r >= 0)
                r = bv_backup(repo, src, &opts, &stats);
        bv_source_free(src);
        progress_done(&progress);
        if (r < 0) {
                if (r == -EACCES || r == -EPERM) {
                        log_error("cannot read '%s': %s (reading a block device needs root or the disk group)",
                                  source, strerror(-r));
                        return EXIT_PERM;
                }
                if (r == -ENOSPC)
                        return log_error_errno(r, "backup of '%s' failed: the repository's target is full "
                                                  "(earlier snapshots are intact)", source);
                return log_error_errno(r, "backup of '%s' failed (nothing was published)", source);
        }
        if (!stats.used_uring && !json)
                log_info("note: io_uring is unavailable, read with pread");

        return backup_report(&stats, opts.name, source, json);
}
