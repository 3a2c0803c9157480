/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the subcommands: messages, exit codes, secrets, progress, JSON output.
 * Each subcommand lives in cmd-<name>.c and exposes `int cmd_<name>(int argc, char **argv)`
 * returning an exit code.
 */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backup.h"
#include "conf.h"
#include "json-util.h"
#include "macro.h"
#include "rate.h"
#include "policy.h"
#include "repo.h"
#include "restore.h"


/* The end of every command's usage text: the options cli_parse gives every command
 * (COMMON_OPTIONS and --help), after the secret options of those that open a repository
 * (SECRET_OPTIONS) and the shared options of the appliance commands (job, target). */
#define COMMON_OPTIONS_HELP                                                                                \
        "  -q, --quiet              no progress or status lines\n"                                         \
        "  -v, --verbose            more detail (timings, how the repository was opened)\n"               \
        "  -h, --help\n"
#define SECRET_OPTIONS_HELP                                                                                \
        "  --passphrase-file=FILE, --passphrase-fd=N, --passphrase-command=CMD, --key-file=FILE\n"
#define APPLIANCE_OPTIONS_HELP                                                                             \
        "  --config=FILE            the configuration (also $" BV_CONF_ENV ")\n"                            \
        "  --run-dir=DIR            the run lock and mountpoints (default " BV_RUN_DIR ")\n"                \
        "  --state-dir=DIR          where runs are recorded (default " BV_STATE_DIR ", also $" BV_STATE_ENV ")\n" \
        COMMON_OPTIONS_HELP

/* The exit codes, each with one meaning: the one table, copied to EXIT STATUS in blkvault(1). */
enum {
        EXIT_OK = 0,
        EXIT_ERROR = 1,      /* any failure not listed below */
        EXIT_USAGE = 2,      /* bad command line (unknown option, bad value, missing argument) */
        EXIT_KEY = 3,        /* wrong or missing passphrase or key */
        EXIT_DAMAGE = 4,     /* damaged or missing data found (verify, restore, read) */
        EXIT_BUSY = 5,       /* another writer holds the repository's lock */
        EXIT_FULL = 6,       /* the target (the repository's filesystem) is full */
        EXIT_IN_USE = 7,     /* a mountpoint, device or state directory is in use */
        EXIT_TOO_SMALL = 8,  /* the restore destination (a device, a file's filesystem) is too small */
        EXIT_PERM = 9,       /* permission denied: the command needs root or the disk group */
        EXIT_NO_REPO = 10,   /* REPO is not a blkvault repository */
        EXIT_ALARM = 11,     /* status --check-age: a job has no good backup younger than its max-age */
};

/* The messages on stderr: "error: ", "warning: " or nothing before the formatted text, then
 * ": strerror(-r)" when r < 0. A verbose one is printed only with -v. Returns exit_code_for(r). */
typedef enum CliLog { CLI_LOG_ERROR, CLI_LOG_WARNING, CLI_LOG_INFO, CLI_LOG_VERBOSE } CliLog;
int log_full(CliLog kind, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "error: <formatted>: <strerror(-r)>"; returns the exit code for r. */
#define log_error_errno(r, ...) log_full(CLI_LOG_ERROR, (r), __VA_ARGS__)
#define log_error(...) ((void)log_full(CLI_LOG_ERROR, 0, __VA_ARGS__))
#define log_warning(...) ((void)log_full(CLI_LOG_WARNING, 0, __VA_ARGS__))
#define log_info(...) ((void)log_full(CLI_LOG_INFO, 0, __VA_ARGS__))
#define log_verbose(...) ((void)log_full(CLI_LOG_VERBOSE, 0, __VA_ARGS__))

/* -q (no progress or status lines: a script's stderr holds the messages only) and -v (more
 * detail), accepted by every command: cli_parse adds COMMON_OPTIONS to every table and hands them
 * to verbosity_parse (true if the option was one of them). */
#define COMMON_OPTIONS { "quiet", no_argument, NULL, 'q' }, { "verbose", no_argument, NULL, 'v' }
bool verbosity_parse(int opt);
bool is_quiet(void);
/* Whether an error was printed (main then prints nothing more for a usage error). */
bool error_printed(void);
/* After a command returned EXIT_USAGE without saying why (getopt_long, with opterr 0, found an
 * unknown option or a missing value): "error: unknown option '--x' (see 'blkvault help CMD')". */
void log_option_error(int argc, char **argv, const char *command);
int exit_code_for(int r);

/* Parsed secret options shared by every command that opens a repository. */
typedef struct SecretArgs {
        const char *passphrase_file;
        const char *key_file;
        const char *passphrase_fd;      /* a number, parsed when the secret is read */
        const char *passphrase_command; /* run with /bin/sh -c; its stdout is the passphrase */
        /* The new secret of key change: its passphrase comes from $BLKVAULT_NEW_PASSPHRASE instead of
         * $BLKVAULT_PASSPHRASE, and its options are --new-passphrase-file and --new-key-file. */
        bool new_secret;
        /* --point-in-time (the read commands: POINT_IN_TIME_OPTION): an S3 repository as it was
         * then, seconds since the epoch; 0: now. */
        int64_t point_in_time;
        /* The keys another open holds (BvSecret.keyring): copy --prune opens DST, related to SRC,
         * with SRC's, as the copy did; the other fields are then not read. */
        const struct BvKeyring *keyring;
} SecretArgs;

/* --point-in-time=TIME of the read commands (list, info, verify, restore, serve, mount): an S3
 * repository as it was at TIME, from its object versions. TIME: "YYYY-MM-DD[THH:MM[:SS]][Z]" in
 * UTC, or "@SECONDS" since the epoch. */
int parse_point_in_time(const char *arg, void *ret);
#define POINT_IN_TIME_OPTION(s) CLI_PARSED("point-in-time", parse_point_in_time, &(s)->point_in_time)
#define POINT_IN_TIME_HELP                                                                                 \
        "  --point-in-time=TIME     an S3 repository as it was at TIME (UTC: 2026-11-27T10:00:00Z, or\n"    \
        "                           @SECONDS), read from its object versions\n"

/* The long options every repository command accepts (append to a command's table). */
#define SECRET_OPTIONS                                                                                     \
        { "passphrase-file", required_argument, NULL, 'P' }, { "key-file", required_argument, NULL, 'K' },       \
        { "passphrase-fd", required_argument, NULL, 'F' },                                                 \
        { "passphrase-command", required_argument, NULL, 'C' }

/* Handles 'P', 'K', 'F' and 'C'; returns true if the option was one of them. */
bool secret_args_parse(SecretArgs *s, int opt, const char *arg);

/* Builds a BvSecret for a repository: none for unencrypted ones, otherwise --key-file,
 * --passphrase-file, --passphrase-fd, --passphrase-command, $BLKVAULT_PASSPHRASE (see new_secret) or
 * (on a terminal) a prompt. confirm: ask twice
 * (for init). The passphrase buffer is wiped by secret_done. */
int secret_get(const SecretArgs *s, bool encrypted, bool confirm, BvSecret *ret);
void secret_done(BvSecret *s);

/* One option of a command's table for cli_parse: what it does is the one field set. */
typedef struct CliOption {
        const char *name;
        char short_name; /* also -X (0: long only) */
        bool *set;       /* no argument: sets *set */
        bool *clear;     /* no argument: clears *clear (--no-luks, --unprotect) */
        const char **arg; /* an argument, stored as given */
        int (*parse)(const char *arg, void *ret); /* an argument, parsed into ret: 0, or < 0 reported */
        void *ret;
} CliOption;

#define CLI_FLAG(n, p) { .name = (n), .set = (p) }
#define CLI_UNSET(n, p) { .name = (n), .clear = (p) }
#define CLI_STR(n, p) { .name = (n), .arg = (p) }
#define CLI_PARSED(n, fn, p) { .name = (n), .parse = (fn), .ret = (p) }

/* A keyword of a command whose first argument is one (key change, target run...): args, the
 * arguments that follow it, as CliCommand's. */
typedef struct CliKeyword {
        const char *name, *args;
} CliKeyword;

/* A command's command line: --help prints usage; secret (if not NULL) takes the secret options;
 * options ends with an entry without a name. args (if not NULL) names the arguments after the
 * options, as usage shows them ("REPO [SNAPSHOT]", "REPO SNAP...", "": none): a word is one
 * argument, [WORD] an optional one, WORD... one or more; a word starting with '-' is an option.
 * Too few or too many are refused with the one usage error (usage_error). keywords (ending with
 * an entry without a name): the first argument is one of them, followed by its args; "help"
 * there is --help. repo: the first argument is REPO, which $BLKVAULT_REPO stands for when it is
 * left out. */
typedef struct CliCommand {
        const char *name, *usage;
        const CliOption *options;
        SecretArgs *secret;
        const char *args;
        const CliKeyword *keywords;
        bool repo;
} CliCommand;

/* The one phrasing of a command line that lacks or has too many arguments:
 * "error: expected 'blkvault COMMAND ARGS' (see 'blkvault help COMMAND')". Returns EXIT_USAGE. */
int usage_error(const char *command, const char *args);

/* Parses *argvp with getopt_long (and puts $BLKVAULT_REPO in, for a repo command: then *argcp and
 * *argvp change). Returns -1 when the command should go on (its arguments start at
 * (*argvp)[optind]), otherwise the exit code to return (0 after --help). */
int cli_parse(const CliCommand *cmd, int *argcp, char ***argvp);
/* cli_parse with a CliCommand of the fields given, returning its exit code from the caller. */
#define CLI_PARSE_OR_RETURN(argc, argv, ...)                                                               \
        do {                                                                                               \
                int _ec = cli_parse(&(CliCommand){ __VA_ARGS__ }, &(argc), &(argv));                       \
                if (_ec >= 0)                                                                              \
                        return _ec;                                                                        \
        } while (0)

/* Option parsers for CliOption.parse: --threads=N (1..256, into an unsigned), --cache=SIZE (digits
 * and an optional K, M, G or T, from 1 byte to 2^63 - 1: the plugin's cache cannot be turned off;
 * stored as given, for the plugin's cache=). */
int parse_threads(const char *arg, void *ret);
/* A whole number from min to max for option; reports "invalid OPTION 'ARG' (MIN to MAX)". */
int parse_unsigned_arg(const char *option, const char *arg, unsigned min, unsigned max, unsigned *ret);
int parse_cache_size(const char *arg, void *ret);

/* Opens a repository for a command, reporting errors; returns an exit code. Commands hold it
 * in a _cleanup_(bv_repo_closep) variable. */
DEFINE_TRIVIAL_CLEANUP_FUNC(BvRepo, bv_repo_close)
int open_repo(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret);
/* A repository locked by another writer (gc: another gc), said with the holder the lock records
 * (problem->holder); returns EXIT_BUSY. */
int log_locked(const char *path, const BvRepoProblem *problem, bool gc);
/* Why the repository at path does not open (r), said so that the user knows what to do: it does
 * not exist, is not a repository, needs other rights. Returns the exit code. */
int log_open_error(const char *path, int r);
/* Declares repo, opened with open_repo, or returns open_repo's exit code from the caller. */
/* EXIT_ERROR, said, when path is an S3 repository, to which only copy writes yet (the commands
 * that open one to read and then write records in it, as delete and protect do, ask first). */
int refuse_s3_write(const char *path);
/* " (what the storage answered)" for an S3 repository's last failed request ("s3://BUCKET/KEY: GET:
 * HTTP 404 NoSuchKey..."), "" for a directory or when none failed: for the end of an error line. */
const char *storage_said(BvRepo *repo, char *buf, size_t len);
#define STORAGE_SAID_MAX 360
#define OPEN_REPO_OR_RETURN(repo, path, s, flags)                                                          \
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;                                                     \
        do {                                                                                               \
                int _ec = open_repo((path), (s), (flags), &repo);                                          \
                if (_ec != EXIT_OK)                                                                        \
                        return _ec;                                                                        \
        } while (0)

/* open_repo, handing the secret back in *ret_secret when asked (the caller wipes it with
 * secret_done); on failure it is wiped here. */
int open_repo_secret(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret, BvSecret *ret_secret);

/* Before handing a snapshot to nbdkit: opens the repository read-only, resolves spec into
 * ret_id (2 * BV_SNAPSHOT_ID_SIZE + 1 bytes) and keeps the secret in *ret_secret for the
 * plugin (secret_done it); ret_disk (when not NULL) gets the target of the libvirt disk the
 * snapshot was taken of ("vda"), or "" when it is not of one. Reports failures; returns an exit
 * code. */
#define EXPORT_DISK_MAX 64
int check_export(const char *path, const SecretArgs *s, const char *spec, char ret_id[], BvSecret *ret_secret,
                 char ret_disk[EXPORT_DISK_MAX]);

/* problems.c: what a repository refused or left out. "a symbolic link", "a regular file, not a
 * directory"... for an entry refused for its type, else NULL. */
const char *problem_refusal(const BvRepoProblem *p, char *buf, size_t size);
/* Reports an open that failed over one entry (a refusal, a damaged index segment for a writer);
 * returns the exit code, or -1 if p names nothing to report. */
int report_open_problem(const char *path, const BvRepoProblem *p, int r);
/* Warns of each damaged file the repository left out since *reported (index segments, snapshot
 * records), then advances *reported. */
void report_damage(BvRepo *repo, size_t *reported);
/* report_damage for the repository open_repo opened (after the snapshot list was loaded). */
void report_snapshot_damage(BvRepo *repo);
/* Warns of each pack the index names that a writer found missing. */
void report_missing_packs(BvRepo *repo);

/* Resolves a snapshot spec, reporting failures; returns an exit code. */
int find_snapshot(BvRepo *repo, const char *spec, const BvSnapshot **ret);
/* The distinct names of list, in order of first appearance, as "a, b" into buf (cut at size);
 * returns how many there are. */
size_t snapshot_names(BvSnapshot *const *list, size_t n, char *buf, size_t size);

/* progress.c: the progress line on stderr when it is a terminal (and not -q): work done of its
 * total, the rate over the last seconds and the ETA of the work left (rate.h). */
typedef struct Progress {
        bool enabled, shown;
        const char *verb;
        BvRate rate;
        uint64_t drawn_ns;
} Progress;
void progress_init(Progress *p, const char *verb, bool quiet);
void progress_update(const BvProgress *bp, void *userdata);
void progress_done(Progress *p);
/* The progress of a drive's run (target run, job run): one line per job's backup, "backup of
 * job JOB to TARGET ...", on a terminal. run_progress_init fills rp for bv_target_run_drive;
 * run_progress_done clears the line before the run is reported. */
typedef struct RunProgress {
        Progress p;
        const void *job;        /* the job the line is about */
        char verb[200];
} RunProgress;
struct BvRunProgress;
void run_progress_init(RunProgress *rp, struct BvRunProgress *ret);
void run_progress_done(RunProgress *rp);
/* A status line while something short but noticeable runs (deriving a key, waiting for nbdkit),
 * under the same conditions; status_begin returns whether it showed it, status_end clears it. */
bool status_begin(const char *text);
void status_end(bool shown);

/* restore's destinations (restore-dest.c). restore_to_stdout streams the image in order (a pipe
 * cannot seek); restore_check_dest refuses an existing file or a device that holds something
 * without force, and a device smaller than the image, before anything is written (returns an
 * exit code; *ret_replace: dest is an existing file that --force replaces, never a device, which
 * is written in place); restore_temp_name picks an unused name beside dest for that replacement. */
int restore_to_stdout(BvRepo *repo, const BvSnapshot *snap, Progress *progress, uint64_t *ret_bad_offset);
int restore_check_dest(const char *dest, const BvSnapshot *snap, bool force, bool *ret_replace);
int restore_temp_name(const char *dest, char *buf, size_t size);
/* What libblkid finds on the device dev, for a refusal to overwrite it: "a gpt partition table",
 * "ext4 (UUID ...)" into what. 1 when something is there, 0 when nothing is, or -errno. */
int device_holds(const char *dev, char *what, size_t size);
/* The refusal of the block device dev, which cannot be opened exclusively: "'DEV' is in use: WHO
 * (bv_blockdev_user); CONSEQUENCE". Returns EXIT_IN_USE. */
int log_device_in_use(const char *dev, const char *consequence);
/* restore into a disk image in place (restore-image.c): the image's format as its header says
 * ("raw" when none), and the message for a failed bv_restore_image (r, its stats and qemu-nbd's
 * words): an exit code, or EXIT_OK when r has no message of its own. */
int restore_image_format(const char *path, const char **ret_format);
int restore_image_failure(int r, const BvSnapshot *snap, const char *path, const char *format,
                          const BvRestoreStats *stats, const char *detail);
/* --libvirt=DOMAIN[:TARGET] (at uri, NULL: libvirt's default): the image of the shut-off domain's
 * disk to restore snap into, its format (the XML's, else raw) and words for it in what. An exit
 * code, logged (a running domain is refused). */
int restore_libvirt_disk(const char *arg, const char *uri, const BvSnapshot *snap, char *path, size_t path_size,
                         char *format, size_t format_size, char *what, size_t what_size);

/* The paper form of a key export (paper-key.c): paper_format prints it; paper_detect tells it from
 * a plain export; paper_parse reads it back, reporting the first line whose checksum fails. */
int paper_format(FILE *f, const char *data, size_t len);
bool paper_detect(const char *text, size_t len);
int paper_parse(const char *text, const char *file, char **ret, size_t *ret_len);

/* Storage for the plugin parameters plugin_args puts on nbdkit's command line. */
typedef struct PluginArgs {
        char repo[4200];
        char snapshot[128];
        char cache[64];
        char point_in_time[48];
        char secret[4200];
        int secret_fd; /* the read end of the passphrase pipe, or -EBADF */
} PluginArgs;

/* nbdkit's --threads for an export: 1, one worker thread per connection (connections are still
 * served in parallel, and the plugin reads ahead on sequential reads). nbdkit 1.32 aborts when a
 * client hangs up while several workers of its connection still have replies to send (nbdcopy
 * does so after any error reply): the export then died for every client (issue 10, finding 7).
 * Measured on 2 cores, 192 MiB of text, cache=8M: nbdcopy (4 connections) 0.40 -> 0.47 s,
 * nbdcopy -C 1 0.43 -> 0.68 s, one client's sequential 1 MiB reads unchanged (0.65 s). Fixed in
 * nbdkit 1.33.10 (commit 9d82aa4f): this can go once the oldest supported nbdkit has the fix. */
const char *nbdkit_threads_arg(PluginArgs *pa);

/* Appends the plugin, repo=, snapshot=id, cache= (when cache is set) and the parameter that
 * carries the secret (key-file=, passphrase-file=, or passphrase-fd= for a passphrase that did
 * not come from a file) to argv. passphrase-fd= names the read end of a pipe that holds the
 * passphrase: it is inherited by the next child started (nbdkit, right away), and
 * plugin_args_done closes it in the parent once nbdkit runs. The passphrase is thus never on the
 * command line nor in the environment of nbdkit. The strings live in *pa. Reports a failure;
 * returns an exit code. */
int plugin_args(PluginArgs *pa, const char *repo, const char *id, const char *cache, const SecretArgs *s,
                const BvSecret *secret, char **argv, size_t *n);
void plugin_args_done(PluginArgs *pa);

/* Wipes the passphrases in our environment ($BLKVAULT_PASSPHRASE, $BLKVAULT_NEW_PASSPHRASE) in place
 * (a passphrase read from there is wiped as it is read; this catches one that was not read)
 * and removes them, so that no child inherits them and /proc/PID/environ of this long-running
 * process does not show them. Call once the secret has been read. */
void secret_env_scrub(void);

/* text as it may be shown on a terminal: control characters, DEL, C1 and bidi controls and bytes
 * that are not UTF-8 as \xNN, newline and tab as \n and \t, backslash doubled. At most max bytes
 * of text (0: all), then "..." if it was longer. malloc'd; NULL if out of memory. */
char *escape_text(const char *text, size_t max);

/* word as one word of a POSIX shell command, for the commands messages suggest ("virsh shutdown
 * 'my vm'"): as it is when it holds only characters no shell treats specially, else in single
 * quotes, each ' written '\''. Truncated to fit buf (of at least 4 bytes); returns buf. */
const char *shell_word(const char *word, char *buf, size_t size);

/* "1.5 GiB" */
const char *format_bytes(uint64_t n, char buf[32]);

/* "gpt: ext4 'root', xfs 'data'" from a snapshot's source probe. */
void describe_probe(const BvSnapshotSource *src, char *buf, size_t size);
/* "2026-11-23 22:14:09 +0100": local time, with its offset. */
void format_time_local(uint64_t t, char out[64]);

/* Prints a JSON value to stdout, pretty when stdout is a terminal. */
void json_print(struct json_object *o);

/* json-out.c: a snapshot as list and backup print it (NULL: out of memory); o[old] = o[new]
 * for each (old, new) pair of names where o has new; o[key] = from[key] for each member of
 * from. 0 or -ENOMEM. */
struct json_object *json_snapshot(const BvSnapshot *s);
int json_add_aliases(struct json_object *o, const char *const *pairs, size_t n);
int json_add_members(struct json_object *o, struct json_object *from);

/* used-report.c: what a --used-only read skipped, per partition (why: why the source was read
 * whole, "" when it was not): the "used_only" member of --json (NULL: out of memory), and the
 * lines after the backup's result (with json only the warning that it was read whole). */
struct BvFsUsedMap;
struct json_object *json_used_only(const struct BvFsUsedMap *m, const char *why);
void log_used_only(const struct BvFsUsedMap *m, const char *why, const char *source, bool json);

/* The signal (SIGINT, SIGTERM, SIGHUP) that asked a long command (restore, a target's run) to
 * stop, once catch_interrupts installed the one handler of these signals; 0 until then. The
 * handler sets it, then calls cancel (async-signal-safe; NULL: none), e.g. bv_job_cancel: the
 * backup under way fails and unwinds, the drive is unmounted and locked, LVM snapshots are
 * removed. Returns an exit code. */
extern volatile sig_atomic_t interrupted;
int catch_interrupts(void (*cancel)(void));

/* Standard --help handling: prints usage to stdout and returns EXIT_OK. */
int print_usage(const char *text);

/* Loads the appliance's configuration (path: --config, or NULL for $BLKVAULT_CONFIG or the
 * default; may_be_missing: even when given explicitly); with mistakes, prints each as
 * FILE:LINE: MESSAGE and a warning, and goes on: the sections that hold one have their
 * `mistake` set, for the caller to skip. Returns an exit code. */
int load_config(const char *path, bool may_be_missing, BvConfig **ret);

/* The ranges a snapshot's backup could not read, one line each after prefix (info, verify). */
void print_unreadable(const BvSnapshot *s, FILE *f, const char *prefix);

/* cmd-gc.c, shared with prune: runs bv_gc reporting a failure (returns an exit code), and the
 * counters as JSON (NULL: out of memory). */
struct BvGcOptions;
struct BvGcStats;
int run_gc(BvRepo *repo, const char *path, const struct BvGcOptions *o, struct BvGcStats *ret);

/* prune's arguments (cmd-prune.c), also copy --prune's: the --keep-* rules as given, checked and
 * turned into policy by prune_args_check. */
typedef struct PruneArgs {
        BvPolicy policy;
        const char *counts[6]; /* --keep-last, -hourly, -daily, -weekly, -monthly, -yearly */
        const char *within;
        const char *name;
        bool dry_run, json, no_gc;
} PruneArgs;
#define PRUNE_POLICY_OPTIONS(a)                                                                           \
        CLI_STR("keep-last", &(a)->counts[0]), CLI_STR("keep-hourly", &(a)->counts[1]),                   \
                CLI_STR("keep-daily", &(a)->counts[2]), CLI_STR("keep-weekly", &(a)->counts[3]),          \
                CLI_STR("keep-monthly", &(a)->counts[4]), CLI_STR("keep-yearly", &(a)->counts[5]),        \
                CLI_STR("keep-within", &(a)->within)
int prune_args_check(PruneArgs *a);
/* Whether a --keep-* rule was given. */
bool prune_args_given(const PruneArgs *a);
/* Forgets the snapshots of the repository at path that no rule keeps, then (unless dry_run or
 * no_gc) runs gc there: prune's whole run; an exit code. */
int prune_repo(const char *path, const SecretArgs *sargs, PruneArgs *a);
struct json_object *json_gc_stats(const struct BvGcStats *s);
void print_gc_stats(const struct BvGcStats *s, bool dry_run);

/* serve-export.c: blkvault serve --export=NAME (cmd_serve hands it over). */
int serve_export(int argc, char **argv);

/* The commands, one cmd-NAME.c each (main.c's table; the generator is run by its own name). */
int cmd_init(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_delete(int argc, char **argv);
int cmd_protect(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_copy(int argc, char **argv);
int cmd_files(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_target(int argc, char **argv);
int cmd_job(int argc, char **argv);
int cmd_remote(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_generator(int argc, char **argv);

/* run-report.c: reports a target run: the jobs, the summary line with "safe to unplug", the
 * journal entry, sd_notify STATUS, the state files in state_dir (NULL: bv_state_dir's) and the
 * on-success / on-failure commands (the job's for each job; the target's, else [global]'s, for
 * the run). Returns the exit code. */
struct BvTargetRun;
int report_run(const struct BvTargetRun *run, const BvConfig *conf, const char *state_dir);
/* After a run of a drive with new snapshots for a remote (copy-to): asks systemd to start
 * blkvault-copy@REMOTE.service (without waiting for it) and says so; its timer copies later when
 * systemd cannot be asked. */
void request_copies(const struct BvTargetRun *run, const BvConfig *conf);
/* "STEP failed: exit status N" (result -ECHILD with a status) or "STEP failed: strerror". */
/* Why a disk image source did not open (cmd-backup.c); false when r has no particular message. */
bool image_open_message(int r, const char *source, const char *format, const char *detail, bool job, char *buf,
                        size_t size);
void describe_failure(const char *step, int result, int status, char *buf, size_t size);
void describe_interrupt(uint64_t kept_packs, uint64_t kept_bytes, char *buf, size_t size);
/* notify.c: tells [global] notify when subject's state (failed: a failure, or an alarm) changed
 * since it was last told; the command gets BLKVAULT_EVENT (failure, recovery, alarm or
 * alarm-cleared), BLKVAULT_SUBJECT, BLKVAULT_SUMMARY, BLKVAULT_RESULT and BLKVAULT_JOB and
 * BLKVAULT_TARGET when not NULL. Recorded only when it exits 0 (else told again next time). */
void notify_change(const BvConfig *c, const char *state_dir, const char *subject, bool failed, bool alarm,
                   const char *job, const char *target, const char *summary);
/* Writes the Prometheus textfile of c (warns when it cannot; the default path's directory
 * missing is not worth one). */
void write_metrics(const BvConfig *c, const char *state_dir);
/* Runs an operator's command cmd (NULL: nothing) with BLKVAULT_JOB, BLKVAULT_TARGET (when not
 * NULL), BLKVAULT_RESULT (ok or failed) and BLKVAULT_SUMMARY; warns, naming it by what, when it
 * fails. Its exit status or -errno. */
int run_hook(const char *what, const char *cmd, const char *job, const char *target, bool ok, const char *summary);

/* backup REPO libvirt:DOMAIN (backup-libvirt.c): backs up the running domain's disks, reports
 * them; the exit code. */
struct BvLibvirtBackupOptions;
struct BvLibvirtResult;
int backup_libvirt(BvRepo *repo, const char *source, struct BvLibvirtBackupOptions *o, bool json);
/* What a domain's backup (res) tidied in libvirt or failed to: the job a dead run left, the
 * checkpoints it deleted (notes), and what it could not (warnings). */
void report_libvirt_tidy(const struct BvLibvirtResult *res, const char *domain);
/* How consistent the backup (res) of [job NAME] is: frozen through the guest agent, or why not
 * (its freeze = no named as the reason). */
void report_libvirt_freeze(const struct BvLibvirtResult *res, const char *job);
