/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

uint64_t bv_now_realtime_ns(void);
uint64_t bv_now_monotonic_ns(void);

/* RFC 3339 UTC with seconds, e.g. "2026-11-21T18:50:00Z" (21 bytes with NUL). */
void bv_format_time_utc(uint64_t unix_seconds, char out[32]);
