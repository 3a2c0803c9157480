/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "dlib.h"
#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "mounts.h"
#include "passphrase.h"
#include "timeutil.h"

static bool errors;
/* -q and -v: -1 quiet, 0, 1 verbose */
static int verbosity;

bool error_printed(void)
{
        return errors;
}

int log_full(CliLog kind, int r, const char *fmt, ...)
{
        static const char *const prefixes[] = {
                [CLI_LOG_ERROR] = "error: ",
                [CLI_LOG_WARNING] = "warning: ",
                [CLI_LOG_INFO] = "",
                [CLI_LOG_VERBOSE] = "",
        };
        va_list ap;

        if (kind == CLI_LOG_VERBOSE && verbosity <= 0)
                return exit_code_for(r);
        errors = errors || kind == CLI_LOG_ERROR;
        fputs(prefixes[kind], stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        if (r == -ELIBACC && bv_dl_error()[0]) /* an optional library: which, and why */
                fprintf(stderr, ": %s", bv_dl_error());
        else if (r < 0)
                fprintf(stderr, ": %s", strerror(-r));
        fputc('\n', stderr);
        return exit_code_for(r);
}

void log_option_error(int argc, char **argv, const char *command)
{
        /* getopt_long has left optind past the offending word, optopt names the option it expected
         * a value for (0 for an unknown long option) */
        const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
        size_t len = strcspn(word, "=");
        if (strncmp(word, "--", 2) == 0 && optopt != 0 && !word[len])
                log_error("option '%s' needs a value (see 'blkvault help %s')", word, command);
        else if (strncmp(word, "--", 2) == 0)
                log_error("unknown option '%.*s' (see 'blkvault help %s')", (int)len, word, command);
        else /* every short option is a flag */
                log_error("unknown option '-%c' (see 'blkvault help %s')", optopt ? optopt : '?', command);
}

bool verbosity_parse(int opt)
{
        if (opt != 'q' && opt != 'v')
                return false;
        verbosity = opt == 'q' ? -1 : 1;
        return true;
}

bool is_quiet(void)
{
        return verbosity < 0;
}

int exit_code_for(int r)
{
        switch (r) {
        case 0:
                return EXIT_OK;
        case -ENOKEY:
        case -EKEYREJECTED:
                return EXIT_KEY;
        case -EBADMSG:
        case -EUCLEAN:
                return EXIT_DAMAGE;
        case -EBUSY:
                return EXIT_IN_USE;
        case -EACCES:
        case -EPERM:
                return EXIT_PERM;
        case -ENOSPC:
        case -EDQUOT:
                return EXIT_FULL;
        default:
                return EXIT_ERROR;
        }
}

bool secret_args_parse(SecretArgs *s, int opt, const char *arg)
{
        const char **field = opt == 'P' ? &s->passphrase_file
                             : opt == 'K' ? &s->key_file
                             : opt == 'F' ? &s->passphrase_fd
                             : opt == 'C' ? &s->passphrase_command
                                          : NULL;
        if (field)
                *field = arg;
        return field;
}

static int log_no_locked_memory(void)
{
        log_error_errno(-ENOMEM, "cannot allocate locked memory for the passphrase");
        return -ENOMEM;
}

/* Asks on the terminal (twice when confirm). */
static int passphrase_ask(bool confirm, char **ret)
{
        _cleanup_(bv_passphrase_freep) char *pass = NULL, *again = NULL;
        int r;

        r = bv_passphrase_prompt("Passphrase: ", &pass);
        if (r >= 0 && confirm)
                r = bv_passphrase_prompt("Repeat passphrase: ", &again);
        if (r == -ENOMEM)
                return log_no_locked_memory();
        if (r < 0)
                return -ENOKEY;
        if (confirm && strcmp(pass, again) != 0) {
                log_error("the passphrases differ");
                return -ENOKEY;
        }
        *ret = TAKE_PTR(pass);
        return 0;
}

static int passphrase_from_fd_arg(const char *arg, char **ret)
{
        char *end;
        long fd;
        int r;

        errno = 0;
        fd = strtol(arg, &end, 10);
        if (errno || end == arg || *end || fd < 0 || fd > INT_MAX) {
                log_error("--passphrase-fd takes a file descriptor number, not '%s'", arg);
                return -EINVAL;
        }
        r = bv_passphrase_from_fd((int)fd, ret);
        if (r == -EFBIG)
                log_error("the passphrase on file descriptor %ld is longer than %d bytes", fd, BV_PASSPHRASE_MAX);
        else if (r < 0)
                log_error_errno(r, "cannot read the passphrase from file descriptor %ld", fd);
        return r;
}

static int passphrase_from_command_arg(const char *command, char **ret)
{
        int status = 0;
        int r = bv_passphrase_from_command(command, ret, &status);

        if (r == -ECHILD)
                log_error("the passphrase command '%s' failed (exit status %d)", command, status);
        else if (r == -EFBIG)
                log_error("the passphrase command '%s' printed more than %d bytes", command, BV_PASSPHRASE_MAX);
        else if (r < 0)
                log_error_errno(r, "cannot run the passphrase command '%s'", command);
        return r;
}

/* Wipes an environment variable in place and removes it: the initial environment block is what
 * /proc/PID/environ and a core dump show. */
static void env_scrub(const char *name)
{
        char *v = getenv(name);
        if (v)
                explicit_bzero(v, strlen(v));
        (void)unsetenv(name);
}

static int passphrase_from_env_var(const char *name, char **ret)
{
        int r = bv_passphrase_from_env(name, ret);

        if (r >= 0) /* the copy in locked memory is the only one left */
                env_scrub(name);
        if (r == -E2BIG)
                log_error("the passphrase in $%s is longer than %d bytes", name, BV_PASSPHRASE_MAX);
        else if (r == -ENOMEM)
                return log_no_locked_memory();
        return r;
}

/* The passphrase from --passphrase-file, --passphrase-fd, --passphrase-command, the environment
 * or the terminal, in that order. Reports a failure. */
static int passphrase_get(const SecretArgs *s, bool confirm, char **ret)
{
        const char *env_name = s->new_secret ? "BLKVAULT_NEW_PASSPHRASE" : "BLKVAULT_PASSPHRASE";
        int r;

        if (s->passphrase_file) {
                r = bv_passphrase_from_file(s->passphrase_file, ret);
                if (r < 0)
                        log_error_errno(r, "cannot read passphrase file '%s'", s->passphrase_file);
                return r;
        }
        if (s->passphrase_fd)
                return passphrase_from_fd_arg(s->passphrase_fd, ret);
        if (s->passphrase_command)
                return passphrase_from_command_arg(s->passphrase_command, ret);
        r = passphrase_from_env_var(env_name, ret);
        if (r != -ENOENT)
                return r;
        if (isatty(STDIN_FILENO))
                return passphrase_ask(confirm, ret);
        if (s->new_secret)
                log_error("no new passphrase or key: set BLKVAULT_NEW_PASSPHRASE, or use "
                          "--new-passphrase-file or --new-key-file");
        else
                log_error("the repository is encrypted: set BLKVAULT_PASSPHRASE, or use --passphrase-file, "
                          "--passphrase-fd, --passphrase-command or --key-file");
        return -ENOKEY;
}

int secret_get(const SecretArgs *s, bool encrypted, bool confirm, BvSecret *ret)
{
        int sources = !!s->key_file + !!s->passphrase_file + !!s->passphrase_fd + !!s->passphrase_command;
        char *pass = NULL;
        int r;

        *ret = (BvSecret){ .keyring = s->keyring };
        if (!encrypted || s->keyring)
                return 0;
        if (s->key_file && s->passphrase_file && sources == 2) {
                log_error(s->new_secret ? "--new-key-file and --new-passphrase-file exclude each other"
                                        : "--key-file and --passphrase-file exclude each other");
                return -EINVAL;
        }
        if (sources > 1) {
                log_error("--key-file, --passphrase-file, --passphrase-fd and --passphrase-command exclude each other");
                return -EINVAL;
        }
        if (s->key_file) {
                ret->key_file = s->key_file;
                return 0;
        }
        r = passphrase_get(s, confirm, &pass);
        if (r < 0)
                return r;
        if (pass[0] == '\0') {
                log_error("the passphrase is empty");
                bv_passphrase_free(pass);
                return -ENOKEY;
        }
        ret->passphrase = pass;
        return 0;
}

void secret_done(BvSecret *s)
{
        bv_passphrase_free((char *)s->passphrase);
        *s = (BvSecret){};
}

static bool is_s3(const char *path)
{
        return strncmp(path, "s3://", 5) == 0;
}

int log_open_error(const char *path, int r)
{
        struct stat st;
        if (is_s3(path) && r == -ENOENT) {
                log_error("'%s' is not a blkvault repository (no config object there)", path);
                return EXIT_NO_REPO;
        }
        if (r == -ENOENT && stat(path, &st) < 0) {
                log_error("repository '%s' does not exist (create one with 'blkvault init %s')", path, path);
                return EXIT_NO_REPO;
        }
        if (r == -ENOENT || r == -ENOTDIR) {
                log_error("'%s' is not a blkvault repository (no config file)", path);
                return EXIT_NO_REPO;
        }
        if (r == -EACCES || r == -EPERM) {
                log_error("cannot open repository '%s': %s (its owner and root may open it; to let a group read it, share it: see blkvault-files(1))",
                          path, strerror(-r));
                return EXIT_PERM;
        }
        return log_error_errno(r, "cannot open repository '%s'", path);
}

/* A remote repository that failed: what its storage answered ("s3://BUCKET/KEY: HTTP 403 ...",
 * the endpoint that did not answer), which says more than the errno. */
static int log_storage_error(const char *path, const BvRepoProblem *p, int r)
{
        if (r == -ENOENT && strstr(p->message, "/config: ")) {
                /* what a user finds after someone deleted the objects: say where they still are */
                log_error("cannot open repository '%s': no config object there (%s); if its objects were "
                          "deleted and the bucket keeps versions, --point-in-time=TIME reads the repository as "
                          "it was at TIME",
                          path, p->message);
                return EXIT_NO_REPO;
        }
        log_error("cannot open repository '%s': %s (%s)", path, p->message, strerror(-r));
        return r == -EACCES || r == -EPERM ? EXIT_PERM : exit_code_for(r);
}

/* Damaged files already warned of (one repository per command). */
static size_t damage_reported;

/* bv_repo_open_report, with a status line while a passphrase's key is derived (scrypt takes
 * most of a second) and the time it took with -v. */
static int open_deriving(const char *path, const BvSecret *secret, BvRepoProblem *problem, BvRepo **rp)
{
        uint64_t start = bv_now_monotonic_ns();
        bool shown = secret->passphrase && status_begin("deriving the key from the passphrase (scrypt)...");
        int r = bv_repo_open_started(rp, secret, problem);

        status_end(shown);
        if (r >= 0)
                log_verbose("opened repository '%s' in %.2f s%s", path,
                            (double)(bv_now_monotonic_ns() - start) / 1e9,
                            secret->passphrase ? " (most of it deriving the key from the passphrase)" : "");
        return r;
}

const char *storage_said(BvRepo *repo, char *buf, size_t len)
{
        char said[320];

        bv_repo_storage_error(repo, said, sizeof(said));
        snprintf(buf, len, "%s%s%s", said[0] ? " (" : "", said, said[0] ? ")" : "");
        return buf;
}

int refuse_s3_write(const char *path)
{
        if (!is_s3(path))
                return EXIT_OK;
        log_error("cannot write to '%s': writing to an S3 repository is not supported yet (list, info, "
                  "verify, restore, serve, mount and files read one; copy, prune and gc write one)", path);
        return EXIT_ERROR;
}

int open_repo_secret(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret,
                            BvSecret *ret_secret)
{
        BvRepoProblem problem = {};
        BvRepoConfig cfg;
        BvSecret secret;
        BvRepo *started = NULL;
        int r, e;

        if (s->point_in_time && !is_s3(path)) {
                log_error("--point-in-time needs an S3 repository (s3://BUCKET[/PREFIX], with versioning): "
                          "'%s' is a directory, which keeps no earlier versions", path);
                return EXIT_USAGE;
        }
        if (flags & BV_OPEN_WRITE && (e = refuse_s3_write(path)) != EXIT_OK) /* prune and gc write one */
                return e;
        /* the config, read once: what it says decides whether to ask for a secret, and the open
         * goes on with it */
        r = bv_repo_start_at(path, s->point_in_time, flags, &problem, &started);
        if (r >= 0)
                cfg = *bv_repo_config(started);
        if (r < 0 && problem.message[0])
                return log_storage_error(path, &problem, r);
        if (r < 0 && (e = report_open_problem(path, &problem, r)) >= 0)
                return e;
        if (r < 0)
                return log_open_error(path, r);
        /* a secret named on the command line or in the configuration goes to the open even when the
         * peek saw no cipher: the open refuses it from the config it reads itself */
        bool given = s->key_file || s->passphrase_file || s->passphrase_fd || s->passphrase_command;
        r = secret_get(s, cfg.cipher != BV_CIPHER_NONE || given, false, &secret);
        if (r < 0) {
                bv_repo_close(started);
                return EXIT_KEY;
        }
        r = open_deriving(path, &secret, &problem, &started);
        if (r >= 0)
                *ret = started;
        if (r < 0 || !ret_secret)
                secret_done(&secret);
        else
                *ret_secret = secret;
        if (r == -EKEYREJECTED) {
                log_error("cannot open repository '%s': it is not encrypted, so it is not the one the %s given "
                          "belongs to (an unencrypted repository opens without one)",
                          path, s->key_file ? "key file" : "passphrase");
                return EXIT_KEY;
        }
        if (r == -ENOKEY) {
                log_error("cannot open repository '%s': wrong passphrase or key", path);
                return EXIT_KEY;
        }
        if (r == -EBUSY)
                return log_locked(path, &problem, flags & BV_OPEN_GC);
        if (r < 0 && problem.message[0])
                return log_storage_error(path, &problem, r);
        if (r < 0 && (e = report_open_problem(path, &problem, r)) >= 0)
                return e;
        if (r < 0)
                return log_open_error(path, r);
        report_damage(*ret, &damage_reported);
        if (flags & BV_OPEN_WRITE)
                report_missing_packs(*ret);
        return EXIT_OK;
}

int log_locked(const char *path, const BvRepoProblem *problem, bool gc)
{
        /* the holder record is the repository's text (a stick's): shown escaped */
        _cleanup_free_ char *holder = escape_text(problem->holder, 0);
        const char *h = holder ? holder : "";
        if (gc)
                log_error("repository '%s' is locked by another garbage collection%s%s (run gc again once it is done)",
                          path, *h ? ", " : "", h);
        else
                log_error("repository '%s' is locked by another writer (a backup or key change is running)%s%s",
                          path, *h ? ": " : "", h);
        return EXIT_BUSY;
}

int open_repo(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret)
{
        return open_repo_secret(path, s, flags, ret, NULL);
}

int check_export(const char *path, const SecretArgs *s, const char *spec, char ret_id[], BvSecret *ret_secret,
                 char ret_disk[EXPORT_DISK_MAX])
{
        const BvSnapshot *snap;
        BvRepo *repo;
        int r;

        r = open_repo_secret(path, s, BV_OPEN_READ, &repo, ret_secret);
        if (r != EXIT_OK)
                return r;
        r = find_snapshot(repo, spec, &snap);
        if (r == EXIT_OK)
                memcpy(ret_id, snap->id, 2 * BV_SNAPSHOT_ID_SIZE + 1);
        if (r == EXIT_OK && ret_disk) {
                const BvSnapshotLibvirt *l = &snap->source.libvirt;
                bool known = snap->source.kind == BV_SOURCE_LIBVIRT && l->domain && l->disk &&
                             strlen(l->disk) < EXPORT_DISK_MAX;
                snprintf(ret_disk, EXPORT_DISK_MAX, "%s", known ? l->disk : "");
        }
        bv_repo_close(repo);
        if (r != EXIT_OK)
                secret_done(ret_secret);
        return r;
}

const char *format_bytes(uint64_t n, char buf[32])
{
        static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = (double)n;
        unsigned u = 0;
        while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, 32, "%llu B", (unsigned long long)n);
        else
                snprintf(buf, 32, "%.1f %s", v, units[u]);
        return buf;
}

void json_print(struct json_object *o)
{
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
                    (isatty(STDOUT_FILENO) ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN);
        const char *text = json_object_to_json_string_ext(o, flags);
        _cleanup_free_ char *utf8 = NULL;

        /* names and paths may hold any bytes: the output stays UTF-8 (with out of memory, the
         * text as it is rather than nothing) */
        puts(bv_json_text_utf8(text, &utf8) >= 0 ? utf8 : text);
}

int print_usage(const char *text)
{
        fputs(text, stdout);
        return EXIT_OK;
}

void report_snapshot_damage(BvRepo *repo)
{
        report_damage(repo, &damage_reported);
}

static const char *snap_name(const BvSnapshot *s)
{
        return s->name ? s->name : "";
}

size_t snapshot_names(BvSnapshot *const *list, size_t n, char *buf, size_t size)
{
        size_t used = 0, distinct = 0;

        buf[0] = 0;
        for (size_t i = 0; i < n; i++) {
                bool seen = false;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = strcmp(snap_name(list[j]), snap_name(list[i])) == 0;
                if (seen)
                        continue;
                distinct++;
                if (used < size)
                        used += (size_t)snprintf(buf + used, size - used, "%s%s", distinct > 1 ? ", " : "",
                                                 snap_name(list[i]));
        }
        return distinct;
}

#define NOT_LATEST (-1) /* not an exit code (EXIT_ERROR is 1) */

/* NAME@latest: the newest snapshot named NAME. A bare "latest" only when every snapshot has the
 * same name: after a backup of another source it would silently pick that one. Returns
 * NOT_LATEST when spec is neither (the library resolves it), otherwise an exit code. */
static int find_latest(BvRepo *repo, const char *spec, const BvSnapshot **ret)
{
        static const char suffix[] = "@latest";
        size_t len = strlen(spec), slen = strlen(suffix);
        bool scoped = len > slen && strcmp(spec + len - slen, suffix) == 0;
        BvSnapshot *const *list;
        size_t n;

        if (!scoped && strcmp(spec, "latest") != 0)
                return NOT_LATEST;
        int r = bv_repo_snapshots(repo, &list, &n);
        report_snapshot_damage(repo);
        if (r < 0)
                return log_error_errno(r, "cannot read the snapshots of '%s'", bv_repo_path(repo));
        if (scoped) {
                for (size_t i = n; i > 0; i--)
                        if (strlen(snap_name(list[i - 1])) == len - slen &&
                            strncmp(snap_name(list[i - 1]), spec, len - slen) == 0) {
                                *ret = list[i - 1];
                                return EXIT_OK;
                        }
                log_error("no snapshot is named '%.*s' (see 'blkvault list')", (int)(len - slen), spec);
                return EXIT_ERROR;
        }
        if (n == 0) {
                log_error("the repository has no snapshot yet");
                return EXIT_ERROR;
        }
        char names[1024];
        size_t distinct = snapshot_names(list, n, names, sizeof(names));
        if (distinct > 1) {
                log_error("'latest' is ambiguous: the repository holds snapshots of %zu names (%s); say which "
                          "with NAME@latest", distinct, names);
                return EXIT_USAGE;
        }
        *ret = list[n - 1];
        return EXIT_OK;
}

/* The newest by time may be one made while the clock was set ahead: it then stays "latest". */
static void warn_future_latest(const char *spec, const BvSnapshot *s)
{
        char when[64];
        time_t now = time(NULL);
        if (now <= 0 || s->time <= (uint64_t)now)
                return;
        format_time_local(s->time, when);
        _cleanup_free_ char *shown = escape_text(spec, 64);
        log_warning("%s is snapshot %.8s, dated %s, after the current time: it was made while the clock was set "
                    "ahead and may not be the last one written (see 'blkvault list')",
                    shown ? shown : "?", s->id, when);
}

int find_snapshot(BvRepo *repo, const char *spec, const BvSnapshot **ret)
{
        int r = find_latest(repo, spec, ret);
        if (r == EXIT_OK)
                warn_future_latest(spec, *ret);
        if (r != NOT_LATEST)
                return r;
        r = bv_repo_find_snapshot(repo, spec, ret);
        report_snapshot_damage(repo);
        if (r >= 0)
                return EXIT_OK;
        _cleanup_free_ char *shown = escape_text(spec, 64);
        if (r == -ENOENT)
                log_error("no snapshot matches '%s' (see 'blkvault list')", shown ? shown : "?");
        else if (r == -ENOTUNIQ)
                log_error("'%s' matches more than one snapshot: give more of the id", shown ? shown : "?");
        else
                return log_error_errno(r, "cannot look up snapshot '%s'", shown ? shown : "?");
        return EXIT_ERROR;
}

/* The nbdkit plugin to load: $BLKVAULT_NBD_PLUGIN, the build tree's, or the installed one. */
static const char *nbd_plugin_path(void)
{
        static char path[4200];
        const char *env = getenv("BLKVAULT_NBD_PLUGIN");
        if (env)
                return env;
        /* Running from the build tree: the plugin sits in ../../nbd-plugin/ of this binary. */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        snprintf(path, sizeof(path), "%s/../../nbd-plugin/nbdkit-blkvault-plugin.so", self);
                        if (access(path, R_OK) == 0)
                                return path;
                }
        }
        return "blkvault"; /* installed in nbdkit's plugin directory */
}

const char *nbdkit_threads_arg(PluginArgs *pa)
{
        (void)pa;
        return "--threads=1";
}

/* The passphrase for the plugin: in a pipe whose read end the nbdkit child inherits (and the
 * plugin reads once), never in its environment or on its command line. */
static int passphrase_pipe(PluginArgs *pa, const char *passphrase)
{
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        /* at most BV_PASSPHRASE_MAX bytes: far less than a pipe holds, so this does not block */
        int r = bv_write_all(fds[1], passphrase, strlen(passphrase));
        safe_close(fds[1]);
        if (r >= 0 && fcntl(fds[0], F_SETFD, 0) < 0)
                r = -errno;
        if (r < 0) {
                safe_close(fds[0]);
                return r;
        }
        pa->secret_fd = fds[0];
        snprintf(pa->secret, sizeof(pa->secret), "passphrase-fd=%d", fds[0]);
        return 0;
}

int plugin_args(PluginArgs *pa, const char *repo, const char *id, const char *cache, const SecretArgs *s,
                const BvSecret *secret, char **argv, size_t *n)
{
        pa->secret_fd = -EBADF;
        argv[(*n)++] = (char *)nbd_plugin_path();
        snprintf(pa->repo, sizeof(pa->repo), "repo=%s", repo);
        argv[(*n)++] = pa->repo;
        snprintf(pa->snapshot, sizeof(pa->snapshot), "snapshot=%s", id);
        argv[(*n)++] = pa->snapshot;
        if (cache) {
                snprintf(pa->cache, sizeof(pa->cache), "cache=%s", cache);
                argv[(*n)++] = pa->cache;
        }
        if (s->point_in_time) {
                snprintf(pa->point_in_time, sizeof(pa->point_in_time), "point-in-time=%lld",
                         (long long)s->point_in_time);
                argv[(*n)++] = pa->point_in_time;
        }
        /* The plugin reads the same secret: files by name, a passphrase through a pipe. */
        if (s->key_file) {
                snprintf(pa->secret, sizeof(pa->secret), "key-file=%s", s->key_file);
                argv[(*n)++] = pa->secret;
        } else if (s->passphrase_file) {
                snprintf(pa->secret, sizeof(pa->secret), "passphrase-file=%s", s->passphrase_file);
                argv[(*n)++] = pa->secret;
        } else if (secret->passphrase) {
                int r = passphrase_pipe(pa, secret->passphrase);
                if (r < 0)
                        return log_error_errno(r, "cannot pass the secret to nbdkit");
                argv[(*n)++] = pa->secret;
        }
        return EXIT_OK;
}

void plugin_args_done(PluginArgs *pa)
{
        pa->secret_fd = safe_close(pa->secret_fd);
}

void secret_env_scrub(void)
{
        env_scrub("BLKVAULT_PASSPHRASE");
        env_scrub("BLKVAULT_NEW_PASSPHRASE");
}

/* Code points that change how a terminal shows what follows: C1 controls, bidi controls. */
static bool unsafe_code_point(uint32_t cp)
{
        return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
               (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029;
}

const char *shell_word(const char *word, char *buf, size_t size)
{
        static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-";
        size_t n = 0;

        if (word[0] && strspn(word, plain) == strlen(word)) {
                snprintf(buf, size, "%s", word);
                return buf;
        }
        buf[n++] = '\'';
        for (const char *c = word; *c && n + 5 < size; c++) {
                if (*c == '\'') {
                        memcpy(buf + n, "'\\''", 4);
                        n += 4;
                } else
                        buf[n++] = *c;
        }
        buf[n++] = '\'';
        buf[n] = 0;
        return buf;
}

char *escape_text(const char *text, size_t max)
{
        const unsigned char *s = (const unsigned char *)text;
        size_t len = strlen(text), end = max && len > max ? max : len;
        char *out = malloc(4 * (end + 4) + 4), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < end;) {
                uint32_t cp = 0;
                size_t n = bv_utf8_sequence(s + i, &cp);
                if (s[i] == '\\') {
                        o = stpcpy(o, "\\\\");
                        i++;
                } else if (s[i] == '\n' || s[i] == '\t') {
                        o = stpcpy(o, s[i] == '\n' ? "\\n" : "\\t");
                        i++;
                } else if (s[i] < 0x20 || s[i] == 0x7f || n == 0 || (n > 1 && unsafe_code_point(cp))) {
                        for (size_t k = 0; k < (n ? n : 1); k++)
                                o += sprintf(o, "\\x%02x", s[i + k]);
                        i += n ? n : 1;
                } else {
                        memcpy(o, s + i, n);
                        o += n;
                        i += n;
                }
        }
        if (end < len)
                o = stpcpy(o, "...");
        *o = '\0';
        return out;
}

volatile sig_atomic_t interrupted;
static void (*interrupt_cancel)(void);

static void on_interrupt(int sig)
{
        interrupted = sig;
        if (interrupt_cancel)
                interrupt_cancel();
}

int catch_interrupts(void (*cancel)(void))
{
        struct sigaction sa = { .sa_handler = on_interrupt, .sa_flags = SA_RESTART };

        interrupt_cancel = cancel;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
            sigaction(SIGHUP, &sa, NULL) < 0)
                return log_error_errno(-errno, "cannot catch interrupting signals");
        return EXIT_OK;
}

int log_device_in_use(const char *dev, const char *consequence)
{
        char who[PATH_MAX + 256];
        struct stat st;

        int r = stat(dev, &st) < 0 ? -errno : bv_blockdev_user(st.st_rdev, who, sizeof(who));
        if (r > 0)
                log_error("'%s' is in use: %s; %s", dev, who, consequence);
        else if (r == 0)
                log_error("'%s' is in use (held exclusively, though no mount of it, no device stacked on it and "
                          "no process with it open is seen); %s", dev, consequence);
        else
                log_error("'%s' is in use (mounted, or held by another device); %s", dev, consequence);
        return EXIT_IN_USE;
}
