/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault serve --export=NAME: the [export NAME] section of the configuration, served by
 * nbdkit on the socket systemd passes (blkvault-nbd@NAME.service, activated by its .socket).
 * The repository, the secret and the snapshot are checked here, with our messages, and then
 * this process becomes nbdkit (exec: LISTEN_PID stays right), which takes the socket from
 * LISTEN_FDS. The snapshot is pinned to what it resolved to at start.
 *
 * Run by hand (no socket passed to this process), it serves as `blkvault serve` does, on a
 * private Unix socket or an explicit --listen with TLS or --insecure: exec'd without LISTEN_FDS,
 * nbdkit would listen on every address, port 10809 (issue 21, finding 3).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

static const char usage_text[] =
        "Usage: blkvault serve --export=NAME [--config=FILE] [OPTIONS]\n\n"
        "Serve the export NAME of the configuration ([export NAME]: repository, snapshot, key-file\n"
        "or passphrase-file, cache) with nbdkit on the socket that systemd passes (socket activation,\n"
        "as blkvault-nbd@NAME.service does): this process becomes nbdkit. Run by hand, it serves in\n"
        "the foreground as 'blkvault serve REPO SNAPSHOT' does: on a Unix socket in a private\n"
        "directory unless told otherwise, printing the URI once it listens.\n\n"
        "  --export=NAME            the [export NAME] section\n"
        "  --config=FILE            the configuration (also $" BV_CONF_ENV ")\n"
        SERVE_LISTENER_HELP COMMON_OPTIONS_HELP;

/* Did systemd pass this process its listening socket? */
static bool socket_activated(void)
{
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        return pid && fds && strtol(pid, NULL, 10) == (long)getpid() && strtol(fds, NULL, 10) > 0;
}

/* The sockets systemd passed (fds 3 on): nbdkit serves a passed TCP socket without TLS, the
 * decrypted disk to anyone who reaches the port (a ListenStream=ADDR:PORT drop-in; issue 21,
 * finding 3 again), so one needs --insecure spelled out in the service's ExecStart, as --listen
 * does by hand; --insecure with only Unix sockets is a mistake. -1 when fine, else the exit code
 * (as serve_check_listener). */
static int check_passed_sockets(bool insecure)
{
        long n = strtol(getenv("LISTEN_FDS"), NULL, 10);
        bool tcp = false;
        for (int fd = 3; fd < 3 + n; fd++) {
                int domain = 0;
                socklen_t len = sizeof(domain);
                if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
                        return log_error_errno(-errno, "systemd passed fd %d, which is not a socket", fd);
                tcp |= domain != AF_UNIX;
        }
        if (tcp && !insecure) {
                log_error("systemd passed a socket that is not a Unix socket (a TCP ListenStream=?): the export "
                          "would serve the decrypted disk without TLS; add --insecure to the service's ExecStart "
                          "to serve it unencrypted and unauthenticated, or serve by hand with --listen=ADDR:PORT "
                          "and --tls-psk or --tls-certificates");
                return EXIT_ERROR;
        }
        if (!tcp && insecure) {
                log_error("--insecure goes with a TCP socket (a Unix socket is private without it)");
                return EXIT_USAGE;
        }
        if (tcp)
                log_warning("serving the decrypted disk over TCP without TLS (--insecure)");
        return -1;
}

static int exec_export(const BvConfExport *e)
{
        SecretArgs s = { .key_file = e->key_file, .passphrase_file = e->passphrase_file };
        _cleanup_(secret_done) BvSecret secret = {};
        char id[2 * BV_SNAPSHOT_ID_SIZE + 1];
        PluginArgs pa;
        char *args[16] = { (char *)"nbdkit", (char *)"--foreground", (char *)"--readonly", NULL, (char *)"--log=stderr" };
        size_t n = 5;

        int r = check_export(e->repository, &s, e->snapshot, id, &secret, NULL);
        if (r != EXIT_OK)
                return r;
        args[3] = (char *)nbdkit_threads_arg(&pa);
        r = plugin_args(&pa, e->repository, id, e->cache, &s, &secret, args, &n);
        secret_done(&secret);
        if (r != EXIT_OK)
                return r;
        args[n] = NULL;
        fflush(stdout);
        execvp(args[0], args);
        r = -errno;
        plugin_args_done(&pa);
        return log_error_errno(r, "cannot run nbdkit");
}

int serve_export(int argc, char **argv)
{
        _cleanup_(bv_conf_freep) BvConfig *conf = NULL;
        const char *config = NULL, *name = NULL;
        ServeOptions o = {};
        const CliOption options[] = {
                CLI_STR("export", &name),
                CLI_STR("config", &config),
                CLI_STR("socket", &o.socket),
                CLI_STR("listen", &o.listen),
                CLI_STR("tls-psk", &o.tls_psk),
                CLI_STR("tls-certificates", &o.tls_certs),
                CLI_FLAG("insecure", &o.insecure),
                {},
        };

        CLI_PARSE_OR_RETURN(argc, argv, .name = "serve", .usage = usage_text, .options = options,
                            .args = "--export=NAME"); /* no REPO or SNAPSHOT: the [export NAME] section names them */
        if (!name) {
                log_error("serve --export needs a NAME (--export=NAME)");
                return EXIT_USAGE;
        }
        bool activated = socket_activated();
        if (activated && (o.socket || o.listen || o.tls_psk || o.tls_certs)) {
                log_error("systemd passed a socket: where the export listens is its socket unit's to say, not "
                          "--socket, --listen, --tls-psk or --tls-certificates");
                return EXIT_USAGE;
        }
        int ec = activated ? check_passed_sockets(o.insecure) : serve_check_listener(&o);
        if (ec >= 0)
                return ec;
        ec = load_config(config, false, &conf);
        if (ec != EXIT_OK)
                return ec;
        const BvConfExport *e = bv_conf_export_by_name(conf, name);
        if (!e) {
                log_error("no export '%s' in the configuration (an [export %s] section)", name, name);
                return EXIT_ERROR;
        }
        if (e->mistake) {
                log_error("export '%s' is not served: its section has a mistake (%s)", name, e->mistake);
                return EXIT_ERROR;
        }
        if (activated)
                return exec_export(e);
        SecretArgs s = { .key_file = e->key_file, .passphrase_file = e->passphrase_file };
        char what[BV_CONF_NAME_MAX + 16];
        snprintf(what, sizeof(what), "export %s", e->name);
        o.cache = e->cache;
        return serve_by_hand(&o, e->repository, &s, e->snapshot, what);
}
