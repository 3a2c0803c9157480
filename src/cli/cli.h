/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the subcommands: messages, exit codes, secrets, progress, JSON output.
 * Each subcommand lives in cmd-<name>.c and exposes `int cmd_<name>(int argc, char **argv)`
 * returning an exit code.
 */

#include <stdbool.h>
#include <stdint.h>

#include "backup.h"
#include "macro.h"
#include "repo.h"

struct json_object;

/* Exit codes (documented in blkvault(1)). */
enum {
        EXIT_OK = 0,
        EXIT_ERROR = 1,      /* any other failure */
        EXIT_USAGE = 2,      /* bad command line */
        EXIT_KEY = 3,        /* wrong or missing passphrase / key */
        EXIT_DAMAGE = 4,     /* corrupt data found (verify, restore, read) */
        EXIT_BUSY = 5,       /* another writer holds the repository */
        EXIT_FULL = 6,       /* the target is full */
};

/* "error: <formatted>: <strerror(-r)>" on stderr; returns the exit code for r. */
int log_error_errno(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int exit_code_for(int r);

/* Parsed secret options shared by every command that opens a repository. */
typedef struct SecretArgs {
        const char *passphrase_file;
        const char *key_file;
        /* The new secret of key change: its passphrase comes from $BLKVAULT_NEW_PASSPHRASE instead of
         * $BLKVAULT_PASSPHRASE, and its options are --new-passphrase-file and --new-key-file. */
        bool new_secret;
} SecretArgs;

/* The long options every repository command accepts (append to a command's table). */
#define SECRET_OPTIONS                                                                                     \
        { "passphrase-file", required_argument, NULL, 'P' }, { "key-file", required_argument, NULL, 'K' }

/* Handles 'P' and 'K'; returns true if the option was one of them. */
bool secret_args_parse(SecretArgs *s, int opt, const char *arg);

/* Builds a BvSecret for a repository: none for unencrypted ones, otherwise --key-file,
 * --passphrase-file, $BLKVAULT_PASSPHRASE (see new_secret) or (on a terminal) a prompt. confirm: ask twice
 * (for init). The passphrase buffer is wiped by secret_done. */
int secret_get(const SecretArgs *s, bool encrypted, bool confirm, BvSecret *ret);
void secret_done(BvSecret *s);

/* Parses "blkvault COMMAND REPO [--json] [secret options]". Returns -1 when the command
 * should go on (*ret_repo, *ret_json and *s filled), otherwise the exit code to return (0
 * after --help). */
int parse_repo_json_args(int argc, char **argv, const char *usage, const char *command, SecretArgs *s,
                         bool *ret_json, const char **ret_repo);

/* --threads=N, 1..256; reports a bad value. */
int parse_threads(const char *arg, unsigned *ret);

/* Opens a repository for a command, reporting errors; returns an exit code. Commands hold it
 * in a _cleanup_(bv_repo_closep) variable. */
DEFINE_TRIVIAL_CLEANUP_FUNC(BvRepo, bv_repo_close)
int open_repo(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret);

/* Before handing a snapshot to nbdkit: opens the repository read-only, resolves spec into
 * ret_id (2 * BV_SNAPSHOT_ID_SIZE + 1 bytes) and keeps the secret in *ret_secret for the
 * plugin (secret_done it). Reports failures; returns an exit code. */
int check_export(const char *path, const SecretArgs *s, const char *spec, char ret_id[], BvSecret *ret_secret);

/* Resolves a snapshot spec, reporting failures; returns an exit code. */
int find_snapshot(BvRepo *repo, const char *spec, const BvSnapshot **ret);

/* Progress line on stderr when it is a terminal: bytes, rate, ETA. */
typedef struct Progress {
        bool enabled;
        const char *verb;
} Progress;
void progress_init(Progress *p, const char *verb, bool quiet);
void progress_update(const BvProgress *bp, void *userdata);
void progress_done(Progress *p);

/* Storage for the plugin parameters plugin_args puts on nbdkit's command line. */
typedef struct PluginArgs {
        char repo[4200];
        char snapshot[128];
        char cache[64];
        char secret[4200];
        char threads[32];
} PluginArgs;

/* nbdkit's --threads=N for an export: twice the online CPUs per connection. nbdkit's default of
 * 16 threads per connection, times the 4 connections nbdcopy opens, had 64 threads contend
 * for the cores (bench/nbd-bench.sh). */
const char *nbdkit_threads_arg(PluginArgs *pa);

/* Appends the plugin, repo=, snapshot=id, cache= (when cache is set) and the parameter that
 * carries the secret (key-file=, passphrase-file=) to argv; a passphrase that did not come from
 * a file goes into the environment of the nbdkit child instead, never on its command line. The
 * strings live in *pa. Reports a failure; returns an exit code. */
int plugin_args(PluginArgs *pa, const char *repo, const char *id, const char *cache, const SecretArgs *s,
                const BvSecret *secret, char **argv, size_t *n);

/* text as it may be shown on a terminal: control characters, DEL, C1 and bidi controls and bytes
 * that are not UTF-8 as \xNN, newline and tab as \n and \t, backslash doubled. At most max bytes
 * of text (0: all), then "..." if it was longer. malloc'd; NULL if out of memory. */
char *escape_text(const char *text, size_t max);

/* "1.5 GiB" */
const char *format_bytes(uint64_t n, char buf[32]);

/* Prints a JSON value to stdout, pretty when stdout is a terminal. */
void json_print(struct json_object *o);

/* Standard --help handling: prints usage to stdout and returns EXIT_OK. */
int print_usage(const char *text);

int cmd_init(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
