/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "conf.h"
#include "copy.h"

static const char usage_text[] =
        "Usage: blkvault copy SRC DST [SNAPSHOT...] [OPTIONS]\n\n"
        "Copy snapshots (every one by default) from repository SRC to repository DST: a drive to\n"
        "another, to S3 (s3://BUCKET/PREFIX) and back. Only what DST lacks travels: a pack goes as it\n"
        "is when DST lacks everything in it, otherwise the objects it lacks go into new packs. When\n"
        "DST does not exist it is created related to SRC (the same repository id, chunking and keys,\n"
        "so that chunks deduplicate across both); copying into an unrelated repository is refused.\n"
        "A copy that was interrupted continues where it stopped when run again.\n\n"
        "  --dst-passphrase-file=FILE, --dst-passphrase-fd=N, --dst-passphrase-command=CMD,\n"
        "  --dst-key-file=FILE      a DST that copy creates is sealed by this secret (default:\n"
        "                           SRC's key slots, so the secrets that open SRC open DST)\n"
        "  --object-lock=DURATION   S3 Object Lock at DST (an s3:// bucket with Object Lock\n"
        "                           enabled): every object put is retained for DURATION (7d, 12h),\n"
        "                           and what DST's snapshots need is extended when half of it is\n"
        "                           left, so deleting it with DST's credentials fails\n"
        "  --object-lock-mode=MODE  compliance (the default: nobody can shorten it) or governance\n"
        "  --limit-upload=RATE      write at most RATE bytes per second to DST (K, M, G suffixes)\n"
        "  --limit-download=RATE    read at most RATE bytes per second from SRC\n"
        "  --prune                  then apply DST's own retention, given by the --keep-* rules as\n"
        "                           'blkvault prune' takes them, and gc DST\n"
        "  --keep-last=N, --keep-hourly=N, --keep-daily=N, --keep-weekly=N, --keep-monthly=N,\n"
        "  --keep-yearly=N, --keep-within=DURATION   DST's retention (with --prune)\n"
        "  --progress               show progress even when stderr is not a terminal\n"
        "  --json                   print the result as JSON\n"
        SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP
        "\nThe secret options open SRC; DST opens with SRC's keys.\n";

static int parse_rate(const char *arg, void *ret)
{
        if (bv_conf_parse_size(arg, ret) < 0 || *(uint64_t *)ret == 0) {
                log_error("invalid rate '%s' (bytes per second, with a K, M or G suffix: 20M)", arg);
                return -EINVAL;
        }
        return 0;
}

static int parse_lock_duration(const char *arg, void *ret)
{
        if (bv_conf_parse_duration(arg, ret) < 0 || *(uint64_t *)ret == 0) {
                log_error("invalid --object-lock '%s' (a duration: a number and s, min, h, d or w: 30d)", arg);
                return -EINVAL;
        }
        return 0;
}

/* --object-lock-mode: 1 governance, 2 compliance (0: not given). */
static int parse_lock_mode(const char *arg, void *ret)
{
        if (strcmp(arg, "compliance") != 0 && strcmp(arg, "governance") != 0) {
                log_error("invalid --object-lock-mode '%s' (compliance or governance)", arg);
                return -EINVAL;
        }
        *(int *)ret = strcmp(arg, "governance") == 0 ? 1 : 2;
        return 0;
}

/* --object-lock on a DST that cannot take it, said before anything is written there. */
static int check_object_lock(const char *dst)
{
        char why[320] = "";
        int r = bv_copy_check_object_lock(dst, why, sizeof(why));
        if (r == -EOPNOTSUPP) {
                log_error("--object-lock needs an S3 DST (s3://BUCKET/PREFIX): '%s' is a directory, which keeps "
                          "no retention", dst);
                return EXIT_USAGE;
        }
        if (r == -ENOLCK) {
                log_error("--object-lock: the bucket of '%s' has no Object Lock enabled (it is set when a bucket "
                          "is created: x-amz-bucket-object-lock-enabled, 'aws s3api create-bucket "
                          "--object-lock-enabled-for-bucket')", dst);
                return EXIT_USAGE;
        }
        if (r < 0) {
                log_error("cannot open repository '%s': %s (%s)", dst, why[0] ? why : "its Object Lock did not answer",
                          strerror(-r));
                return exit_code_for(r);
        }
        return EXIT_OK;
}

static bool copy_interrupted(void)
{
        return interrupted != 0;
}

/* The snapshots a copy published, for its report: "ID8 (NAME)" each. */
typedef struct Copied {
        struct json_object *ids; /* full ids, for --json */
        char *text;              /* "1a2b3c4d (web), 5e6f7a8b" */
} Copied;

static void on_published(const BvSnapshot *s, void *userdata)
{
        Copied *c = userdata;
        char *t = NULL;
        if (c->ids)
                json_object_array_add(c->ids, json_object_new_string(s->id));
        if (asprintf(&t, "%s%s%.8s%s%s%s", c->text ?: "", c->text ? ", " : "", s->id, s->name ? " (" : "",
                     s->name ?: "", s->name ? ")" : "") >= 0) {
                free(c->text);
                c->text = t;
        }
}

static struct json_object *copy_json(const BvCopyStats *s, Copied *copied)
{
        return BV_JSON_OBJECT({ "snapshots_copied", json_object_new_uint64(s->snapshots_copied) },
                              { "copied", json_object_get(copied->ids) },
                              { "snapshots_present", json_object_new_uint64(s->snapshots_present) },
                              { "objects_sent", json_object_new_uint64(s->objects_sent) },
                              { "objects_present", json_object_new_uint64(s->objects_present) },
                              { "bytes_sent", json_object_new_uint64(s->bytes_sent) },
                              { "bytes_read", json_object_new_uint64(s->bytes_read) },
                              { "packs_whole", json_object_new_uint64(s->packs_whole) },
                              { "packs_repacked", json_object_new_uint64(s->packs_repacked) },
                              { "packs_written", json_object_new_uint64(s->packs_written) },
                              { "packs_resumed", json_object_new_uint64(s->packs_resumed) },
                              { "bytes_resumed", json_object_new_uint64(s->bytes_resumed) },
                              { "objects_retained", json_object_new_uint64(s->objects_retained) },
                              { "requests", json_object_new_uint64(s->requests) },
                              { "seconds", json_object_new_double(s->seconds) });
}

static int copy_report(const BvCopyStats *s, Copied *copied, const char *dst, bool json)
{
        char a[32], b[32];
        if (json) {
                _cleanup_(json_object_putp) struct json_object *o = copy_json(s, copied);
                if (!o)
                        return log_error_errno(-ENOMEM, "cannot print the result");
                json_print(o);
                return EXIT_OK;
        }
        if (is_quiet())
                return EXIT_OK;
        if (s->packs_resumed > 0)
                log_info("resumed an interrupted copy: %llu pack%s (%s) it had sent kept", (unsigned long long)s->packs_resumed,
                         s->packs_resumed == 1 ? "" : "s",
                         format_bytes(s->bytes_resumed, a));
        log_info("copied %llu snapshot%s to '%s'%s%s (%llu there already): %s sent in %llu objects (%llu packs whole, "
                 "%llu repacked into %llu), %llu objects there already, %.1f s, %s/s",
                 (unsigned long long)s->snapshots_copied, s->snapshots_copied == 1 ? "" : "s", dst,
                 copied->text ? ": " : "", copied->text ?: "", (unsigned long long)s->snapshots_present,
                 format_bytes(s->bytes_sent, a), (unsigned long long)s->objects_sent,
                 (unsigned long long)s->packs_whole, (unsigned long long)s->packs_repacked,
                 (unsigned long long)s->packs_written, (unsigned long long)s->objects_present, s->seconds,
                 format_bytes(s->seconds > 0 ? (uint64_t)((double)s->bytes_sent / s->seconds) : 0, b));
        if (s->objects_retained > 0)
                log_info("Object Lock: the retention of %llu objects DST's snapshots need was extended",
                         (unsigned long long)s->objects_retained);
        return EXIT_OK;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(BvCopyDst, bv_copy_dst_close)

/* Why DST did not open (r), said; an exit code. */
static int open_dst_error(int r, const BvRepoProblem *problem, const char *srcpath, const char *dst, bool given)
{
        int e;
        if (r == -EXDEV) {
                log_error("'%s' is a repository not related to '%s': copy goes only between related repositories "
                          "(the same id and keys); to make one, copy into a location that does not exist yet "
                          "('blkvault copy %s NEWDIR')",
                          dst, srcpath, srcpath);
                return EXIT_USAGE;
        }
        if (r == -EBUSY)
                return log_locked(dst, problem, false);
        if (r == -ENOTEMPTY) {
                log_error("'%s' holds %s but no blkvault repository%s%s%s: copy creates a repository only in a "
                          "location that is missing or empty (for S3, a bucket or a prefix that holds no object)",
                          dst, strncmp(dst, "s3://", 5) == 0 ? "objects" : "files",
                          problem->message[0] ? " (" : "", problem->message, problem->message[0] ? " is there)" : "");
                return EXIT_NO_REPO;
        }
        if (r == -EOPNOTSUPP && given) {
                log_error("'%s' is not encrypted: a DST secret would protect nothing", srcpath);
                return EXIT_USAGE;
        }
        if (r == -EBADMSG && !problem->path[0]) {
                log_error("the config of '%s' does not authenticate under the keys of '%s': it is not related "
                          "to it, or it is damaged",
                          dst, srcpath);
                return EXIT_USAGE;
        }
        if (problem->message[0]) {
                log_error("cannot open repository '%s': %s (%s)", dst, problem->message, strerror(-r));
                return exit_code_for(r);
        }
        if ((e = report_open_problem(dst, problem, r)) >= 0)
                return e;
        return log_open_error(dst, r);
}

/* DST opened, made related to SRC first when it holds no repository; an exit code. */
static int open_dst(BvRepo *src, const char *srcpath, const char *dst, const SecretArgs *dargs, BvCopyDst **ret)
{
        BvSecret dsecret = {};
        BvRepoProblem problem = {};
        bool given = dargs->key_file || dargs->passphrase_file || dargs->passphrase_fd || dargs->passphrase_command;
        bool created = false;
        if (given && secret_get(dargs, true, false, &dsecret) < 0)
                return EXIT_KEY;
        int r = bv_copy_open_dst(src, dst, given ? &dsecret : NULL, false, &problem, &created, ret);
        secret_done(&dsecret);
        if (r < 0)
                return open_dst_error(r, &problem, srcpath, dst, given);
        if (created)
                log_verbose("created '%s', related to '%s'", dst, srcpath);
        else if (given)
                log_warning("'%s' exists: the --dst-* secret options only seal a repository that copy creates, "
                            "ignoring",
                            dst);
        if (bv_copy_dst_repo(*ret))
                report_missing_packs(bv_copy_dst_repo(*ret));
        return EXIT_OK;
}

static int copy_failed(int r, const BvCopyStats *s, BvRepo *srcrepo, BvCopyDst *dstrepo, const char *src,
                       const char *dst)
{
        char said[320] = "", at[160] = "";
        if (r == -ENOENT && s->culprit[0] && !strchr(s->culprit, '/')) {
                log_error("no snapshot '%s' in '%s'", s->culprit, src);
                return EXIT_USAGE;
        }
        if (r == -EUCLEAN)
                return log_error_errno(r, "cannot copy from '%s': %s uses an object its index lacks (run 'blkvault "
                                          "verify %s')", src, s->culprit[0] ? s->culprit : "a snapshot", src);
        if (r == -ECANCELED && interrupted) {
                log_error("copy from '%s' to '%s' interrupted by SIG%s: what was sent stays at '%s'; running the "
                          "same copy again resumes it", src, dst, sigabbrev_np(interrupted) ?: "?", dst);
                return 128 + interrupted;
        }
        if (r == -EBADMSG && s->culprit_has_offset) {
                log_error("copy from '%s' to '%s' stopped: '%s' of '%s' is damaged at offset %llu (an object there "
                          "does not authenticate or is not what its index says); it was not stored there and no snapshot was "
                          "published (run 'blkvault verify --read-data %s' and 'blkvault repair %s')",
                          src, dst, s->culprit, src, (unsigned long long)s->culprit_offset, src, src);
                return EXIT_DAMAGE;
        }
        if (r == -ESTALE)
                return log_error_errno(r, "copy to '%s' stopped before '%s': a gc at '%s' moved its epoch since the copy "
                                          "began; run the copy again", dst, s->culprit, dst);
        if (r == -ENOLCK || (r == -EOPNOTSUPP && !bv_copy_dst_storage_error(dstrepo, said, sizeof(said))[0]))
                return check_object_lock(dst);
        /* a remote repository's storage says which object and what it answered */
        bv_copy_dst_storage_error(dstrepo, said, sizeof(said));
        if (!said[0])
                bv_repo_storage_error(srcrepo, said, sizeof(said));
        if (s->culprit[0])
                snprintf(at, sizeof(at), " at '%s'", s->culprit);
        return log_error_errno(r, "copy from '%s' to '%s' failed%s%s%s%s; what was sent stays: running the same copy again "
                                  "resumes it", src,
                               dst, at, said[0] ? " (" : "", said, said[0] ? ")" : "");
}

/* --prune needs a rule, and a rule needs --prune; --prune prints text only (an exit code). */
static int copy_prune_check(bool prune, bool json, PruneArgs *pa)
{
        if (prune && json) {
                log_error("copy --prune does not print JSON: run 'blkvault prune DST --json' after the copy");
                return EXIT_USAGE;
        }
        if (prune && !prune_args_given(pa)) {
                log_error("copy --prune needs DST's retention: a --keep-* rule as 'blkvault prune' takes it");
                return EXIT_USAGE;
        }
        if (!prune && prune_args_given(pa)) {
                log_error("the --keep-* rules are DST's retention for copy --prune: give --prune too");
                return EXIT_USAGE;
        }
        return prune ? prune_args_check(pa) : EXIT_OK;
}

int cmd_copy(int argc, char **argv)
{
        SecretArgs sargs = {}, dargs = {};
        BvCopyOptions o = {};
        bool json = false, force_progress = false, prune = false;
        PruneArgs pa = {};
        int lock_mode = 0;
        const CliOption options[] = {
                CLI_FLAG("prune", &prune),
                PRUNE_POLICY_OPTIONS(&pa),
                CLI_STR("dst-passphrase-file", &dargs.passphrase_file),
                CLI_STR("dst-passphrase-fd", &dargs.passphrase_fd),
                CLI_STR("dst-passphrase-command", &dargs.passphrase_command),
                CLI_STR("dst-key-file", &dargs.key_file),
                CLI_PARSED("object-lock", parse_lock_duration, &o.object_lock_seconds),
                CLI_PARSED("object-lock-mode", parse_lock_mode, &lock_mode),
                CLI_PARSED("limit-upload", parse_rate, &o.limit_upload),
                CLI_PARSED("limit-download", parse_rate, &o.limit_download),
                CLI_FLAG("progress", &force_progress),
                CLI_FLAG("json", &json),
                {},
        };
        CLI_PARSE_OR_RETURN(argc, argv, .name = "copy", .usage = usage_text, .options = options, .secret = &sargs,
                                        .args = "SRC DST [SNAPSHOT...]");
        if (lock_mode && !o.object_lock_seconds) {
                log_error("--object-lock-mode needs --object-lock=DURATION (how long the objects are retained)");
                return EXIT_USAGE;
        }
        o.object_lock_governance = lock_mode == 1;
        const char *srcpath = argv[optind], *dst = argv[optind + 1];
        bool dst_secret = dargs.key_file || dargs.passphrase_file || dargs.passphrase_fd || dargs.passphrase_command;
        int ec = copy_prune_check(prune, json, &pa);
        if (ec != EXIT_OK)
                return ec;

        /* the master secret is kept only to seal a new DST by another secret */
        OPEN_REPO_OR_RETURN(src, srcpath, &sargs, BV_OPEN_READ | (dst_secret ? BV_OPEN_KEYS : 0));
        report_snapshot_damage(src);
        /* each SNAPSHOT as every command takes one (NAME@latest too), resolved to its id here */
        o.n_snapshots = (size_t)(argc - optind - 2);
        _cleanup_free_ const char **ids = calloc(o.n_snapshots + 1, sizeof(char *));
        if (!ids)
                return log_error_errno(-ENOMEM, "cannot copy");
        for (size_t i = 0; i < o.n_snapshots; i++) {
                const BvSnapshot *snap;
                int e = find_snapshot(src, argv[optind + 2 + i], &snap);
                if (e != EXIT_OK)
                        return e;
                ids[i] = snap->id;
        }
        o.snapshots = ids;
        _cleanup_(bv_copy_dst_closep) BvCopyDst *dstrepo = NULL;
        ec = o.object_lock_seconds ? check_object_lock(dst) : EXIT_OK;
        if (ec != EXIT_OK)
                return ec;
        ec = open_dst(src, srcpath, dst, &dargs, &dstrepo);
        if (ec != EXIT_OK)
                return ec;

        Progress progress;
        progress_init(&progress, "copy", json || is_quiet());
        progress.enabled = progress.enabled || (force_progress && !is_quiet());
        o.progress = progress_update;
        o.progress_userdata = &progress;
        BvCopyStats stats;
        _cleanup_(json_object_putp) struct json_object *copied_ids = json_object_new_array();
        Copied copied = { .ids = copied_ids };
        o.published = on_published;
        o.cancelled = copy_interrupted;
        ec = catch_interrupts(NULL);
        if (ec != EXIT_OK)
                return ec;
        o.published_userdata = &copied;
        int r = bv_copy(src, dstrepo, &o, &stats);
        progress_done(&progress);
        ec = r < 0 ? copy_failed(r, &stats, src, dstrepo, srcpath, dst) : copy_report(&stats, &copied, dst, json);
        free(copied.text);
        if (ec != EXIT_OK || !prune)
                return ec;
        /* DST's copy lock and lease go first: a lease of this process would hold gc's deletes back */
        bv_copy_dst_close(TAKE_PTR(dstrepo));
        return prune_repo(dst, &(SecretArgs){ .keyring = bv_repo_keyring(src) }, &pa);
}
