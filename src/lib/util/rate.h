/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The arithmetic of a progress line, without a clock of its own (the caller passes the time, so
 * a test drives it with a synthetic one): the rate over a sliding window of the last
 * BV_RATE_WINDOW_NS (not the average since the start, which lags behind a rate that changes),
 * and an ETA that counts only work, the bytes that must still be read: holes, zero ranges and
 * extents reused from a parent are passed over at no cost and neither raise the rate nor the
 * time left.
 */

#include <stdbool.h>
#include <stdint.h>

#define BV_RATE_WINDOW_NS (5ull * 1000000000ull)
#define BV_RATE_SAMPLES 64u

typedef struct BvRate {
        uint64_t t[BV_RATE_SAMPLES];    /* sample times (ns, any monotonic origin) */
        uint64_t work[BV_RATE_SAMPLES]; /* work done by then (bytes, non-decreasing) */
        unsigned head, n;               /* the newest sample is at head; n samples kept */
} BvRate;

void bv_rate_init(BvRate *r);
/* Records that work_done bytes of work were done by now_ns. A sample older than the last is
 * ignored; samples that fell out of the window are dropped (one older sample is kept, so the
 * window is always spanned once it has been). */
void bv_rate_add(BvRate *r, uint64_t now_ns, uint64_t work_done);
/* Bytes of work per second over the window; false until two samples at least 100 ms apart. */
bool bv_rate_get(const BvRate *r, double *ret_bps);

/* The work still to do: work_total - work_done when work_total is known (not UINT64_MAX),
 * else the part of the image not yet covered (total - done, all of it counted as work), or
 * UINT64_MAX when that is unknown too (a stream). */
uint64_t bv_rate_work_left(uint64_t done, uint64_t total, uint64_t work_done, uint64_t work_total);
/* Seconds until work_left is done at the window's rate: false when the rate is unknown or zero
 * with work left (0 with nothing left). */
bool bv_rate_eta(const BvRate *r, uint64_t work_left, uint64_t *ret_seconds);
