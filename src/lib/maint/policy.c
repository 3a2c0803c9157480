/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_BUCKET_RULES 5

static int64_t bucket_of(int64_t t, int rule)
{
        time_t tt = (time_t)t;
        struct tm tm;
        if (!localtime_r(&tt, &tm))
                return INT64_MIN;
        int64_t year = tm.tm_year + 1900;
        switch (rule) {
        case 0:
                return (year * 1000 + tm.tm_yday) * 100 + tm.tm_hour;
        case 1:
                return year * 1000 + tm.tm_yday;
        case 2: {
                char b[16];
                if (strftime(b, sizeof b, "%G%V", &tm) == 0)
                        return INT64_MIN;
                return strtoll(b, NULL, 10);
        }
        case 3:
                return year * 100 + tm.tm_mon;
        default:
                return year;
        }
}

static bool same_name(const BvPolicySnap *a, const BvPolicySnap *b)
{
        return strcmp(a->name ? a->name : "", b->name ? b->name : "") == 0;
}

static bool is_future(const BvPolicy *p, const BvPolicySnap *s)
{
        return p->now > 0 && s->time > p->now;
}

/* Applies the policy to the snapshots named like snaps[top], walking newest to oldest. */
static int apply_group(const BvPolicy *p, const BvPolicySnap *snaps, size_t top, BvKeepRule *rules, bool *done)
{
        int left[N_BUCKET_RULES] = {p->hourly, p->daily, p->weekly, p->monthly, p->yearly};
        int64_t lastb[N_BUCKET_RULES];
        int last_left = p->last, kept = 0;
        int64_t newest = snaps[top].time;

        for (size_t i = top + 1; i-- > 0;) /* the newest that is not in the future */
                if (!done[i] && same_name(&snaps[i], &snaps[top]) && !is_future(p, &snaps[i])) {
                        newest = snaps[i].time;
                        break;
                }
        for (int r = 0; r < N_BUCKET_RULES; r++)
                lastb[r] = INT64_MIN;
        for (size_t i = top + 1; i-- > 0;) {
                if (done[i] || !same_name(&snaps[i], &snaps[top]))
                        continue;
                done[i] = true;
                BvKeepRule rule = BV_KEEP_NONE;
                if (snaps[i].protected_ || is_future(p, &snaps[i])) {
                        rules[i] = snaps[i].protected_ ? BV_KEEP_PROTECTED : BV_KEEP_FUTURE;
                        kept++;
                        continue;
                }
                if (last_left != 0) {
                        rule = BV_KEEP_LAST;
                        if (last_left > 0)
                                last_left--;
                }
                /* unsigned: times far apart must not overflow */
                if (rule == BV_KEEP_NONE && p->within > 0 && newest >= snaps[i].time &&
                    (uint64_t)newest - (uint64_t)snaps[i].time <= (uint64_t)p->within)
                        rule = BV_KEEP_WITHIN;
                for (int r = 0; r < N_BUCKET_RULES; r++) {
                        int64_t b = bucket_of(snaps[i].time, r);
                        if (left[r] == 0 || b == lastb[r])
                                continue;
                        lastb[r] = b;
                        if (left[r] > 0)
                                left[r]--;
                        if (rule == BV_KEEP_NONE)
                                rule = (BvKeepRule)(BV_KEEP_HOURLY + r);
                }
                rules[i] = rule;
                kept += rule != BV_KEEP_NONE;
        }
        return kept;
}

int bv_policy_apply(const BvPolicy *p, const BvPolicySnap *snaps, size_t n, BvKeepRule *rules)
{
        if (p->last == 0 && p->within <= 0 && p->hourly == 0 && p->daily == 0 && p->weekly == 0 &&
            p->monthly == 0 && p->yearly == 0)
                return -EINVAL;
        bool *done = calloc(n ? n : 1, sizeof(bool));
        if (!done)
                return -ENOMEM;
        int kept = 0;
        for (size_t top = n; top-- > 0;)
                if (!done[top])
                        kept += apply_group(p, snaps, top, rules, done);
        free(done);
        return kept;
}

const char *bv_keep_rule_name(BvKeepRule r)
{
        static const char *const names[] = {"forget", "protected", "last",    "within",
                                            "hourly", "daily",     "weekly",  "monthly", "yearly", "future"};
        return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}
