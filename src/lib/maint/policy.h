/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/*
 * Retention policy (docs/FORMAT.md, "Retention policy"): a pure function over (name, time,
 * protected) that decides which snapshots a prune keeps and by which rule. Buckets are in
 * local time (TZ).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
        BV_KEEP_NONE = 0, /* forget */
        BV_KEEP_PROTECTED,
        BV_KEEP_LAST,
        BV_KEEP_WITHIN,
        BV_KEEP_HOURLY,
        BV_KEEP_DAILY,
        BV_KEEP_WEEKLY,
        BV_KEEP_MONTHLY,
        BV_KEEP_YEARLY,
        BV_KEEP_FUTURE, /* dated after now: a clock that was wrong */
} BvKeepRule;

/* Counts: 0 = rule unused, -1 = every bucket; within: seconds before the group's newest, 0 = unused.
 * now (unix seconds, 0 = unused): a snapshot dated after it is kept (BV_KEEP_FUTURE) and counts
 * for no rule, so one backup made under a clock set ahead can neither become the newest that
 * --keep-within measures from nor take a bucket. */
typedef struct {
        int last, hourly, daily, weekly, monthly, yearly;
        int64_t within;
        int64_t now;
} BvPolicy;

typedef struct {
        const char *name;
        int64_t time; /* unix seconds */
        bool protected_;
} BvPolicySnap;

/* snaps in listing order (oldest first). Fills rules[i] for each; returns the number kept,
 * -EINVAL if the policy has no rule. */
int bv_policy_apply(const BvPolicy *p, const BvPolicySnap *snaps, size_t n, BvKeepRule *rules);
const char *bv_keep_rule_name(BvKeepRule r);
