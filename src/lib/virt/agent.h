/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The guest's filesystems frozen around the start of a backup job, through the domain's
 * qemu-guest-agent (PVE's and virtnbdbackup's order): freeze, begin the job (its point in time),
 * thaw at once. The freeze is held only while the job starts; a guest left frozen by a run that
 * died in between is thawed by the next one (bv_virt_agent_check), even one that asks for no
 * freeze when a mark file says a freeze of ours was not thawed. Nothing here prints: the
 * outcome is in BvVirtFreeze and libvirt's words in bv_virt_error.
 */

#include <stdbool.h>
#include <stdint.h>

#include "virt.h"

/* Seconds guest-ping may take before the agent counts as not answering. */
#define BV_VIRT_AGENT_TIMEOUT 5
#define BV_VIRT_NOTE_MAX 320

typedef struct BvVirtFreeze {
        bool agent;          /* the agent answered guest-ping */
        bool not_asked;      /* no freeze was asked for (BvVirtFreezeOptions.no_freeze) */
        bool paused;         /* the domain is paused: no agent was asked (none can answer) */
        bool frozen;         /* frozen by bv_virt_freeze and not thawed yet: a thaw is owed */
        int filesystems;     /* how many the freeze froze */
        int stale_thawed;    /* found frozen (a run that died frozen) and thawed: how many; -1 none */
        uint64_t started_ns; /* monotonic, when the freeze was asked for */
        uint64_t freeze_ns;  /* how long the freeze call took (in the hold) */
        uint64_t hold_ns;    /* from asking for the freeze to the thaw's return: the longest the
                              * guest can have been frozen */
        char note[BV_VIRT_NOTE_MAX]; /* why there is no freeze (libvirt's words), "" when frozen */
        int thaw_error;      /* -errno when the thaw after the call failed (the guest may still
                              * be frozen: thaw_words says why), else 0 */
        char thaw_words[BV_VIRT_NOTE_MAX]; /* libvirt's words for the last failed thaw */
} BvVirtFreeze;

/* How bv_virt_frozen_call asks for consistency. */
typedef struct BvVirtFreezeOptions {
        bool no_freeze;    /* do not ask the agent at all: crash-consistent */
        int timeout_s;     /* for guest-ping; 0 means BV_VIRT_AGENT_TIMEOUT */
        /* NULL, or a file that exists from just before a freeze to its thaw: a run that died
         * frozen, or whose thaw failed, leaves it, and the next run asks the agent (even with
         * no_freeze) and thaws the guest */
        const char *mark;
} BvVirtFreezeOptions;

/*
 * Runs fn(opaque) (the start of a backup job: its point in time) with the guest's filesystems
 * frozen when the domain's agent answers: bv_virt_agent_check (which thaws a guest an earlier run
 * left frozen), bv_virt_freeze, fn, bv_virt_thaw, whatever fn returns. Without an answering
 * agent, a paused domain (f->paused: no agent is asked), a failed freeze or with o->no_freeze,
 * fn runs unfrozen (f->frozen is false after the call either way; f->filesystems tells whether
 * it ran frozen, f->note why not). With o->no_freeze the agent is asked only when o->mark exists
 * (a freeze of an earlier run was not thawed): a guest it finds frozen is thawed then
 * (f->stale_thawed). Returns what fn returns, or the -errno of a guest found frozen that would
 * not thaw, or of o->mark not made (fn is not run then).
 */
int bv_virt_frozen_call(BvVirtDomain *d, const BvVirtFreezeOptions *o, int (*fn)(void *opaque), void *opaque,
                        BvVirtFreeze *f);

/*
 * Asks the domain's agent for guest-ping within timeout_s seconds. When it answers, a guest whose
 * filesystems are frozen (guest-fsfreeze-status) is thawed first. Returns 1 when the agent
 * answers, 0 when it does not (not configured, not connected, no answer in time: f->note has
 * libvirt's words), -errno when the guest is frozen and does not thaw (bv_virt_error says why).
 */
int bv_virt_agent_check(BvVirtDomain *d, int timeout_s, BvVirtFreeze *f);

/* guest-fsfreeze-status: 1 frozen, 0 thawed, -errno (bv_virt_error says why). */
int bv_virt_agent_frozen(BvVirtDomain *d, int timeout_s);

/*
 * Freezes the guest's filesystems (virDomainFSFreeze). 0 with f->frozen set, or -errno with
 * f->note saying why (the guest is then thawed, as qemu-ga does itself on a failed freeze).
 */
int bv_virt_freeze(BvVirtDomain *d, BvVirtFreeze *f);

/*
 * Thaws what bv_virt_freeze froze (nothing when f->frozen is not set) and sets f->hold_ns.
 * Tried three times, a second apart. -errno when the guest stays frozen (bv_virt_error says
 * why; the next run's bv_virt_agent_check thaws it).
 */
int bv_virt_thaw(BvVirtDomain *d, BvVirtFreeze *f);
