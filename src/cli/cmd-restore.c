/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "restore.h"

static const char usage_text[] =
        "Usage: blkvault restore REPO SNAPSHOT DEST [OPTIONS]\n\n"
        "Restore SNAPSHOT (an id, a unique id prefix, a name for its newest snapshot, or 'latest')\n"
        "to DEST: a new file, written sparse, or a block device at least as large as the image.\n\n"
        "  --json                   print the result as JSON\n"
        "  --threads=N              decoding threads (default: one per CPU)\n"
        "  -q, --quiet              no progress line\n"
        "  --passphrase-file=FILE, --key-file=FILE\n"
        "  -h, --help\n";

/* The signal (SIGINT, SIGTERM, SIGHUP) that asked the restore to stop; the handler only sets it. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
        interrupted = sig;
}

static int catch_interrupts(void)
{
        struct sigaction sa = { .sa_handler = on_interrupt, .sa_flags = SA_RESTART };

        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
            sigaction(SIGHUP, &sa, NULL) < 0)
                return log_error_errno(-errno, "cannot catch interrupting signals");
        return EXIT_OK;
}

/* Reports a restore stopped by a signal; returns 128 + the signal, as a shell would. */
static int report_interrupt(const BvSnapshot *snap, const char *dest, const BvRestoreStats *stats)
{
        char name[16];

        snprintf(name, sizeof(name), "SIG%s", sigabbrev_np(interrupted) ? sigabbrev_np(interrupted) : "?");
        if (stats->device)
                log_error("restore to %s interrupted at offset %llu of %llu: the device holds a partial image",
                          dest, (unsigned long long)stats->written_below, (unsigned long long)stats->size);
        else
                log_error("restore of snapshot %.8s to '%s' interrupted by %s; nothing was left at '%s'", snap->id,
                          dest, name, dest);
        return 128 + interrupted;
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
        opts.cancel = &interrupted;
        r = catch_interrupts();
        if (r != EXIT_OK)
                return r;
        BvRestoreStats stats = {};
        r = bv_restore(repo, snap, dest, &opts, &stats);
        progress_done(&progress);
        if (r == -ECANCELED && interrupted)
                return report_interrupt(snap, dest, &stats);
        if (r == -EBADMSG || r == -EUCLEAN) {
                log_error("restore of snapshot %.8s stopped: %s at image offset %llu (0x%llx); '%s' was not "
                          "left behind as a file", snap->id,
                          r == -EBADMSG ? "damaged data" : "missing data (the repository needs repair)",
                          (unsigned long long)stats.bad_offset, (unsigned long long)stats.bad_offset, dest);
                return EXIT_DAMAGE;
        }
        if (r < 0)
                return log_error_errno(r, "cannot restore snapshot %.8s to '%s'", snap->id, dest);
        if (json) {
                struct json_object *o = json_object_new_object();
                json_object_object_add(o, "snapshot", json_object_new_string(snap->id));
                json_object_object_add(o, "size", json_object_new_uint64(stats.size));
                json_object_object_add(o, "bytes_written", json_object_new_uint64(stats.bytes_written));
                json_object_object_add(o, "bytes_zero", json_object_new_uint64(stats.bytes_zero));
                json_object_object_add(o, "seconds", json_object_new_double(stats.seconds));
                json_print(o);
                json_object_put(o);
        } else {
                char a[32], b[32];
                log_info("restored snapshot %.8s to '%s': %s image, %s written, in %.1f s", snap->id, dest,
                         format_bytes(stats.size, a), format_bytes(stats.bytes_written, b), stats.seconds);
        }
        return EXIT_OK;
}
