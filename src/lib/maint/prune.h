/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/*
 * Prune (docs/LIFECYCLE.md, "Retention policy"): applies a BvPolicy to the snapshots of a
 * repository and forgets those that no rule keeps. Space is reclaimed by gc (gc.h).
 */
#include <stdbool.h>
#include <stddef.h>

#include "policy.h"
#include "repo.h"

typedef struct BvPruneItem {
        const BvSnapshot *snap; /* owned by the repository's snapshot list */
        BvKeepRule rule;        /* BV_KEEP_NONE: forgotten (or would be, with dry_run) */
} BvPruneItem;

/* The snapshots named name (every name when NULL), oldest first, each with the rule that keeps
 * it; unless dry_run, forgets those no rule keeps. *ret_items is malloc'd. Returns the number
 * forgotten (or that would be), -EINVAL if the policy has no rule, or the error of the first
 * snapshot that could not be forgotten (those before it are forgotten), whose record
 * (snapshots/<id>.snap) *ret_problem names if not NULL (an empty path for other errors). */
int bv_prune(BvRepo *repo, const BvPolicy *p, const char *name, bool dry_run, BvPruneItem **ret_items,
             size_t *ret_count, BvRepoProblem *ret_problem);
