/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "macro.h"
#include "secmem.h"
#include "timeutil.h"

#define PASSPHRASE_MAX 1024
/* Every passphrase buffer has this size (room for a prompt and its confirmation), so that
 * secret_done frees what was allocated. */
#define PASSPHRASE_BUF (2 * (PASSPHRASE_MAX + 2))

static void vlog(const char *prefix, const char *fmt, va_list ap, int r)
{
        fputs(prefix, stderr);
        vfprintf(stderr, fmt, ap);
        if (r < 0)
                fprintf(stderr, ": %s", strerror(-r));
        fputc('\n', stderr);
}

void log_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vlog("error: ", fmt, ap, 0);
        va_end(ap);
}

void log_info(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vlog("", fmt, ap, 0);
        va_end(ap);
}

int exit_code_for(int r)
{
        switch (r) {
        case 0:
                return EXIT_OK;
        case -ENOKEY:
                return EXIT_KEY;
        case -EBADMSG:
        case -EUCLEAN:
                return EXIT_DAMAGE;
        case -EBUSY:
                return EXIT_BUSY;
        case -ENOSPC:
        case -EDQUOT:
                return EXIT_FULL;
        default:
                return EXIT_ERROR;
        }
}

int log_error_errno(int r, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vlog("error: ", fmt, ap, r);
        va_end(ap);
        return exit_code_for(r);
}

bool secret_args_parse(SecretArgs *s, int opt, const char *arg)
{
        switch (opt) {
        case 'P':
                s->passphrase_file = arg;
                return true;
        case 'K':
                s->key_file = arg;
                return true;
        default:
                return false;
        }
}

static int prompt(const char *question, char *buf, size_t size)
{
        struct termios old, noecho;
        FILE *tty = fopen("/dev/tty", "r+e");
        if (!tty)
                return -ENOTTY;
        fprintf(tty, "%s", question);
        fflush(tty);
        bool restore = tcgetattr(fileno(tty), &old) == 0;
        if (restore) {
                noecho = old;
                noecho.c_lflag &= ~(tcflag_t)ECHO;
                tcsetattr(fileno(tty), TCSAFLUSH, &noecho);
        }
        char *ok = fgets(buf, (int)size, tty);
        if (restore)
                tcsetattr(fileno(tty), TCSAFLUSH, &old);
        fprintf(tty, "\n");
        fclose(tty);
        if (!ok)
                return -EIO;
        buf[strcspn(buf, "\n")] = '\0';
        return 0;
}

static int log_no_locked_memory(void)
{
        log_error_errno(-ENOMEM, "cannot allocate locked memory for the passphrase");
        return -ENOMEM;
}

int secret_get(const SecretArgs *s, bool encrypted, bool confirm, BvSecret *ret)
{
        *ret = (BvSecret){};
        if (!encrypted)
                return 0;
        if (s->key_file && s->passphrase_file) {
                log_error(s->new_secret ? "--new-key-file and --new-passphrase-file exclude each other"
                                        : "--key-file and --passphrase-file exclude each other");
                return -EINVAL;
        }
        if (s->key_file) {
                ret->key_file = s->key_file;
                return 0;
        }
        const char *env_name = s->new_secret ? "BLKVAULT_NEW_PASSPHRASE" : "BLKVAULT_PASSPHRASE";
        const char *env = getenv(env_name);
        char *pass = NULL;
        int r;
        if (s->passphrase_file) {
                size_t len, size;
                /* one trailing newline is not part of the passphrase */
                r = bv_read_secret_file(AT_FDCWD, s->passphrase_file, PASSPHRASE_MAX, PASSPHRASE_BUF, true,
                                        (void **)&pass, &len, &size);
                if (r < 0) {
                        log_error_errno(r, "cannot read passphrase file '%s'", s->passphrase_file);
                        return r;
                }
        } else if (env) {
                if (strlen(env) > PASSPHRASE_MAX) {
                        log_error("the passphrase in $%s is longer than %d bytes", env_name, PASSPHRASE_MAX);
                        return -E2BIG;
                }
                pass = bv_secure_alloc(PASSPHRASE_BUF);
                if (!pass)
                        return log_no_locked_memory();
                strcpy(pass, env);
                /* the copy in locked memory is the only one: nothing else (a core, a child's
                 * environment, /proc/PID/environ) shows the passphrase */
                bv_wipe((char *)env, strlen(env));
                (void)unsetenv(env_name);
        } else if (isatty(STDIN_FILENO)) {
                pass = bv_secure_alloc(PASSPHRASE_BUF);
                if (!pass)
                        return log_no_locked_memory();
                char *again = pass + PASSPHRASE_MAX + 2;
                r = prompt("Passphrase: ", pass, PASSPHRASE_MAX + 2);
                if (r >= 0 && confirm) {
                        r = prompt("Repeat passphrase: ", again, PASSPHRASE_MAX + 2);
                        if (r >= 0 && strcmp(pass, again) != 0) {
                                log_error("the passphrases differ");
                                r = -ENOKEY;
                        }
                }
                if (r < 0) {
                        bv_secure_free(pass, PASSPHRASE_BUF);
                        return -ENOKEY;
                }
        } else {
                if (s->new_secret)
                        log_error("no new passphrase or key: set BLKVAULT_NEW_PASSPHRASE, or use "
                                  "--new-passphrase-file or --new-key-file");
                else
                        log_error("the repository is encrypted: set BLKVAULT_PASSPHRASE, or use --passphrase-file "
                                  "or --key-file");
                return -ENOKEY;
        }
        if (pass[0] == '\0') {
                log_error("the passphrase is empty");
                bv_secure_free(pass, PASSPHRASE_BUF);
                return -ENOKEY;
        }
        ret->passphrase = pass;
        return 0;
}

void secret_done(BvSecret *s)
{
        if (s->passphrase)
                bv_secure_free((void *)s->passphrase, PASSPHRASE_BUF);
        *s = (BvSecret){};
}

/* open_repo, handing the secret back in *ret_secret when asked (the caller wipes it with
 * secret_done); on failure it is wiped here. */
static int open_repo_secret(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret,
                            BvSecret *ret_secret)
{
        BvRepoConfig cfg;
        BvSecret secret;
        int r;

        r = bv_repo_peek_config(path, &cfg);
        if (r < 0)
                return log_error_errno(r, "cannot open repository '%s'", path);
        r = secret_get(s, cfg.cipher != BV_CIPHER_NONE, false, &secret);
        if (r < 0)
                return EXIT_KEY;
        r = bv_repo_open(path, &secret, flags, ret);
        if (r < 0 || !ret_secret)
                secret_done(&secret);
        else
                *ret_secret = secret;
        if (r == -ENOKEY) {
                log_error("cannot open repository '%s': wrong passphrase or key", path);
                return EXIT_KEY;
        }
        if (r == -EBUSY) {
                log_error("repository '%s' is locked by another writer (a backup or key change is running)",
                          path);
                return EXIT_BUSY;
        }
        if (r < 0)
                return log_error_errno(r, "cannot open repository '%s'", path);
        return EXIT_OK;
}

int open_repo(const char *path, const SecretArgs *s, BvOpenFlags flags, BvRepo **ret)
{
        return open_repo_secret(path, s, flags, ret, NULL);
}

int check_export(const char *path, const SecretArgs *s, const char *spec, char ret_id[], BvSecret *ret_secret)
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

void progress_init(Progress *p, const char *verb, bool quiet)
{
        p->enabled = !quiet && isatty(STDERR_FILENO);
        p->verb = verb;
}

void progress_update(const BvProgress *bp, void *userdata)
{
        Progress *p = userdata;
        char a[32], b[32], rate[32];
        if (!p->enabled)
                return;
        double secs = (double)bp->elapsed_ns / 1e9;
        double bps = secs > 0 ? (double)bp->done / secs : 0;
        format_bytes((uint64_t)bps, rate);
        if (bp->total != UINT64_MAX && bp->total > 0) {
                double left = bps > 0 ? (double)(bp->total - MIN(bp->done, bp->total)) / bps : 0;
                fprintf(stderr, "\r\033[K%s %s / %s (%.0f%%), %s/s, ETA %u:%02u", p->verb,
                        format_bytes(bp->done, a), format_bytes(bp->total, b),
                        100.0 * (double)bp->done / (double)bp->total, rate, (unsigned)left / 60,
                        (unsigned)left % 60);
        } else
                fprintf(stderr, "\r\033[K%s %s, %s/s", p->verb, format_bytes(bp->done, a), rate);
        fflush(stderr);
}

void progress_done(Progress *p)
{
        if (p->enabled) {
                fprintf(stderr, "\r\033[K");
                fflush(stderr);
        }
}

void json_print(struct json_object *o)
{
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
                    (isatty(STDOUT_FILENO) ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN);
        puts(json_object_to_json_string_ext(o, flags));
}

int print_usage(const char *text)
{
        fputs(text, stdout);
        return EXIT_OK;
}

int find_snapshot(BvRepo *repo, const char *spec, const BvSnapshot **ret)
{
        int r = bv_repo_find_snapshot(repo, spec, ret);
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
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        snprintf(pa->threads, sizeof(pa->threads), "--threads=%ld", cpus < 1 ? 2 : MIN(2 * cpus, 256L));
        return pa->threads;
}

int plugin_args(PluginArgs *pa, const char *repo, const char *id, const char *cache, const SecretArgs *s,
                const BvSecret *secret, char **argv, size_t *n)
{
        argv[(*n)++] = (char *)nbd_plugin_path();
        snprintf(pa->repo, sizeof(pa->repo), "repo=%s", repo);
        argv[(*n)++] = pa->repo;
        snprintf(pa->snapshot, sizeof(pa->snapshot), "snapshot=%s", id);
        argv[(*n)++] = pa->snapshot;
        if (cache) {
                snprintf(pa->cache, sizeof(pa->cache), "cache=%s", cache);
                argv[(*n)++] = pa->cache;
        }
        /* The plugin reads the same secret: files by name, a passphrase through the environment. */
        if (s->key_file) {
                snprintf(pa->secret, sizeof(pa->secret), "key-file=%s", s->key_file);
                argv[(*n)++] = pa->secret;
        } else if (s->passphrase_file) {
                snprintf(pa->secret, sizeof(pa->secret), "passphrase-file=%s", s->passphrase_file);
                argv[(*n)++] = pa->secret;
        } else if (secret->passphrase && setenv("BLKVAULT_PASSPHRASE", secret->passphrase, 1) < 0)
                return log_error_errno(-errno, "cannot pass the secret to nbdkit");
        return EXIT_OK;
}

int parse_repo_json_args(int argc, char **argv, const char *usage, const char *command, SecretArgs *s,
                         bool *ret_json, const char **ret_repo)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                SECRET_OPTIONS,
                {},
        };
        int c;

        *ret_json = false;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (secret_args_parse(s, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        return print_usage(usage);
                case 'j':
                        *ret_json = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind + 1 != argc) {
                log_error("expected exactly one argument: REPO (see 'blkvault %s --help')", command);
                return EXIT_USAGE;
        }
        *ret_repo = argv[optind];
        return -1;
}

int parse_threads(const char *arg, unsigned *ret)
{
        char *end;
        unsigned long v = strtoul(arg, &end, 10);
        if (end == arg || *end || v == 0 || v > 256) {
                log_error("invalid --threads '%s' (1 to 256)", arg);
                return -EINVAL;
        }
        *ret = (unsigned)v;
        return 0;
}

/* Length of the valid UTF-8 sequence at s (1 to 4), 0 if it is not one; *ret_cp its code point. */
static size_t utf8_sequence(const unsigned char *s, uint32_t *ret_cp)
{
        static const uint32_t min_cp[] = { 0, 0, 0x80, 0x800, 0x10000 };
        size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
        uint32_t cp;

        if (n == 0 || s[0] > 0xf4)
                return 0;
        cp = s[0] & (0x7f >> n);
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret_cp = cp;
        return n;
}

/* Code points that change how a terminal shows what follows: C1 controls, bidi controls. */
static bool unsafe_code_point(uint32_t cp)
{
        return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
               (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029;
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
                size_t n = s[i] >= 0x80 ? utf8_sequence(s + i, &cp) : 1;
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
