/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * agent-tool: drives the library's guest-agent freeze (src/lib/virt/agent.h) from
 * tests/libvirt/test-libvirt-agent.sh against the machine's real libvirtd, one run a call:
 *
 *   agent-tool [--no-freeze] [--timeout=S] [--gate=FILE] [--fail] DOMAIN
 *       bv_virt_frozen_call with a stand-in for the backup job's start that, with --gate, creates
 *       FILE.waiting and waits until FILE exists (the guest stays frozen meanwhile), and with
 *       --fail fails (-EIO). Prints "agent yes|no", "note WORDS" (when not frozen),
 *       "stale-thawed N" (a guest found frozen), "frozen N held MS freeze-call MS" (filesystems, the hold and the
 *       freeze call's part of it in milliseconds),
 *       "call ERRNO-NAME" when the stand-in failed; exits 1 when the thaw failed.
 *   agent-tool --status DOMAIN
 *       "frozen" or "thawed" (guest-fsfreeze-status)
 *
 * A libvirt failure prints "agent-tool: WHAT: LIBVIRT'S WORDS [ERRNO-NAME]" and exits 1.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fault/gate.h"
#include "agent.h"
#include "virt.h"

static const char *gate;
static bool fail_call, ran;

static int fail(const char *what, const char *words, int r)
{
        fprintf(stderr, "agent-tool: %s: %s [%s]\n", what, words && words[0] ? words : "-",
                strerrorname_np(-r) ?: "?");
        return 1;
}

/* The stand-in for virDomainBackupBegin. */
static int job_start(void *opaque)
{
        (void)opaque;
        ran = true;
        if (gate)
                gate_wait(gate, true);
        return fail_call ? -EIO : 0;
}

static int run(BvVirtDomain *d, const BvVirtFreezeOptions *o)
{
        BvVirtFreeze f;
        int r = bv_virt_frozen_call(d, o, job_start, NULL, &f);

        if (!ran)
                return fail("thaw of a frozen guest", bv_virt_error(bv_virt_domain_conn(d)), r);
        printf("agent %s\n", f.agent ? "yes" : "no");
        if (f.stale_thawed >= 0)
                printf("stale-thawed %d\n", f.stale_thawed);
        if (f.note[0])
                printf("note %s\n", f.note);
        else
                printf("frozen %d held %.1f freeze-call %.1f\n", f.filesystems, (double)f.hold_ns / 1e6,
                       (double)f.freeze_ns / 1e6);
        if (r < 0)
                printf("call %s\n", strerrorname_np(-r) ?: "?");
        if (f.thaw_error < 0)
                return fail("thaw", bv_virt_error(bv_virt_domain_conn(d)), f.thaw_error);
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"no-freeze", no_argument, NULL, 'n'}, {"timeout", required_argument, NULL, 't'},
                {"gate", required_argument, NULL, 'g'}, {"fail", no_argument, NULL, 'f'},
                {"status", no_argument, NULL, 's'},     {},
        };
        BvVirtFreezeOptions o = {};
        bool status = false;
        BvVirt *v = NULL;
        BvVirtDomain *d = NULL;
        char detail[BV_VIRT_ERROR_MAX];
        int c, r;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'n': o.no_freeze = true; break;
                case 't': o.timeout_s = atoi(optarg); break;
                case 'g': gate = optarg; break;
                case 'f': fail_call = true; break;
                case 's': status = true; break;
                default: return 2;
                }
        }
        if (optind + 1 != argc) {
                fprintf(stderr, "usage: agent-tool [--no-freeze] [--timeout=S] [--gate=FILE] [--fail] [--status] DOMAIN\n");
                return 2;
        }
        r = bv_virt_connect(NULL, &v, detail, sizeof(detail));
        if (r < 0)
                return fail("connect", detail, r);
        r = bv_virt_domain_open(v, argv[optind], &d);
        if (r < 0) {
                r = fail("domain", bv_virt_error(v), r);
        } else if (status) {
                r = bv_virt_agent_frozen(d, BV_VIRT_AGENT_TIMEOUT);
                if (r >= 0)
                        printf("%s\n", r ? "frozen" : "thawed");
                r = r < 0 ? fail("status", bv_virt_error(v), r) : 0;
        } else
                r = run(d, &o);
        bv_virt_domain_close(d);
        bv_virt_close(v);
        return r;
}
