/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The progress line of long commands and the status line of short waits (the key derivation,
 * nbdkit's start), on stderr when it is a terminal and -q was not given. The arithmetic is
 * rate.h's: a rate over the last seconds and an ETA of the work (bytes read or written) left. */
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"
#include "run.h"
#include "timeutil.h"

#define REDRAW_NS (200ull * 1000000ull)

static bool status_enabled(void)
{
        return !is_quiet() && isatty(STDERR_FILENO);
}

void progress_init(Progress *p, const char *verb, bool quiet)
{
        *p = (Progress){ .enabled = !quiet && status_enabled(), .verb = verb };
        bv_rate_init(&p->rate);
        bv_rate_add(&p->rate, 0, 0); /* the start: nothing done at elapsed 0 */
}

/* "1:05", "2:03:07", "--:--" */
static const char *format_eta(bool known, uint64_t s, char buf[32])
{
        if (!known)
                snprintf(buf, 32, "--:--");
        else if (s >= 3600)
                snprintf(buf, 32, "%llu:%02u:%02u", (unsigned long long)(s / 3600), (unsigned)(s / 60 % 60),
                         (unsigned)(s % 60));
        else
                snprintf(buf, 32, "%u:%02u", (unsigned)(s / 60), (unsigned)(s % 60));
        return buf;
}

/* "backup 300.0 MiB / 2.0 GiB (15%) of 10.0 GiB image, 150.3 MiB/s, ETA 0:11": the work done
 * and its total (the image's part when the image holds more than the work), rate and ETA. */
void progress_update(const BvProgress *bp, void *userdata)
{
        Progress *p = userdata;
        char a[32], b[32], c[32], rate[32], eta[32];
        double bps;
        uint64_t secs = 0;

        if (!p->enabled)
                return;
        bv_rate_add(&p->rate, bp->elapsed_ns, bp->work_done);
        bool last = bp->total != UINT64_MAX && bp->done >= bp->total;
        if (p->shown && !last && bp->elapsed_ns - p->drawn_ns < REDRAW_NS)
                return;
        p->shown = true;
        p->drawn_ns = bp->elapsed_ns;
        if (bv_rate_get(&p->rate, &bps))
                snprintf(rate, sizeof(rate), "%s/s", format_bytes((uint64_t)bps, a));
        else
                snprintf(rate, sizeof(rate), "--/s");
        uint64_t left = bv_rate_work_left(bp->done, bp->total, bp->work_done, bp->work_total);
        if (bp->total == UINT64_MAX) {
                fprintf(stderr, "\r\033[K%s %s, %s", p->verb, format_bytes(bp->done, a), rate);
                fflush(stderr);
                return;
        }
        bool by_work = bp->work_total != UINT64_MAX;
        uint64_t done = by_work ? bp->work_done : bp->done, total = by_work ? bp->work_total : bp->total;
        unsigned pct = total ? (unsigned)(100.0 * (double)MIN(done, total) / (double)total) : 100;
        if (last)
                pct = 100;
        bool eta_known = bv_rate_eta(&p->rate, last ? 0 : left, &secs);
        format_eta(eta_known, secs, eta);
        fprintf(stderr, "\r\033[K%s %s / %s (%u%%)", p->verb, format_bytes(MIN(done, total), a),
                format_bytes(total, b), pct);
        if (by_work && bp->work_total != bp->total)
                fprintf(stderr, " of %s image", format_bytes(bp->total, c));
        fprintf(stderr, ", %s, ETA %s", rate, eta);
        fflush(stderr);
}

void progress_done(Progress *p)
{
        if (p->enabled && p->shown) {
                fprintf(stderr, "\r\033[K");
                fflush(stderr);
        }
}

static void run_progress_update(const BvConfJob *job, const char *target, const BvProgress *bp, void *userdata)
{
        RunProgress *rp = userdata;
        if (rp->job != job) { /* the next job: its own line */
                progress_done(&rp->p);
                snprintf(rp->verb, sizeof(rp->verb), "backup of job %s to %s", job->name, target);
                progress_init(&rp->p, rp->verb, false);
                rp->job = job;
        }
        progress_update(bp, &rp->p);
}

/* Another run holds the run lock: said once, whether stderr is a terminal or the journal. */
static void run_progress_waiting(const char *target, const char *holder, int pid, void *userdata)
{
        if (holder)
                log_info("target %s: waiting for the run of target %s (pid %d) to finish", target, holder, pid);
        else
                log_info("target %s: waiting for another run of a drive to finish", target);
}

/* A remote's copy holds the drives: the run stops it rather than wait on the network. */
static void run_progress_stopping_copy(const char *target, const char *holder, const char *remote, int pid,
                                       void *userdata)
{
        log_info("target %s: stopping the copy of target %s to %s (pid %d): a backup does not wait on the network; "
                 "the copy continues after this run", target, holder, remote, pid);
}

void run_progress_init(RunProgress *rp, BvRunProgress *ret)
{
        *rp = (RunProgress){};
        progress_init(&rp->p, "", false);
        *ret = (BvRunProgress){ .fn = run_progress_update, .waiting = run_progress_waiting,
                                .stopping_copy = run_progress_stopping_copy, .userdata = rp };
}

void run_progress_done(RunProgress *rp)
{
        progress_done(&rp->p);
}

bool status_begin(const char *text)
{
        if (!status_enabled())
                return false;
        fprintf(stderr, "\r\033[K%s", text);
        fflush(stderr);
        return true;
}

void status_end(bool shown)
{
        if (!shown)
                return;
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
}
