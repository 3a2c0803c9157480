/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * virt-tool: drives the library's libvirt wrappers (src/lib/virt/virt.h) from the shell tests of
 * tests/libvirt/, one operation a run, against the machine's real libvirtd:
 *
 *   virt-tool [--uri=URI] connect          (prints the URI connected to)
 *   virt-tool [--uri=URI] domain NAME      ("name UUID running|shut-off")
 *   virt-tool [--uri=URI] disks NAME       ("TARGET DEVICE TYPE FORMAT SIZE SOURCE" lines, - for none)
 *   virt-tool [--uri=URI] tidy NAME        (with the domain's lock, ends a dead run's backup job:
 *                                          "aborted SOCKET", "no backup job")
 *   virt-tool [--uri=URI] prune NAME PREFIX [KEEP...]  (deletes PREFIX's checkpoints but KEEP: "deleted N")
 *
 * Without --uri the library's choice is used (LIBVIRT_DEFAULT_URI, else qemu:///system).
 * A failure prints "virt-tool: WHAT: LIBVIRT'S WORDS [ERRNO-NAME]" and exits 1; nothing else
 * (libvirt's own handler) may write to stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "virt-tidy.h"
#include "virt.h"

static int fail(const char *what, const char *words, int r)
{
        fprintf(stderr, "virt-tool: %s: %s [%s]\n", what, words && words[0] ? words : "-",
                strerrorname_np(-r) ?: "?");
        return 1;
}

static int do_domain(BvVirt *v, const char *name, bool disks)
{
        BvVirtDomain *d = NULL;
        BvVirtDisks k = {};
        int r = bv_virt_domain_open(v, name, &d);

        if (r < 0)
                return fail("domain", bv_virt_error(v), r);
        if (!disks) {
                r = bv_virt_domain_running(d);
                if (r >= 0)
                        printf("%s %s %s\n", bv_virt_domain_name(d), bv_virt_domain_uuid(d), r ? "running" : "shut-off");
        } else if ((r = bv_virt_domain_disks(d, &k)) >= 0) {
                for (size_t i = 0; i < k.n; i++)
                        printf("%s %s %s %s %llu %s\n", k.v[i].target, k.v[i].device, k.v[i].type ?: "-",
                               k.v[i].format ?: "-", (unsigned long long)k.v[i].size, k.v[i].source ?: "-");
                bv_virt_disks_done(&k);
        }
        bv_virt_domain_close(d);
        return r < 0 ? fail(disks ? "disks" : "state", bv_virt_error(v), r) : 0;
}

/* tidy NAME, prune NAME PREFIX [KEEP...]: virt-tidy.h's housekeeping of one domain */
static int do_tidy(BvVirt *v, int argc, char **argv)
{
        BvVirtDomain *d = NULL;
        char what[512];
        size_t deleted = 0;
        bool prune = strcmp(argv[0], "prune") == 0;

        if (argc < 2 || (prune && argc < 3))
                return 2;
        int r = bv_virt_domain_open(v, argv[1], &d);
        if (r < 0)
                return fail("domain", bv_virt_error(v), r);
        int lock = -1;
        if (prune)
                r = bv_virt_checkpoints_prune(d, argv[2], (const char *const *)argv + 3, (size_t)argc - 3, &deleted);
        else if ((r = bv_virt_job_lock(d, &lock)) >= 0) {
                r = bv_virt_job_tidy(d, what, sizeof(what));
                close(lock);
        }
        bv_virt_domain_close(d);
        if (r < 0)
                return fail(argv[0], r == -EINVAL ? "an empty prefix" : bv_virt_error(v), r);
        if (prune)
                printf("deleted %zu\n", deleted);
        else
                printf(r ? "aborted %s\n" : "no backup job\n", what);
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = { { "uri", required_argument, NULL, 'u' }, {} };
        const char *uri = NULL;
        char detail[BV_VIRT_ERROR_MAX];
        BvVirt *v = NULL;
        int c, r;

        while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1)
                if (c == 'u')
                        uri = optarg;
                else
                        return 2;
        if (optind >= argc)
                return 2;
        const char *op = argv[optind];
        r = bv_virt_connect(uri, &v, detail, sizeof(detail));
        if (r < 0)
                return fail("connect", detail, r);
        if (strcmp(op, "connect") == 0) {
                printf("%s\n", bv_virt_uri(v));
                r = 0;
        } else if ((strcmp(op, "domain") == 0 || strcmp(op, "disks") == 0) && optind + 1 < argc)
                r = do_domain(v, argv[optind + 1], strcmp(op, "disks") == 0);
        else if (strcmp(op, "tidy") == 0 || strcmp(op, "prune") == 0)
                r = do_tidy(v, argc - optind, argv + optind);
        else
                r = 2;
        bv_virt_close(v);
        return r;
}
