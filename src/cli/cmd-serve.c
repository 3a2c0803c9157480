/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault serve: one snapshot over NBD, by nbdkit and the plugin, in the foreground.
 *
 * The export is the decrypted disk, so by default it is reachable by its user only: nbdkit
 * listens on a Unix socket in a private 0700 directory (under $XDG_RUNTIME_DIR, /run/blkvault
 * for root, else $TMPDIR or /tmp), which also holds nbdkit's pid file. TCP only when asked for
 * with an explicit address (--listen=ADDR:PORT), and then only with TLS (--tls-psk,
 * --tls-certificates: nbdkit requires it) or --insecure spelled out (with a warning): nbdkit left
 * to itself would listen on every address (issue 21, finding 3). nbdkit runs as our child: the URI is printed only once it listens and answers
 * (a busy port, a bad option or a failing plugin exit non-zero with nothing on stdout), and the
 * directory is removed when it stops. The passphrase reaches the plugin through a pipe, never
 * through nbdkit's environment (see plugin_args).
 *
 * A server that dies is not restarted: the nbdkit abort that made that look necessary (a client
 * hanging up with replies in flight) is avoided by --threads=1 (see nbdkit_threads_arg), and a
 * restart would cut every client's connection anyway. A socket file left by a killed server is
 * removed before listening, once a connect shows nobody serves on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <dirent.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "serve.h"
#include "macro.h"
#include "timeutil.h"

static const char usage_text[] =
        "Usage: blkvault serve REPO SNAPSHOT [OPTIONS]\n"
        "       blkvault serve --export=NAME [--config=FILE]\n\n"
        "Serve SNAPSHOT over NBD with nbdkit in the foreground (Ctrl-C stops it) and print its URI\n"
        "once it listens. By default it listens on a Unix socket in a private directory that only\n"
        "this user can enter. The export is read-only unless --writable, which stacks nbdkit's cow\n"
        "filter: writes go to a temporary overlay that is thrown away; the repository is never written.\n\n"
        SERVE_LISTENER_HELP
        "  --writable               accept writes into a throw-away overlay (boot a VM from it)\n"
        "  --cache=SIZE             decoded chunk cache (default 256M)\n"
        "  --libvirt-xml=FILE       write a libvirt <disk> element for the export to FILE and print\n"
        "                           how to attach it (virsh attach-device) or boot a VM from it; as\n"
        "                           root the socket is given to libvirt's QEMU user\n"
        "  --uri-for=qemu|libguestfs  the URI printed for a Unix socket: nbd+unix:///?socket=PATH\n"
        "                           (qemu, libnbd tools; default) or nbd://?socket=PATH (libguestfs:\n"
        "                           guestfish -a, virt-ls -a); the other form is said on stderr\n"
        "  --export=NAME            serve the configuration's [export NAME] section instead of REPO\n"
        "                           SNAPSHOT (on the socket systemd passes, else as above)\n"
        "  --config=FILE            with --export: the configuration (also $" BV_CONF_ENV ")\n"
        POINT_IN_TIME_HELP SECRET_OPTIONS_HELP COMMON_OPTIONS_HELP;

static bool is_localhost(const char *address)
{
        return strcmp(address, "localhost") == 0 || strncmp(address, "127.", 4) == 0 ||
               strcmp(address, "::1") == 0;
}

/* --listen=ADDR:PORT ([ADDR]:PORT for IPv6) into o->address and o->port, checked to resolve. */
static int parse_listen(ServeOptions *o)
{
        const char *arg = o->listen, *colon = strrchr(arg, ':'), *addr = arg;
        size_t len = colon ? (size_t)(colon - arg) : 0;
        bool bad = !colon || len == 0;
        unsigned port;
        if (!bad && arg[0] == '[') {
                bad = len < 3 || arg[len - 1] != ']';
                addr++, len -= 2;
        } else if (!bad)
                bad = memchr(arg, ':', len) != NULL; /* IPv6 without brackets */
        if (bad || len >= sizeof(o->listen_addr) || memchr(addr, '[', len) || memchr(addr, ']', len)) {
                log_error("invalid --listen '%s' (ADDR:PORT, [ADDR]:PORT for IPv6: an explicit address)", arg);
                return EXIT_USAGE;
        }
        if (parse_unsigned_arg("--listen port", colon + 1, 1, 65535, &port) < 0)
                return EXIT_USAGE;
        memcpy(o->listen_addr, addr, len);
        o->listen_addr[len] = '\0';
        snprintf(o->listen_port, sizeof(o->listen_port), "%u", port);
        o->address = o->listen_addr;
        o->port = o->listen_port;

        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
        int r = getaddrinfo(o->address, o->port, &hints, &ai);
        if (r != 0) {
                log_error("invalid --listen address '%s': %s", o->address, gai_strerror(r));
                return EXIT_USAGE;
        }
        freeaddrinfo(ai);
        return -1;
}

int serve_check_listener(ServeOptions *o)
{
        if (o->socket && o->listen) {
                log_error("--socket excludes --listen");
                return EXIT_USAGE;
        }
        if (o->tls_psk && o->tls_certs) {
                log_error("--tls-psk and --tls-certificates exclude each other");
                return EXIT_USAGE;
        }
        if (o->insecure && (o->tls_psk || o->tls_certs)) {
                log_error("--insecure excludes --tls-psk and --tls-certificates");
                return EXIT_USAGE;
        }
        if (o->insecure && !o->listen) {
                log_error("--insecure goes with --listen=ADDR:PORT (a Unix socket is private without it)");
                return EXIT_USAGE;
        }
        if (!o->listen)
                return -1;
        if (!o->tls_psk && !o->tls_certs && !o->insecure) {
                log_error("--listen=%s would serve the decrypted disk over TCP without TLS: add "
                          "--tls-psk=FILE or --tls-certificates=DIR, or --insecure to serve it unencrypted "
                          "and unauthenticated", o->listen);
                return EXIT_USAGE;
        }
        return parse_listen(o);
}

/* *argcp and *argvp: with $BLKVAULT_REPO put in (cli_parse) */
static int parse_options(int *argcp, char ***argvp, ServeOptions *o, SecretArgs *sargs)
{
        const CliOption options[] = {
                CLI_STR("socket", &o->socket),
                CLI_STR("listen", &o->listen),
                CLI_STR("tls-psk", &o->tls_psk),
                CLI_STR("tls-certificates", &o->tls_certs),
                CLI_FLAG("insecure", &o->insecure),
                CLI_FLAG("writable", &o->writable),
                CLI_PARSED("cache", parse_cache_size, &o->cache),
                CLI_STR("uri-for", &o->uri_for),
                CLI_STR("libvirt-xml", &o->libvirt_xml),
                POINT_IN_TIME_OPTION(sargs), {},
        };
        CLI_PARSE_OR_RETURN(*argcp, *argvp, .name = "serve", .usage = usage_text, .options = options, .secret = sargs,
                                        .args = "REPO SNAPSHOT", .repo = true);
        if (o->uri_for && strcmp(o->uri_for, "qemu") != 0 && strcmp(o->uri_for, "libguestfs") != 0) {
                log_error("invalid --uri-for '%s' (qemu or libguestfs)", o->uri_for);
                return EXIT_USAGE;
        }
        int r = serve_libvirt_check(o);
        return r >= 0 ? r : serve_check_listener(o);
}

/* --tls-certificates=DIR: nbdkit's x509 directory (server-cert.pem, server-key.pem, ca-cert.pem),
 * absolute for nbdkit and the printed URI. */
static int check_certs_dir(ServeOptions *o)
{
        static const char *const files[] = { "server-cert.pem", "server-key.pem", "ca-cert.pem" };
        if (!realpath(o->tls_certs, o->certs_path))
                return log_error_errno(-errno, "cannot use --tls-certificates '%s'", o->tls_certs);
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                char path[PATH_MAX + 32];
                snprintf(path, sizeof(path), "%s/%s", o->certs_path, files[i]);
                if (access(path, R_OK) < 0)
                        return log_error_errno(-errno, "cannot read '%s' (--tls-certificates needs %s, %s and %s)",
                                               path, files[0], files[1], files[2]);
        }
        o->tls_certs = o->certs_path;
        return EXIT_OK;
}

/* The first USER of a PSK file (USER:HEXKEY lines), which also shows the file is one. */
static int read_psk_user(ServeOptions *o)
{
        _cleanup_free_ char *text = NULL;
        char why[160];
        size_t len;
        /* a key anyone may read is no key: refused as the configuration's key files are */
        if (bv_conf_secret_problem(o->tls_psk, why, sizeof(why))) {
                log_error("the TLS key file '%s': %s; refused", o->tls_psk, why);
                return EXIT_ERROR;
        }
        int r = bv_read_file(AT_FDCWD, o->tls_psk, 1 << 20, (void **)&text, &len);
        if (r < 0)
                return log_error_errno(r, "cannot read the TLS key file '%s'", o->tls_psk);

        for (char *line = text, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                char *colon = strchr(line, ':');
                size_t user = colon ? (size_t)(colon - line) : 0, hex = colon ? strlen(colon + 1) : 0;
                if (user > 0 && user < sizeof(o->psk_user) && hex > 0 && hex % 2 == 0 &&
                    strspn(colon + 1, "0123456789abcdefABCDEF") == hex) {
                        memcpy(o->psk_user, line, user);
                        o->psk_user[user] = '\0';
                        if (!realpath(o->tls_psk, o->psk_path))
                                return log_error_errno(-errno, "cannot resolve '%s'", o->tls_psk);
                        o->tls_psk = o->psk_path;
                        return EXIT_OK;
                }
        }
        log_error("'%s' holds no USER:HEXKEY line (make one with 'psktool -u USER -p FILE')", o->tls_psk);
        return EXIT_ERROR;
}

/* Removes the private directories of earlier serves that were killed (kill -9 leaves them):
 * ours, whose pid file names a process that is gone. One without a pid file may belong to a
 * serve that is starting, and stays. */
static void remove_stale_dirs(const char *base)
{
        DIR *d;
        struct dirent *de;
        if (bv_opendir_at(AT_FDCWD, base, &d) < 0)
                return;
        while ((de = readdir(d))) {
                char dir[PATH_MAX], file[PATH_MAX + 16];
                _cleanup_free_ char *text = NULL;
                size_t len;
                struct stat st;
                if (strncmp(de->d_name, "blkvault-serve.", 15) != 0 ||
                    snprintf(dir, sizeof(dir), "%s/%s", base, de->d_name) >= (int)sizeof(dir) ||
                    lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
                        continue;
                snprintf(file, sizeof(file), "%s/nbdkit.pid", dir);
                if (bv_read_file(AT_FDCWD, file, 32, (void **)&text, &len) < 0 || atoi(text) <= 0 ||
                    kill(atoi(text), 0) == 0 || errno != ESRCH)
                        continue;
                (void)unlink(file);
                snprintf(file, sizeof(file), "%s/nbd.sock", dir);
                (void)unlink(file);
                (void)rmdir(dir);
        }
        closedir(d);
}

/* The private directory: a fresh 0700 one (mkdtemp) below the runtime directory. */
static int make_private_dir(ServeOptions *o)
{
        const char *base = getenv("XDG_RUNTIME_DIR");
        struct stat st;
        if (!base || base[0] != '/' || stat(base, &st) < 0 || !S_ISDIR(st.st_mode)) {
                base = geteuid() == 0 ? "/run/blkvault" : getenv("TMPDIR");
                if (!base || base[0] != '/')
                        base = "/tmp";
        }
        if (strcmp(base, "/run/blkvault") == 0) {
                int r = bv_mkdir_p(AT_FDCWD, base);
                if (r < 0)
                        return log_error_errno(r, "cannot create '%s'", base);
        }
        remove_stale_dirs(base);
        int n = snprintf(o->dir, sizeof(o->dir), "%s/blkvault-serve.XXXXXX", base);
        if (n < 0 || (size_t)n >= sizeof(o->dir) || !mkdtemp(o->dir))
                return log_error_errno(n < 0 || (size_t)n >= sizeof(o->dir) ? -ENAMETOOLONG : -errno,
                                       "cannot create a private directory in '%s'", base);
        snprintf(o->pidfile, sizeof(o->pidfile), "%s/nbdkit.pid", o->dir);
        if (!o->socket)
                snprintf(o->sock, sizeof(o->sock), "%s/nbd.sock", o->dir);
        else if (o->socket[0] == '/')
                snprintf(o->sock, sizeof(o->sock), "%s", o->socket);
        else {
                /* absolute, for the printed URI */
                char cwd[PATH_MAX];
                if (!getcwd(cwd, sizeof(cwd)))
                        return log_error_errno(-errno, "cannot get the current directory");
                snprintf(o->sock, sizeof(o->sock), "%s/%s", cwd, o->socket);
        }
        return EXIT_OK;
}

/* Removes the private directory, and the socket nbdkit served on (it leaves it behind). */
static void remove_private_dir(const ServeOptions *o)
{
        struct stat st;
        (void)unlink(o->pidfile);
        if ((o->served || !o->socket) && lstat(o->sock, &st) == 0 && S_ISSOCK(st.st_mode))
                (void)unlink(o->sock);
        (void)rmdir(o->dir);
}

/* A connected stream socket to sa, or -errno. */
static int connect_to(const struct sockaddr *sa, socklen_t len)
{
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, sa, len) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        return fd;
}

static int connect_unix(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        return connect_to((struct sockaddr *)&sa, sizeof(sa));
}

/* Does the server on fd greet as an NBD server? Reads the newstyle greeting ("NBDMAGIC",
 * "IHAVEOPT", 16 bits of flags; sent in the clear with TLS too) and says goodbye with
 * NBD_OPT_ABORT, waiting for its reply, so that nbdkit logs no error for the probe. Closes fd. */
static bool nbd_greets(int fd)
{
        static const char goodbye[] = { 0, 0, 0, 3, 'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0, 0, 0, 2, 0, 0, 0, 0 };
        char greeting[18], reply[20];
        bool ok = fd >= 0 && bv_read_all(fd, greeting, sizeof(greeting)) == (ssize_t)sizeof(greeting) &&
                  memcmp(greeting, "NBDMAGICIHAVEOPT", 16) == 0;
        if (ok && bv_write_all(fd, goodbye, sizeof(goodbye)) == 0)
                (void)bv_read_all(fd, reply, sizeof(reply));
        safe_close(fd);
        return ok;
}

static bool server_answers(const ServeOptions *o)
{
        if (!o->port)
                return nbd_greets(connect_unix(o->sock));
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
        if (getaddrinfo(o->address, o->port, &hints, &ai) != 0)
                return false;
        bool ok = false;
        for (struct addrinfo *a = ai; a && !ok; a = a->ai_next)
                ok = nbd_greets(connect_to(a->ai_addr, a->ai_addrlen));
        freeaddrinfo(ai);
        return ok;
}

/* --socket=PATH: a socket file nobody answers on (left by a killed server) is removed, so that
 * nbdkit can bind; a live server's socket or any other file is left alone and refused. */
static int prepare_socket_path(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? EXIT_OK : log_error_errno(-errno, "cannot use --socket '%s'", path);
        if (!S_ISSOCK(st.st_mode)) {
                log_error("'%s' exists and is not a socket", path);
                return EXIT_ERROR;
        }
        int fd = connect_unix(path);
        safe_close(fd);
        if (fd != -ECONNREFUSED) {
                log_error("'%s' is in use by a running server", path);
                return EXIT_ERROR;
        }
        if (unlink(path) < 0 && errno != ENOENT)
                return log_error_errno(-errno, "cannot remove the stale socket '%s'", path);
        log_info("removed the stale socket '%s' (no server answered on it)", path);
        return EXIT_OK;
}

/* nbdkit's command line, up to the plugin's parameters. */
static size_t server_args(ServeOptions *o, PluginArgs *pa, char **args)
{
        static char tls_arg[PATH_MAX + 16];
        size_t n = 0;
        args[n++] = "nbdkit";
        args[n++] = "--foreground";
        args[n++] = "--exit-with-parent";
        args[n++] = "--pidfile";
        args[n++] = o->pidfile;
        if (o->port) {
                args[n++] = "--port";
                args[n++] = (char *)o->port;
                args[n++] = "--ipaddr";
                args[n++] = (char *)o->address;
        } else {
                args[n++] = "--unix";
                args[n++] = o->sock;
        }
        if (o->tls_psk || o->tls_certs) {
                args[n++] = "--tls=require";
                snprintf(tls_arg, sizeof(tls_arg), o->tls_psk ? "--tls-psk=%s" : "--tls-certificates=%s",
                         o->tls_psk ? o->tls_psk : o->tls_certs);
                args[n++] = tls_arg;
        }
        args[n++] = (char *)nbdkit_threads_arg(pa);
        args[n++] = o->writable ? "--filter=cow" : "--readonly";
        return n;
}

static void print_uri(const ServeOptions *o)
{
        char host[300];
        if (o->port)
                snprintf(host, sizeof(host), strchr(o->address, ':') ? "[%s]:%s" : "%s:%s", o->address, o->port);
        if (o->tls_psk && o->port)
                printf("nbds://%s@%s/?tls-psk-file=%s\n", o->psk_user, host, o->tls_psk);
        else if (o->tls_certs && o->port)
                printf("nbds://%s/?tls-certificates=%s\n", host, o->tls_certs);
        else if (o->tls_certs)
                printf("nbds+unix:///?socket=%s&tls-certificates=%s\n", o->sock, o->tls_certs);
        else if (o->tls_psk)
                printf("nbds+unix://%s@/?socket=%s&tls-psk-file=%s\n", o->psk_user, o->sock, o->tls_psk);
        else if (o->port)
                printf("nbd://%s\n", host);
        else if (o->uri_for && strcmp(o->uri_for, "libguestfs") == 0)
                printf("nbd://?socket=%s\n", o->sock);
        else
                printf("nbd+unix:///?socket=%s\n", o->sock);
        fflush(stdout);
        /* libguestfs (guestfish -a, virt-ls -a, virt-cat -a) refuses nbd+unix:// and wants
         * nbd://?socket= for a Unix socket; qemu, nbdinfo, nbdcopy and nbdfuse want nbd+unix:// */
        if (o->port || o->tls_psk || o->tls_certs)
                return;
        if (o->uri_for && strcmp(o->uri_for, "libguestfs") == 0)
                log_info("for qemu and the libnbd tools (nbdinfo, nbdcopy, nbdfuse): nbd+unix:///?socket=%s", o->sock);
        else
                log_info("for libguestfs (guestfish -a, virt-ls -a, virt-cat -a): nbd://?socket=%s", o->sock);
}

static pid_t start_server(char **args, const sigset_t *old_mask)
{
        pid_t pid = fork();
        if (pid == 0) {
                (void)sigprocmask(SIG_SETMASK, old_mask, NULL);
                execvp(args[0], args);
                fprintf(stderr, "error: cannot run nbdkit: %s\n", strerror(errno));
                _exit(127);
        }
        return pid < 0 ? -errno : pid;
}

/* Runs nbdkit until it exits: prints the URI once it answers, passes SIGINT, SIGTERM and SIGHUP
 * on as SIGTERM. Returns the exit code of serve. */
static int supervise(ServeOptions *o, const char *what, PluginArgs *pa, char **args)
{
        sigset_t mask, old;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        (void)sigprocmask(SIG_BLOCK, &mask, &old);
        pid_t pid = start_server(args, &old);
        plugin_args_done(pa);
        if (pid < 0) {
                (void)sigprocmask(SIG_SETMASK, &old, NULL);
                return log_error_errno(pid, "cannot run nbdkit");
        }
        bool announced = false, stopping = false, shown = false;
        uint64_t start = bv_now_monotonic_ns(), drawn = 0;
        int status = 0;
        for (;;) {
                /* the pid file is written once nbdkit has bound its socket: only then can the
                 * greeting not be another server's */
                if (!announced && !stopping && access(o->pidfile, F_OK) == 0 && server_answers(o)) {
                        status_end(shown);
                        shown = false;
                        print_uri(o);
                        log_info("serving %s; stop with Ctrl-C", what);
                        announced = o->served = true;
                        if (serve_libvirt_announce(o) < 0 && !stopping) {
                                stopping = true;
                                (void)kill(pid, SIGTERM);
                        }
                }
                if (!announced && !stopping && bv_now_monotonic_ns() - drawn >= 250000000ull) {
                        char line[128];
                        drawn = bv_now_monotonic_ns();
                        snprintf(line, sizeof(line), "serve: starting nbdkit, which opens the repository (%.1f s)",
                                 (double)(drawn - start) / 1e9);
                        shown = status_begin(line);
                }
                struct timespec poll = { .tv_nsec = 20 * 1000 * 1000 };
                int sig = announced || stopping ? sigwaitinfo(&mask, NULL) : sigtimedwait(&mask, NULL, &poll);
                if (sig == SIGCHLD) {
                        if (waitpid(pid, &status, WNOHANG) == pid)
                                break;
                } else if (sig > 0 && !stopping) {
                        stopping = true;
                        (void)kill(pid, SIGTERM);
                }
        }
        (void)sigprocmask(SIG_SETMASK, &old, NULL);
        status_end(shown);
        if (stopping)
                return EXIT_OK;
        if (!announced) {
                log_error("nbdkit did not start serving (exit status %d): its message above says why%s",
                          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                          o->port ? " (a port in use? pick another in --listen)" : "");
                return EXIT_ERROR;
        }
        if (WIFSIGNALED(status)) {
                log_error("nbdkit was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
                return EXIT_ERROR;
        }
        if (WEXITSTATUS(status) != 0) {
                log_error("nbdkit exited with status %d", WEXITSTATUS(status));
                return EXIT_ERROR;
        }
        return EXIT_OK;
}

static void warn_unprotected(const ServeOptions *o)
{
        if (!o->port || !o->insecure)
                return;
        if (is_localhost(o->address))
                log_warning("--insecure: TCP port %s on %s is open to every local user, unauthenticated and "
                            "unencrypted", o->port, o->address);
        else
                log_warning("--insecure: TCP port %s on %s is open to anyone who can reach it, unauthenticated "
                            "and unencrypted", o->port, o->address);
}

int serve_by_hand(ServeOptions *o, const char *path, const SecretArgs *sargs, const char *spec, const char *what)
{
        int r;
        if (o->tls_psk && (r = read_psk_user(o)) != EXIT_OK)
                return r;
        if (o->tls_certs && (r = check_certs_dir(o)) != EXIT_OK)
                return r;

        /* Check the repository, the secret and the snapshot here, with our own messages, before
         * nbdkit takes over. */
        _cleanup_(secret_done) BvSecret secret = {};
        char id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        r = check_export(path, sargs, spec, id, &secret, o->disk);
        if (r != EXIT_OK)
                return r;
        secret_env_scrub();
        if (o->socket && (r = prepare_socket_path(o->socket)) != EXIT_OK)
                return r;
        if ((r = make_private_dir(o)) != EXIT_OK)
                return r;

        PluginArgs pa;
        char *args[40];
        size_t n = server_args(o, &pa, args);
        r = plugin_args(&pa, path, id, o->cache, sargs, &secret, args, &n);
        secret_done(&secret);
        if (r == EXIT_OK) {
                args[n] = NULL;
                char line[300];
                snprintf(line, sizeof(line), "%s%ssnapshot %.8s of '%s'%s", what ? what : "", what ? ": " : "", id,
                         path, o->writable ? " (writes go to a throw-away overlay)" : " read-only");
                warn_unprotected(o);
                r = supervise(o, line, &pa, args);
        }
        remove_private_dir(o);
        return r;
}

int serve_private_start(ServeOptions *o, const char *path, const SecretArgs *sargs, const BvSecret *secret,
                        const char *id, pid_t *ret_pid)
{
        PluginArgs pa;
        char *args[40];
        sigset_t none;
        int r = make_private_dir(o);

        if (r != EXIT_OK)
                return r;
        size_t n = server_args(o, &pa, args);
        r = plugin_args(&pa, path, id, o->cache, sargs, secret, args, &n);
        if (r != EXIT_OK) {
                remove_private_dir(o);
                return r;
        }
        args[n] = NULL;
        (void)sigprocmask(SIG_SETMASK, NULL, &none);
        pid_t pid = start_server(args, &none);
        plugin_args_done(&pa);
        if (pid < 0) {
                remove_private_dir(o);
                return log_error_errno(pid, "cannot run nbdkit");
        }
        /* nbdkit opens the repository itself: seconds on a big one */
        for (int waited = 0;; waited++) {
                int status;
                if (access(o->pidfile, F_OK) == 0 && server_answers(o)) {
                        o->served = true;
                        *ret_pid = pid;
                        return EXIT_OK;
                }
                if (waitpid(pid, &status, WNOHANG) == pid || waited > 6000) {
                        if (waited > 6000)
                                serve_private_stop(o, pid);
                        else
                                remove_private_dir(o);
                        log_error("nbdkit did not start serving snapshot %.8s: its message above says why", id);
                        return EXIT_ERROR;
                }
                (void)usleep(20000);
        }
}

void serve_private_stop(ServeOptions *o, pid_t pid)
{
        if (pid > 0) {
                (void)kill(pid, SIGTERM);
                (void)waitpid(pid, NULL, 0);
        }
        remove_private_dir(o);
}

int cmd_serve(int argc, char **argv)
{
        ServeOptions o = {};
        SecretArgs sargs = {};
        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strncmp(argv[i], "--export", 8) == 0)
                        return serve_export(argc, argv);
        int r = parse_options(&argc, &argv, &o, &sargs);
        if (r >= 0)
                return r;
        return serve_by_hand(&o, argv[optind], &sargs, argv[optind + 1], NULL);
}
