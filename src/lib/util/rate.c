/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "rate.h"

#define MIN_SPAN_NS (100ull * 1000000ull)

static unsigned slot(const BvRate *r, unsigned age)
{
        return (r->head + BV_RATE_SAMPLES - age) % BV_RATE_SAMPLES;
}

void bv_rate_init(BvRate *r)
{
        memset(r, 0, sizeof(*r));
}

void bv_rate_add(BvRate *r, uint64_t now_ns, uint64_t work_done)
{
        if (r->n > 0 && now_ns < r->t[r->head])
                return;
        if (r->n > 0) {
                r->head = (r->head + 1) % BV_RATE_SAMPLES;
                if (r->n < BV_RATE_SAMPLES)
                        r->n++;
        } else
                r->n = 1;
        r->t[r->head] = now_ns;
        r->work[r->head] = work_done;
        /* drop the oldest while the next oldest still reaches back over the whole window */
        while (r->n > 2 && now_ns - r->t[slot(r, r->n - 2)] >= BV_RATE_WINDOW_NS)
                r->n--;
}

bool bv_rate_get(const BvRate *r, double *ret_bps)
{
        if (r->n < 2)
                return false;
        unsigned old = slot(r, r->n - 1);
        uint64_t span = r->t[r->head] - r->t[old];
        if (span < MIN_SPAN_NS)
                return false;
        uint64_t work = r->work[r->head] >= r->work[old] ? r->work[r->head] - r->work[old] : 0;
        *ret_bps = (double)work * 1e9 / (double)span;
        return true;
}

uint64_t bv_rate_work_left(uint64_t done, uint64_t total, uint64_t work_done, uint64_t work_total)
{
        if (work_total != UINT64_MAX)
                return work_total > work_done ? work_total - work_done : 0;
        if (total != UINT64_MAX)
                return total > done ? total - done : 0;
        return UINT64_MAX;
}

bool bv_rate_eta(const BvRate *r, uint64_t work_left, uint64_t *ret_seconds)
{
        double bps;

        if (work_left == 0) {
                *ret_seconds = 0;
                return true;
        }
        if (work_left == UINT64_MAX || !bv_rate_get(r, &bps) || bps < 1)
                return false;
        double s = (double)work_left / bps;
        *ret_seconds = s > 1e9 ? 1000000000ull : (uint64_t)(s + 0.5);
        return true;
}
