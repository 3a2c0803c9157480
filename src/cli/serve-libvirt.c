/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault serve --libvirt-xml=FILE: instant recovery with libvirt. Once nbdkit answers, FILE gets
 * a <disk> element for the export (<source protocol='nbd'> over the Unix socket, <readonly/>
 * unless --writable) and stderr says how to attach it or boot a VM from it. QEMU runs as
 * libvirt's user (libvirt-qemu on Debian, qemu elsewhere), which cannot enter the private
 * directory: when we are root, the directory and the socket are given to that user (and to no one
 * else), since libvirt does not relabel a network disk's socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "macro.h"
#include "serve.h"

/* libvirt's QEMU user: Debian's name, then Fedora's. */
static const struct passwd *qemu_user(void)
{
        static const char *const names[] = { "libvirt-qemu", "qemu" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                const struct passwd *pw = getpwnam(names[i]);
                if (pw)
                        return pw;
        }
        return NULL;
}

/* s with the characters XML gives a meaning escaped, into buf. */
static const char *xml_escape(const char *s, char *buf, size_t size)
{
        size_t n = 0;
        for (; *s && n + 7 < size; s++) {
                const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '\'' ? "&apos;"
                              : *s == '"' ? "&quot;" : NULL;
                if (e)
                        n += (size_t)snprintf(buf + n, size - n, "%s", e);
                else
                        buf[n++] = *s;
        }
        buf[n] = '\0';
        return buf;
}

int serve_libvirt_check(const ServeOptions *o)
{
        if (!o->libvirt_xml)
                return -1;
        if (o->listen || o->tls_psk || o->tls_certs) {
                log_error("--libvirt-xml describes a Unix socket: it does not go with --listen, --tls-psk or "
                          "--tls-certificates");
                return EXIT_USAGE;
        }
        return -1;
}

/* Gives the socket (and the private directory, when the socket is in it) to libvirt's QEMU user. */
static int give_to_qemu(const ServeOptions *o, const char **ret_user)
{
        const struct passwd *pw = qemu_user();

        *ret_user = NULL;
        if (geteuid() != 0 || !pw)
                return 0;
        *ret_user = pw->pw_name;
        if (!o->socket && chown(o->dir, pw->pw_uid, (gid_t)-1) < 0)
                return log_error_errno(-errno, "cannot give '%s' to libvirt's QEMU user %s", o->dir, pw->pw_name);
        if (chown(o->sock, pw->pw_uid, (gid_t)-1) < 0)
                return log_error_errno(-errno, "cannot give '%s' to libvirt's QEMU user %s", o->sock, pw->pw_name);
        return 0;
}

int serve_libvirt_announce(const ServeOptions *o)
{
        char sock[3 * PATH_MAX], xml[4 * PATH_MAX];
        const char *user;
        int r;

        if (!o->libvirt_xml)
                return 0;
        r = give_to_qemu(o, &user);
        if (r < 0)
                return r;
        int n = snprintf(xml, sizeof(xml),
                         "<disk type='network' device='disk'>\n"
                         "  <driver name='qemu' type='raw'/>\n"
                         "  <source protocol='nbd'>\n"
                         "    <host transport='unix' socket='%s'/>\n"
                         "  </source>\n"
                         "  <target dev='vdb' bus='virtio'/>\n"
                         "%s"
                         "</disk>\n",
                         xml_escape(o->sock, sock, sizeof(sock)), o->writable ? "" : "  <readonly/>\n");
        _cleanup_close_ int fd = open(o->libvirt_xml, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
        r = fd < 0 ? -errno : bv_write_all(fd, xml, (size_t)n);
        if (r < 0)
                return log_error_errno(r, "cannot write the disk XML to '%s'", o->libvirt_xml);
        fprintf(stderr,
                "libvirt: '%s' holds this <disk> element for the export%s%s%s:\n%s"
                "attach it to a running domain (as vdb: edit <target> as needed), or detach it, with\n"
                "  virsh attach-device DOMAIN %s --live\n"
                "  virsh detach-device DOMAIN %s --live\n"
                "or boot a VM from the snapshot without restoring it: serve it --writable (its writes go to a\n"
                "throw-away overlay), put the element in a domain's <devices> as its first disk (vda) and\n"
                "  virsh create DOMAIN.xml\n",
                o->libvirt_xml, user ? " (its socket given to QEMU's user " : "", user ? user : "", user ? ")" : "",
                xml, o->libvirt_xml, o->libvirt_xml);
        return 0;
}
