/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * restore into an existing disk image, in place (--in-place, and --libvirt for a domain's disk):
 * the image is written through qemu-nbd (bv_restore_image), so a qcow2 stays a qcow2 with its
 * owner and mode, and a raw file keeps its inode; never replaced by a new file.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "restore.h"
#include "source.h"
#include "virt.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BvVirt, bv_virt_close);
DEFINE_TRIVIAL_CLEANUP_FUNC(BvVirtDomain, bv_virt_domain_close);

int restore_image_failure(int r, const BvSnapshot *snap, const char *path, const char *format,
                         const BvRestoreStats *stats, const char *detail)
{
        char a[32], b[32];

        if (r == -EMSGSIZE) {
                char word[4 * PATH_MAX + 8];
                log_error("the %s image '%s' is %s (%llu bytes) but snapshot %.8s is %s (%llu bytes): nothing was "
                          "written; resize the image first (qemu-img resize -f %s%s %s %llu) and restore again",
                          format, path, format_bytes(stats->dest_size, a), (unsigned long long)stats->dest_size,
                          snap->id, format_bytes(snap->size, b), (unsigned long long)snap->size, format,
                          stats->dest_size > snap->size ? " --shrink" : "", shell_word(path, word, sizeof(word)),
                          (unsigned long long)snap->size);
                return EXIT_ERROR;
        }
        if (r == -EBUSY) {
                log_error("cannot write the %s image '%s': a running VM uses it (qemu-nbd: %s); shut the VM down "
                          "first; nothing was written", format, path, detail);
                return EXIT_ERROR;
        }
        if (r == -ENOPKG) {
                log_error("cannot write the %s image '%s': qemu-nbd does not run (install qemu-utils)", format, path);
                return EXIT_ERROR;
        }
        if (r == -EBADMSG && detail[0]) {
                log_error("cannot write the %s image '%s': qemu cannot open it: %s; nothing was written", format,
                          path, detail);
                return EXIT_ERROR;
        }
        if (r == -EROFS) {
                log_error("cannot write the %s image '%s': qemu-nbd serves it read-only", format, path);
                return EXIT_ERROR;
        }
        return EXIT_OK;
}

int restore_image_format(const char *path, const char **ret_format)
{
        const char *format = "raw";
        int r = bv_source_detect_image(path, &format);
        if (r < 0)
                return r;
        *ret_format = format;
        return 0;
}

/* DOMAIN[:TARGET] into dom and target (NULL when not given); false when malformed. */
static bool split_domain(const char *arg, char *dom, size_t size, const char **ret_target)
{
        const char *colon = strrchr(arg, ':');
        size_t n = colon ? (size_t)(colon - arg) : strlen(arg);

        *ret_target = colon ? colon + 1 : NULL;
        if (n == 0 || n >= size || (colon && !colon[1]))
                return false;
        memcpy(dom, arg, n);
        dom[n] = '\0';
        return true;
}

/* The disk to restore into: TARGET, else the snapshot's own (a snapshot of libvirt:DOMAIN is
 * named DOMAIN-TARGET), else the domain's only disk. NULL after logging why. */
static const BvVirtDisk *pick_disk(const BvVirtDisks *disks, const char *dom, const char *target,
                                   const BvSnapshot *snap)
{
        size_t n = strlen(dom), n_disks = 0;
        const BvVirtDisk *only = NULL;
        char list[512] = "";

        for (size_t i = 0; i < disks->n; i++)
                if (strcmp(disks->v[i].device, "disk") == 0) {
                        only = &disks->v[i];
                        n_disks++;
                        size_t l = strlen(list);
                        snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", disks->v[i].target);
                }
        if (target) {
                const BvVirtDisk *k = bv_virt_disks_find(disks, target);
                if (!k)
                        log_error("domain '%s' has no disk '%s' (its disks: %s)", dom, target, list[0] ? list : "none");
                return k;
        }
        if (snap->name && strncmp(snap->name, dom, n) == 0 && snap->name[n] == '-' &&
            bv_virt_disks_find(disks, snap->name + n + 1))
                return bv_virt_disks_find(disks, snap->name + n + 1);
        if (n_disks == 1)
                return only;
        log_error("domain '%s' has %s disks (%s): name the one to restore into with --libvirt=%s:TARGET",
                  dom, n_disks ? "several" : "no", list[0] ? list : "none", dom);
        return NULL;
}

int restore_libvirt_disk(const char *arg, const char *uri, const BvSnapshot *snap, char *path, size_t path_size,
                         char *format, size_t format_size, char *what, size_t what_size)
{
        char dom[256], detail[BV_VIRT_ERROR_MAX];
        const char *target;
        int r;

        if (!split_domain(arg, dom, sizeof(dom), &target)) {
                log_error("invalid --libvirt '%s' (DOMAIN or DOMAIN:TARGET, such as vm1:vda)", arg);
                return EXIT_USAGE;
        }
        _cleanup_(bv_virt_closep) BvVirt *v = NULL;
        r = bv_virt_connect(uri, &v, detail, sizeof(detail));
        if (r < 0 && !detail[0]) /* e.g. libvirt cannot be loaded: log_full says which library and why */
                return log_error_errno(r, "cannot connect to libvirt%s%s", uri ? " at " : "", uri ? uri : "");
        if (r < 0) {
                log_error("cannot connect to libvirt%s%s: %s", uri ? " at " : "", uri ? uri : "", detail);
                return EXIT_ERROR;
        }
        _cleanup_(bv_virt_domain_closep) BvVirtDomain *d = NULL;
        r = bv_virt_domain_open(v, dom, &d);
        if (r < 0) {
                log_error("no domain '%s' at %s: %s", dom, bv_virt_uri(v), bv_virt_error(v)[0] ? bv_virt_error(v)
                                                                                             : strerror(-r));
                return EXIT_ERROR;
        }
        _cleanup_(bv_virt_disks_done) BvVirtDisks disks = {};
        r = bv_virt_domain_disks(d, &disks);
        if (r < 0) {
                log_error("cannot list the disks of domain '%s': %s", dom,
                          bv_virt_error(v)[0] ? bv_virt_error(v) : strerror(-r));
                return EXIT_ERROR;
        }
        if (disks.running) {
                char word[4 * 1024 + 8];
                log_error("domain '%s' is running: restoring into its disk under it would corrupt it; shut it down "
                          "first (virsh shutdown %s), or restore to a new file; nothing was written", dom,
                          shell_word(dom, word, sizeof(word)));
                return EXIT_ERROR;
        }
        const BvVirtDisk *k = pick_disk(&disks, dom, target, snap);
        if (!k)
                return EXIT_ERROR;
        if (!k->source || (strcmp(k->type, "file") != 0 && strcmp(k->type, "block") != 0)) {
                log_error("disk %s of domain '%s' is a %s disk%s: only a file or a block device is restored into",
                          k->target, dom, k->type, k->source ? "" : " without a source");
                return EXIT_ERROR;
        }
        snprintf(path, path_size, "%s", k->source);
        snprintf(format, format_size, "%s", k->format ? k->format : "raw");
        snprintf(what, what_size, "disk %s of domain '%s' (%s)", k->target, dom, k->source);
        return EXIT_OK;
}
