/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "prune.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "snapshot-forget.h"

static bool name_matches(const BvSnapshot *s, const char *name)
{
        return !name || strcmp(s->name ? s->name : "", name) == 0;
}

int bv_prune(BvRepo *repo, const BvPolicy *p, const char *name, bool dry_run, BvPruneItem **ret_items,
             size_t *ret_count, BvRepoProblem *ret_problem)
{
        BvSnapshot *const *all;
        size_t n_all, n = 0;
        BvBackend *b = bv_repo_backend(repo);
        int r, forgot = 0;
        BvPolicy pol = *p;

        if (pol.now == 0) /* snapshots dated later are kept, and measured from by no rule */
                pol.now = (int64_t)time(NULL);

        if (ret_problem)
                *ret_problem = (BvRepoProblem){};
        r = bv_repo_snapshots(repo, &all, &n_all);
        if (r < 0)
                return r;
        _cleanup_free_ BvPruneItem *items = calloc(MAX(n_all, (size_t)1), sizeof(*items));
        _cleanup_free_ BvPolicySnap *ps = calloc(MAX(n_all, (size_t)1), sizeof(*ps));
        _cleanup_free_ BvKeepRule *rules = calloc(MAX(n_all, (size_t)1), sizeof(*rules));
        if (!items || !ps || !rules)
                return -ENOMEM;
        for (size_t i = 0; i < n_all; i++) {
                if (!name_matches(all[i], name))
                        continue;
                r = bv_snapshot_is_protected(b, all[i]->id);
                if (r < 0)
                        return r;
                items[n].snap = all[i];
                ps[n] = (BvPolicySnap){ .name = all[i]->name, .time = (int64_t)MIN(all[i]->time, (uint64_t)INT64_MAX), .protected_ = r > 0 };
                n++;
        }
        r = bv_policy_apply(&pol, ps, n, rules);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                items[i].rule = rules[i];
        for (size_t i = 0; i < n; i++) {
                if (items[i].rule != BV_KEEP_NONE)
                        continue;
                if (!dry_run) {
                        r = bv_snapshot_forget(b, items[i].snap->id, false);
                        if (r < 0 && r != -ENOENT) {
                                char path[sizeof("snapshots/.snap") + 2 * BV_SNAPSHOT_ID_SIZE];
                                snprintf(path, sizeof(path), "snapshots/%s.snap", items[i].snap->id);
                                return bv_repo_problem_note(ret_problem, b, path, false, r);
                        }
                }
                forgot++;
        }
        *ret_items = TAKE_PTR(items);
        *ret_count = n;
        return forgot;
}
