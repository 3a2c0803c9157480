/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the operator hears of without looking: the [global] notify command, once per change of a
 * job's, a target's or an age alarm's state (notify.h keeps what it was told), and the
 * Prometheus textfile, written again after every run and age check (metrics.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hooks.h"
#include "metrics.h"
#include "notify.h"
#include "timeutil.h"

void notify_change(const BvConfig *c, const char *state_dir, const char *subject, bool failed, bool alarm,
                   const char *job, const char *target, const char *summary)
{
        _cleanup_free_ char *ve = NULL, *vs = NULL, *vj = NULL, *vt = NULL, *vm = NULL, *vr = NULL;
        BvNotified last = {}, now = { .failed = failed };

        if (!c->notify)
                return;
        int r = bv_notify_read(state_dir, subject, &last);
        if (r < 0 && r != -ENOENT)
                log_warning("cannot read what was notified of %s in '%s': %s, ignoring", subject, state_dir,
                            strerror(-r));
        if (last.failed == failed)
                return; /* told already (or a first success: nothing to tell) */
        snprintf(now.event, sizeof(now.event), "%s", alarm ? (failed ? "alarm" : "alarm-cleared") :
                                                     failed ? "failure" : "recovery");
        snprintf(now.summary, sizeof(now.summary), "%s", summary);
        now.when = bv_now_realtime_ns() / 1000000000ull;
        if (asprintf(&ve, "BLKVAULT_EVENT=%s", now.event) < 0 || asprintf(&vs, "BLKVAULT_SUBJECT=%s", subject) < 0 ||
            asprintf(&vm, "BLKVAULT_SUMMARY=%s", summary) < 0 ||
            asprintf(&vr, "BLKVAULT_RESULT=%s", failed ? "failed" : "ok") < 0 ||
            (job && asprintf(&vj, "BLKVAULT_JOB=%s", job) < 0) || (target && asprintf(&vt, "BLKVAULT_TARGET=%s", target) < 0)) {
                log_warning("cannot run the notify command: %s", strerror(ENOMEM));
                return;
        }
        const char *vars[7] = { ve, vs, vm, vr }, **v = vars + 4;
        if (vj)
                *v++ = vj;
        if (vt)
                *v++ = vt;
        fflush(stdout);
        r = bv_hook_run(c->notify, vars);
        if (r != 0) { /* not recorded: told again next time */
                if (r > 0)
                        log_warning("the notify command (%s of %s) exited with status %d", now.event, subject, r);
                else
                        log_warning("cannot run the notify command (%s of %s): %s", now.event, subject, strerror(-r));
                return;
        }
        r = bv_notify_record(state_dir, subject, &now);
        if (r < 0)
                log_warning("cannot record the notification of %s in '%s': %s", subject, state_dir, strerror(-r));
}

void write_metrics(const BvConfig *c, const char *state_dir)
{
        const char *path = bv_metrics_path(c);
        if (!path)
                return;
        int r = bv_metrics_write(path, c, state_dir, bv_now_realtime_ns() / 1000000000ull);
        if (r == -ENOENT && !c->metrics)
                return; /* the default, and no node-exporter's directory: nobody reads metrics here */
        if (r < 0)
                log_warning("cannot write the metrics '%s': %s", path, strerror(-r));
}
