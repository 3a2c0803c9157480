/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bvtest.h"
#include "policy.h"

#include <time.h>

#define DAY 86400
#define T0 1704067200 /* 2024-01-01 00:00:00 UTC, a Monday (ISO week 1) */

/* One case: snapshots oldest first, the policy, the timezone and the expected rule per
 * snapshot as a letter: F forget, P protected, L last, W within, h d w m y bucket rules. */
typedef struct {
        const char *what, *tz;
        BvPolicy policy;
        BvPolicySnap snaps[8];
        size_t n;
        const char *expect;
} PolicyCase;

static const PolicyCase cases[] = {
        {"last 2 of 4", "UTC", {.last = 2},
         {{"a", T0, false}, {"a", T0 + DAY, false}, {"a", T0 + 2 * DAY, false}, {"a", T0 + 3 * DAY, false}}, 4,
         "FFLL"},
        {"daily 3 keeps the newest of each day", "UTC", {.daily = 3},
         {{"a", T0 + 36000, false}, {"a", T0 + 72000, false}, {"a", T0 + DAY + 36000, false},
          {"a", T0 + 2 * DAY + 36000, false}, {"a", T0 + 3 * DAY + 36000, false}}, 5,
         "FFddd"},
        {"retention per name", "UTC", {.last = 1},
         {{"a", T0, false}, {"b", T0 + 1, false}, {"a", T0 + 2, false}, {"b", T0 + 3, false}}, 4, "FFLL"},
        {"protected is kept and counts for no rule", "UTC", {.last = 1},
         {{"a", T0, true}, {"a", T0 + 1, false}, {"a", T0 + 2, false}, {"a", T0 + 3, true}}, 4, "PFLP"},
        {"within 1 day of the newest, inclusive", "UTC", {.within = DAY},
         {{"a", T0 - 1, false}, {"a", T0, false}, {"a", T0 + DAY - 3600, false}, {"a", T0 + DAY, false}}, 4,
         "FWWW"},
        {"weekly 2 uses ISO weeks", "UTC", {.weekly = 2},
         {{"a", T0, false}, {"a", T0 + 6 * DAY, false}, {"a", T0 + 7 * DAY, false}, {"a", T0 + 14 * DAY, false}},
         4, "FFww"},
        {"monthly -1 keeps every month", "UTC", {.monthly = -1},
         {{"a", T0 + 4 * DAY, false}, {"a", T0 + 19 * DAY, false}, {"a", T0 + 33 * DAY, false}}, 3, "Fmm"},
        {"yearly 2 and last 1 together: the newest counts for both", "UTC", {.last = 1, .yearly = 2},
         {{"a", T0 - 400 * DAY, false}, {"a", T0 - DAY, false}, {"a", T0, false}, {"a", T0 + DAY, false}}, 4,
         "FyFL"},
        {"hourly 2", "UTC", {.hourly = 2},
         {{"a", T0 + 60, false}, {"a", T0 + 3600, false}, {"a", T0 + 3700, false}, {"a", T0 + 7300, false}}, 4,
         "FFhh"},
        {"buckets in UTC: one day", "UTC", {.daily = 2},
         {{"a", T0 + DAY + 4 * 3600, false}, {"a", T0 + DAY + 6 * 3600, false}}, 2, "Fd"},
        {"buckets in local time: two days", "EST5", {.daily = 2},
         {{"a", T0 + DAY + 4 * 3600, false}, {"a", T0 + DAY + 6 * 3600, false}}, 2, "dd"},
};

static char letter(BvKeepRule r)
{
        return "FPLWhdwmy"[r];
}

TEST(table)
{
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                const PolicyCase *k = &cases[c];
                BvKeepRule rules[8];
                char got[9] = {0};
                int kept = 0;

                setenv("TZ", k->tz, 1);
                tzset();
                ASSERT_OK(kept = bv_policy_apply(&k->policy, k->snaps, k->n, rules));
                for (size_t i = 0; i < k->n; i++)
                        got[i] = letter(rules[i]);
                if (strcmp(got, k->expect) != 0) {
                        fprintf(stderr, "case '%s': got %s, expected %s\n", k->what, got, k->expect);
                        abort();
                }
                int want = 0;
                for (size_t i = 0; i < k->n; i++)
                        want += k->expect[i] != 'F';
                ASSERT_EQ(kept, want);
        }
}

TEST(no_rule)
{
        BvPolicy none = {0};
        BvPolicySnap s = {"a", T0, false};
        BvKeepRule r;
        ASSERT_ERROR(bv_policy_apply(&none, &s, 1, &r), EINVAL);
        ASSERT_STREQ(bv_keep_rule_name(BV_KEEP_DAILY), "daily");
        ASSERT_STREQ(bv_keep_rule_name(BV_KEEP_NONE), "forget");
}

int main(void)
{
        RUN(table);
        RUN(no_rule);
        return 0;
}
