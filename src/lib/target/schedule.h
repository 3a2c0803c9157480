/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Schedules in systemd's calendar syntax (systemd.time(7)). libsystemd does not export its
 * calendar parser, so a schedule is checked the way systemd will read it, by
 * `systemd-analyze calendar`.
 */

/* 0 when spec is a valid calendar expression, with the next time it elapses (systemd-analyze's
 * "Next elapse" text, or NULL when it never elapses again) in *ret_next (may be NULL); -EINVAL
 * when systemd rejects it, with its message in *ret_error (may be NULL); -ENOENT without
 * systemd-analyze. */
int bv_schedule_check(const char *spec, char **ret_next, char **ret_error);
