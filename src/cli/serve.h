/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* blkvault serve run by hand (cmd-serve.c), for a snapshot named on the command line and for an
 * [export NAME] section (serve-export.c) when systemd did not pass a socket. */

#include <limits.h>
#include <stdbool.h>

#include "cli.h"

#define SERVE_LISTENER_HELP                                                                                \
        "  --socket=PATH            listen on this Unix socket instead (a stale one is replaced)\n"         \
        "  --listen=ADDR:PORT       listen on TCP at ADDR ([ADDR]:PORT for IPv6), only with TLS or\n"      \
        "                           --insecure\n"                                                          \
        "  --tls-psk=FILE           require TLS with the pre-shared keys in FILE (USER:HEXKEY lines,\n"   \
        "                           made by 'psktool -u USER -p FILE')\n"                                  \
        "  --tls-certificates=DIR   require TLS with the X.509 files in DIR (ca-cert.pem,\n"              \
        "                           server-cert.pem, server-key.pem)\n"                                    \
        "  --insecure               with --listen: serve without TLS, to anyone who can connect\n"

typedef struct ServeOptions {
        const char *socket, *listen, *tls_psk, *tls_certs, *cache;
        bool insecure, writable;
        const char *uri_for; /* --uri-for: "qemu" (NULL) or "libguestfs" */
        const char *libvirt_xml; /* --libvirt-xml=FILE: a <disk> element for libvirt (serve-libvirt.c) */
        char disk[EXPORT_DISK_MAX]; /* the libvirt disk the snapshot was taken of ("vda"; "": none),
                                     * the element's <target> */
        const char *address, *port; /* from --listen */
        bool served;        /* nbdkit answered: the socket is ours to remove */
        char listen_addr[256], listen_port[8];
        char psk_user[64];  /* the first user in the --tls-psk file, for the printed URI */
        char psk_path[PATH_MAX]; /* the --tls-psk file, absolute (for the URI) */
        char certs_path[PATH_MAX]; /* the --tls-certificates directory, absolute */
        char dir[PATH_MAX]; /* the private directory */
        char sock[PATH_MAX + 16];
        char pidfile[PATH_MAX + 16];
} ServeOptions;

/* The listener options (--socket, --listen, --tls-psk, --tls-certificates, --insecure) checked
 * together: -1 when they are fine, else the exit code. */
int serve_check_listener(ServeOptions *o);

/* Serves snapshot spec of the repository at path with nbdkit, our child, on the listener of o,
 * printing its URI once it answers, until a signal. Returns serve's exit code. */
int serve_by_hand(ServeOptions *o, const char *path, const SecretArgs *s, const char *spec, const char *what);

/* A private serve for another command (files through libguestfs): nbdkit, our child, serving
 * snapshot id of the repository at path read-only on the Unix socket o->sock in a fresh private
 * directory, with the secret already read; returns once it answers (its pid in *ret_pid).
 * Reports; returns an exit code. serve_private_stop ends it and removes the directory. */
int serve_private_start(ServeOptions *o, const char *path, const SecretArgs *sargs, const BvSecret *secret,
                        const char *id, pid_t *ret_pid);
void serve_private_stop(ServeOptions *o, pid_t pid);

/* --libvirt-xml (serve-libvirt.c): checked with the listener options (-1 when fine, else the exit
 * code); once nbdkit answers, the socket is given to libvirt's QEMU user, the <disk> element is
 * written and the virsh example printed (0 or -errno, logged). */
int serve_libvirt_check(const ServeOptions *o);
int serve_libvirt_announce(const ServeOptions *o);
