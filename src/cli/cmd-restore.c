/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>

#include "cli.h"
#include "restore.h"

static const char usage_text[] =
        "Usage: blkvault restore REPO SNAPSHOT DEST [OPTIONS]\n\n"
        "Restore SNAPSHOT (an id, a unique id prefix, a name for its newest snapshot, or 'latest')\n"
        "to DEST: a new file, written sparse, or a block device at least as large as the image.\n\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              decoding threads (default: one per CPU)\n"
        "  -q, --quiet              no progress line\n"
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
        "  -h, --help\n";

/* The result line, or the JSON document with --json. */
static int restore_report(const BvSnapshot *snap, const char *dest, const BvRestoreStats *stats, bool json)
{
        if (json) {
                _cleanup_(json_object_putp) struct json_object *o =
                        BV_JSON_OBJECT({ "snapshot", json_object_new_string(snap->id) },
                                       { "size", json_object_new_uint64(stats->size) },
                                       { "bytes_written", json_object_new_uint64(stats->bytes_written) },
                                       { "bytes_zero", json_object_new_uint64(stats->bytes_zero) },
                                       { "seconds", json_object_new_double(stats->seconds) });
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot print the result");
                json_print(o);
        } else {
                char a[32], b[32];
                log_info("restored snapshot %.8s to '%s': %s image, %s written, in %.1f s", snap->id, dest,
                         format_bytes(stats->size, a), format_bytes(stats->bytes_written, b), stats->seconds);
        }
        return EXIT_OK;
}

int cmd_restore(int argc, char **argv)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "threads", required_argument, NULL, 't' },
                { "quiet", no_argument, NULL, 'q' },
                SECRET_OPTIONS,
                {},
        };
        SecretArgs sargs = {};
        BvRestoreOptions opts = {};
        bool json = false, quiet = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "hq", options, NULL)) >= 0) {
                if (secret_args_parse(&sargs, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage_text);
                case 'j':
                        json = true;
                        break;
                case 't':
                        if (parse_threads(optarg, &opts.threads) < 0)
                                return EXIT_USAGE;
                        break;
                case 'q':
                        quiet = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 3 != argc) {
                log_error("expected three arguments: REPO SNAPSHOT DEST (see 'blkvault restore --help')");
                return EXIT_USAGE;
        }
        const char *path = argv[optind], *spec = argv[optind + 1], *dest = argv[optind + 2];

        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        r = open_repo(path, &sargs, BV_OPEN_READ, &repo);
        if (r != EXIT_OK)
                return r;
        const BvSnapshot *snap;
        r = find_snapshot(repo, spec, &snap);
        if (r != EXIT_OK)
                return r;

        Progress progress;
        progress_init(&progress, "restore", quiet || json);
        opts.progress = progress_update;
        opts.progress_userdata = &progress;
        BvRestoreStats stats = {};
        r = bv_restore(repo, snap, dest, &opts, &stats);
        progress_done(&progress);
        if (r == -EBADMSG || r == -EUCLEAN) {
                log_error("restore of snapshot %.8s stopped: %s at image offset %llu (0x%llx); '%s' was not "
                          "left behind as a file", snap->id,
                          r == -EBADMSG ? "damaged data" : "missing data (the repository needs repair)",
                          (unsigned long long)stats.bad_offset, (unsigned long long)stats.bad_offset, dest);
                return EXIT_DAMAGE;
        }
        if (r < 0)
                return log_error_errno(r, "cannot restore snapshot %.8s to '%s'", snap->id, dest);
        return restore_report(snap, dest, &stats, json);
}
