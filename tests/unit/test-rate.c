/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The progress arithmetic on a synthetic clock: the rate follows the last window, not the
 * average since the start; skipped bytes (holes, reused extents) are neither rate nor work. */
#include "bvtest.h"
#include "rate.h"

#define MS 1000000ull
#define S 1000000000ull
#define MIB (1024ull * 1024)

TEST(no_rate_before_two_samples)
{
        BvRate r;
        double bps;
        uint64_t eta;

        bv_rate_init(&r);
        ASSERT_TRUE(!bv_rate_get(&r, &bps));
        bv_rate_add(&r, 1 * S, 0);
        ASSERT_TRUE(!bv_rate_get(&r, &bps));
        /* 50 ms is too short a span to tell a rate */
        bv_rate_add(&r, 1 * S + 50 * MS, 10 * MIB);
        ASSERT_TRUE(!bv_rate_get(&r, &bps));
        ASSERT_TRUE(!bv_rate_eta(&r, 100, &eta));
        /* nothing left: 0 s even without a rate */
        ASSERT_TRUE(bv_rate_eta(&r, 0, &eta));
        ASSERT_EQ(eta, 0);
}

/* 100 MiB/s for 60 s, then 10 MiB/s: the rate (and ETA) follow within one window, where the
 * average since the start would still say ~85 MiB/s. */
TEST(window_follows_a_slowdown)
{
        BvRate r;
        uint64_t t = 0, work = 0, eta;
        double bps;

        bv_rate_init(&r);
        for (int i = 0; i <= 240; i++, t += 250 * MS, work += 25 * MIB)
                bv_rate_add(&r, t, work);
        ASSERT_TRUE(bv_rate_get(&r, &bps));
        ASSERT_EQ((uint64_t)(bps / MIB + 0.5), 100);
        for (int i = 0; i < 40; i++) {
                t += 250 * MS;
                work += (10 * MIB) / 4;
                bv_rate_add(&r, t, work);
        }
        ASSERT_TRUE(bv_rate_get(&r, &bps));
        ASSERT_EQ((uint64_t)(bps / MIB + 0.5), 10);
        /* 600 MiB left at 10 MiB/s */
        ASSERT_TRUE(bv_rate_eta(&r, 600 * MIB, &eta));
        ASSERT_EQ(eta, 60);
}

/* Work counts, coverage does not: a hole of 1 GiB passed in one step adds nothing to the rate,
 * and the work left is the work total less the work done, whatever part of the image is left. */
TEST(holes_are_not_work)
{
        BvRate r;
        uint64_t eta;
        double bps;

        bv_rate_init(&r);
        bv_rate_add(&r, 0, 0);
        bv_rate_add(&r, 1 * S, 20 * MIB);
        bv_rate_add(&r, 2 * S, 40 * MIB); /* the image went from 40 MiB to 1064 MiB covered here */
        ASSERT_TRUE(bv_rate_get(&r, &bps));
        ASSERT_EQ((uint64_t)(bps / MIB + 0.5), 20);
        /* 2 GiB image, 1064 MiB covered, 100 MiB of data in all, 40 MiB read: 60 MiB left, 3 s */
        uint64_t left = bv_rate_work_left(1064 * MIB, 2048 * MIB, 40 * MIB, 100 * MIB);
        ASSERT_EQ(left, 60 * MIB);
        ASSERT_TRUE(bv_rate_eta(&r, left, &eta));
        ASSERT_EQ(eta, 3);
        /* work total unknown: what is not covered yet counts */
        ASSERT_EQ(bv_rate_work_left(1064 * MIB, 2048 * MIB, 40 * MIB, UINT64_MAX), 984 * MIB);
        /* a stream: nothing known */
        ASSERT_TRUE(bv_rate_work_left(10, UINT64_MAX, 10, UINT64_MAX) == UINT64_MAX);
        ASSERT_TRUE(!bv_rate_eta(&r, UINT64_MAX, &eta));
        /* more work done than estimated (a file grew): nothing left, not a wrap-around */
        ASSERT_EQ(bv_rate_work_left(0, 100, 120, 100), 0);
}

/* A stall: no work for longer than the window means a rate of 0 and no ETA. */
TEST(stall)
{
        BvRate r;
        uint64_t eta;
        double bps;

        bv_rate_init(&r);
        for (uint64_t t = 0; t <= 10 * S; t += 250 * MS)
                bv_rate_add(&r, t, t / MS * 1024);
        for (uint64_t t = 10 * S + 250 * MS; t <= 20 * S; t += 250 * MS)
                bv_rate_add(&r, t, 10000 * 1024);
        ASSERT_TRUE(bv_rate_get(&r, &bps));
        ASSERT_TRUE(bps == 0);
        ASSERT_TRUE(!bv_rate_eta(&r, 1, &eta));
        /* a clock that goes back is ignored */
        bv_rate_add(&r, 5 * S, 0);
        ASSERT_TRUE(bv_rate_get(&r, &bps));
        ASSERT_TRUE(bps == 0);
}

/* Samples more often than the ring holds: the window shrinks to what the ring keeps but the
 * rate stays right. */
TEST(ring_overflow)
{
        BvRate r;
        double bps;

        bv_rate_init(&r);
        for (uint64_t i = 0; i < 1000; i++)
                bv_rate_add(&r, i * 10 * MS, i * MIB);
        ASSERT_EQ(r.n, BV_RATE_SAMPLES);
        ASSERT_TRUE(bv_rate_get(&r, &bps));
        ASSERT_EQ((uint64_t)(bps / MIB + 0.5), 100);
}

int main(void)
{
        RUN(no_rate_before_two_samples);
        RUN(window_follows_a_slowdown);
        RUN(holes_are_not_work);
        RUN(stall);
        RUN(ring_overflow);
        return 0;
}
