/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Freeze and thaw through the guest agent. The freeze and thaw are libvirt's own calls
 * (virDomainFSFreeze, virDomainFSThaw); guest-ping (with a timeout of ours: a hung agent must not
 * hold a backup up) and guest-fsfreeze-status have no call of their own and go through
 * virDomainQemuAgentCommand.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "timeutil.h"
#include "virt-internal.h"

#define THAW_TRIES 3

/* Runs one agent command; its "return" member, a new json object, in *ret. */
static int agent_command(BvVirtDomain *d, const char *cmd, int timeout_s, json_object **ret)
{
        char *out = virDomainQemuAgentCommand(d->dom, cmd, timeout_s, 0);
        json_object *o, *v;

        if (!out)
                return bv_virt_take_error(d->v);
        o = json_tokener_parse(out);
        if (!o || !json_object_object_get_ex(o, "return", &v)) {
                bv_virt_set_error(d->v, VIR_ERR_INTERNAL_ERROR, "the guest agent answered %s with '%.200s'", cmd, out);
                json_object_put(o);
                free(out);
                return -EBADMSG;
        }
        *ret = json_object_get(v);
        json_object_put(o);
        free(out);
        return 0;
}

int bv_virt_agent_frozen(BvVirtDomain *d, int timeout_s)
{
        json_object *v = NULL;
        const char *s;
        int r = agent_command(d, "{\"execute\":\"guest-fsfreeze-status\"}", timeout_s, &v);

        if (r < 0)
                return r;
        s = json_object_get_string(v);
        r = s && !strcmp(s, "frozen") ? 1 : s && !strcmp(s, "thawed") ? 0 : -EBADMSG;
        if (r < 0)
                bv_virt_set_error(d->v, VIR_ERR_INTERNAL_ERROR, "guest-fsfreeze-status answered '%s'", s ?: "");
        json_object_put(v);
        return r;
}

static int thaw_tries(BvVirtDomain *d)
{
        int r = -EIO;

        for (int i = 0; i < THAW_TRIES; i++) {
                if (i) {
                        sleep(1);
                        (void)bv_virt_domain_reconnect(d); /* libvirtd restarted while frozen */
                }
                r = virDomainFSThaw(d->dom, NULL, 0, 0);
                if (r >= 0)
                        return r;
                r = bv_virt_take_error(d->v);
        }
        return r;
}

int bv_virt_agent_check(BvVirtDomain *d, int timeout_s, BvVirtFreeze *f)
{
        json_object *v = NULL;
        int r;

        *f = (BvVirtFreeze){.stale_thawed = -1};
        r = agent_command(d, "{\"execute\":\"guest-ping\"}", timeout_s, &v);
        json_object_put(v);
        if (r < 0) {
                snprintf(f->note, sizeof(f->note), "%s", bv_virt_error(d->v));
                return 0;
        }
        f->agent = true;
        r = bv_virt_agent_frozen(d, timeout_s);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = thaw_tries(d);
        if (r < 0)
                return r;
        f->stale_thawed = r;
        return 1;
}

int bv_virt_freeze(BvVirtDomain *d, BvVirtFreeze *f)
{
        int r;

        f->started_ns = bv_now_monotonic_ns();
        r = virDomainFSFreeze(d->dom, NULL, 0, 0);
        if (r < 0) {
                r = bv_virt_take_error(d->v);
                snprintf(f->note, sizeof(f->note), "%s", bv_virt_error(d->v));
                /* qemu-ga thaws what it froze when a freeze fails; a timeout may leave it frozen */
                (void)thaw_tries(d);
                return r;
        }
        f->freeze_ns = bv_now_monotonic_ns() - f->started_ns;
        f->frozen = true;
        f->filesystems = r;
        f->note[0] = 0;
        return 0;
}

int bv_virt_thaw(BvVirtDomain *d, BvVirtFreeze *f)
{
        int r;

        if (!f->frozen)
                return 0;
        r = thaw_tries(d);
        f->hold_ns = bv_now_monotonic_ns() - f->started_ns;
        if (r < 0) {
                snprintf(f->thaw_words, sizeof(f->thaw_words), "%s", bv_virt_error(d->v));
                return r;
        }
        f->frozen = false;
        return 0;
}

/* The mark of a freeze not yet thawed made (just before the freeze): 0 or -errno. */
static int mark_make(BvVirtDomain *d, const char *mark)
{
        if (!mark)
                return 0;
        int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0) {
                int r = -errno;
                bv_virt_set_error(d->v, VIR_ERR_SYSTEM_ERROR, "cannot create '%s' (the mark of a freeze): %s", mark,
                                  strerror(-r));
                return r;
        }
        close(fd);
        return 0;
}

static void mark_remove(const char *mark)
{
        if (mark)
                (void)unlink(mark);
}

/* --no-freeze: the agent is asked only when the mark says an earlier run's freeze was not thawed
 * (then a guest found frozen is thawed, and the mark goes once the guest is known thawed). */
static int no_freeze_check(BvVirtDomain *d, const BvVirtFreezeOptions *o, int timeout_s, BvVirtFreeze *f)
{
        int r = 0;

        if (o->mark && access(o->mark, F_OK) == 0) {
                r = bv_virt_agent_check(d, timeout_s, f);
                if (r > 0)
                        mark_remove(o->mark);
        }
        f->not_asked = true;
        snprintf(f->note, sizeof(f->note), "no freeze was asked for");
        return r < 0 ? r : 0;
}

int bv_virt_frozen_call(BvVirtDomain *d, const BvVirtFreezeOptions *o, int (*fn)(void *opaque), void *opaque,
                        BvVirtFreeze *f)
{
        int timeout_s = o->timeout_s > 0 ? o->timeout_s : BV_VIRT_AGENT_TIMEOUT;
        int r;

        *f = (BvVirtFreeze){.stale_thawed = -1};
        if (bv_virt_domain_paused(d) > 0) { /* its agent cannot answer: no ping to wait for */
                f->paused = true;
                snprintf(f->note, sizeof(f->note), "the domain is paused");
        } else if (o->no_freeze) {
                r = no_freeze_check(d, o, timeout_s, f);
                if (r < 0)
                        return r;
        } else {
                r = bv_virt_agent_check(d, timeout_s, f);
                if (r > 0 && (r = mark_make(d, o->mark)) >= 0)
                        (void)bv_virt_freeze(d, f); /* a failed freeze leaves the mark: the next run asks */
                if (r < 0)
                        return r;
        }
        bool froze = f->frozen;
        r = fn(opaque);
        f->thaw_error = bv_virt_thaw(d, f);
        if (froze && f->thaw_error == 0)
                mark_remove(o->mark);
        return r;
}
