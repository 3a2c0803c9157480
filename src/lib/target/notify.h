/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the [global] notify command was last told, per subject, so that it is told once per change
 * of state and not on every run or timer tick: a job on a target ("job-JOB@TARGET"), a target's
 * own run ("target-TARGET") and a job's age alarm ("alarm-JOB"), each in a file
 * STATE/notified-SUBJECT of lines key=value (when, state=failed|ok, event, summary), replaced
 * durably. A subject never notified counts as ok: its first failure is told, a first success is
 * not.
 */

#include <stdbool.h>
#include <stdint.h>

#include "conf.h"

#define BV_NOTIFY_SUBJECT_MAX (2 * BV_CONF_NAME_MAX + 16)

typedef struct BvNotified {
        uint64_t when;          /* unix seconds; 0: never */
        bool failed;            /* the state told: a failure or an alarm */
        char event[24];         /* failure, recovery, alarm, alarm-cleared */
        char summary[512];
} BvNotified;

/* The subject's last notification: -ENOENT when there was none. */
int bv_notify_read(const char *dir, const char *subject, BvNotified *ret);
/* Records n as the subject's last notification. */
int bv_notify_record(const char *dir, const char *subject, const BvNotified *n);
/* The newest notification of any subject in dir: -ENOENT when there is none. */
int bv_notify_latest(const char *dir, char subject[BV_NOTIFY_SUBJECT_MAX], BvNotified *ret);
