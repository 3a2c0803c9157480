/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blkvault serve --libvirt-xml=FILE: instant recovery with libvirt. Once nbdkit answers, FILE gets
 * a <disk> element for the export (<source protocol='nbd'> over the Unix socket, <readonly/>
 * unless --writable, as the libvirt disk the snapshot was taken of when it is one, else as vdb)
 * and stderr says how to attach it or boot a VM from it. QEMU runs as
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

/* The element's <target>: the snapshot's own disk when it is a libvirt disk's (its name says the
 * bus, which libvirt infers: vd virtio, sd SCSI, hd IDE), so that it goes back in place of that
 * disk; else vdb on virtio, a second disk to attach. */
static void target_xml(const ServeOptions *o, char *buf, size_t size)
{
        char dev[6 * EXPORT_DISK_MAX];

        if (!o->disk[0])
                snprintf(buf, size, "<target dev='vdb' bus='virtio'/>");
        else if (strncmp(o->disk, "vd", 2) == 0)
                snprintf(buf, size, "<target dev='%s' bus='virtio'/>", xml_escape(o->disk, dev, sizeof(dev)));
        else
                snprintf(buf, size, "<target dev='%s'/>", xml_escape(o->disk, dev, sizeof(dev)));
}

/* How to use the element in file (with target_xml's <target>), on stderr. */
static void print_example(const ServeOptions *o, const char *file, const char *xml, const char *user)
{
        fprintf(stderr, "libvirt: '%s' holds this <disk> element for the export%s%s%s:\n%s", file,
                user ? " (its socket given to QEMU's user " : "", user ? user : "", user ? ")" : "", xml);
        if (o->disk[0])
                fprintf(stderr, "its target is %s, the disk the snapshot was taken of: attach it to a running domain\n"
                                "(edit <target> to a free one first), or detach it, with\n", o->disk);
        else
                fprintf(stderr, "attach it to a running domain (as vdb: edit <target> as needed), or detach it, with\n");
        fprintf(stderr,
                "  virsh attach-device DOMAIN %s --live\n"
                "  virsh detach-device DOMAIN %s --live\n"
                "or boot a VM from the snapshot without restoring it: serve it --writable (its writes go to a\n"
                "throw-away overlay), put the element in a domain's <devices> %s and\n"
                "  virsh create DOMAIN.xml\n",
                file, file, o->disk[0] ? "in place of that disk" : "as its first disk (vda)");
}

int serve_libvirt_announce(const ServeOptions *o)
{
        char sock[3 * PATH_MAX], xml[4 * PATH_MAX], target[8 * EXPORT_DISK_MAX];
        const char *user;
        int r;

        if (!o->libvirt_xml)
                return 0;
        r = give_to_qemu(o, &user);
        if (r < 0)
                return r;
        target_xml(o, target, sizeof(target));
        int n = snprintf(xml, sizeof(xml),
                         "<disk type='network' device='disk'>\n"
                         "  <driver name='qemu' type='raw'/>\n"
                         "  <source protocol='nbd'>\n"
                         "    <host transport='unix' socket='%s'/>\n"
                         "  </source>\n"
                         "  %s\n"
                         "%s"
                         "</disk>\n",
                         xml_escape(o->sock, sock, sizeof(sock)), target, o->writable ? "" : "  <readonly/>\n");
        _cleanup_close_ int fd = open(o->libvirt_xml, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
        r = fd < 0 ? -errno : bv_write_all(fd, xml, (size_t)n);
        if (r < 0)
                return log_error_errno(r, "cannot write the disk XML to '%s'", o->libvirt_xml);
        print_example(o, o->libvirt_xml, xml, user);
        return 0;
}
