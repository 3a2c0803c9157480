/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <time.h>

#include "timeutil.h"

static uint64_t now(clockid_t clk)
{
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bv_now_realtime_ns(void)
{
        return now(CLOCK_REALTIME);
}

uint64_t bv_now_monotonic_ns(void)
{
        return now(CLOCK_MONOTONIC);
}

void bv_format_time_utc(uint64_t unix_seconds, char out[32])
{
        time_t t = (time_t)unix_seconds;
        struct tm tm;

        /* A time gmtime cannot represent (or whose year needs more digits) reads as such. */
        if (!gmtime_r(&t, &tm) || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(out, 32, "(time %llu)", (unsigned long long)unix_seconds);
}
