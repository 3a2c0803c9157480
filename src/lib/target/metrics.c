/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "metrics.h"
#include "state.h"

const char *bv_metrics_path(const BvConfig *c)
{
        return c->no_metrics ? NULL : c->metrics ? c->metrics : BV_CONF_DEFAULT_METRICS;
}

/* One family of a run's numbers, over every (job, target) pair or every target. */
typedef enum Field { F_LAST_RUN, F_LAST_GOOD, F_STATUS, F_DURATION, F_NEW, F_STORED, F_REPO, F_MAX } Field;

static const struct {
        const char *name, *help;
} fields[F_MAX] = {
        [F_LAST_RUN] = { "last_run_timestamp_seconds", "When the last run ended (unix time)." },
        [F_LAST_GOOD] = { "last_success_timestamp_seconds", "When the last run that succeeded ended (unix time, 0: never)." },
        [F_STATUS] = { "last_run_status", "The last run's result: 0 succeeded, 1 failed." },
        [F_DURATION] = { "last_run_duration_seconds", "How long the last run took." },
        [F_NEW] = { "last_run_new_bytes", "Raw bytes of chunks the last run found new to the repository." },
        [F_STORED] = { "last_run_stored_bytes", "Encoded bytes the last run wrote to packs." },
        [F_REPO] = { "repository_size_bytes", "The bytes of the repository's packs after the last run." },
};

static void print_value(FILE *f, const BvRunState *s, Field k)
{
        switch (k) {
        case F_LAST_RUN:
                fprintf(f, "%llu\n", (unsigned long long)s->last_run);
                break;
        case F_LAST_GOOD:
                fprintf(f, "%llu\n", (unsigned long long)s->last_good);
                break;
        case F_STATUS:
                fprintf(f, "%d\n", s->result < 0);
                break;
        case F_DURATION:
                fprintf(f, "%llu.%03llu\n", (unsigned long long)(s->numbers.duration_ms / 1000),
                        (unsigned long long)(s->numbers.duration_ms % 1000));
                break;
        case F_NEW:
                fprintf(f, "%llu\n", (unsigned long long)s->numbers.bytes_new);
                break;
        case F_STORED:
                fprintf(f, "%llu\n", (unsigned long long)s->numbers.bytes_stored);
                break;
        default:
                fprintf(f, "%llu\n", (unsigned long long)s->numbers.repo_bytes);
                break;
        }
}

static void print_family(FILE *f, const char *prefix, Field k)
{
        fprintf(f, "# HELP blkvault_%s%s %s\n# TYPE blkvault_%s%s gauge\n", prefix, fields[k].name, fields[k].help,
                prefix, fields[k].name);
}

/* A (job, target) or a target (job NULL) that has run, and its state file as read once. */
typedef struct Sample {
        const char *job, *target;
        BvRunState s;
} Sample;

/* Reads the state of (job, target) into *samples if it has run; -ENOMEM only. */
static int add_sample(const char *dir, const char *job, const char *target, Sample *samples, size_t *n)
{
        Sample *x = &samples[*n];
        int r = job ? bv_state_read(dir, job, target, &x->s) : bv_state_read(dir, target, NULL, &x->s);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0; /* never ran there (or a state file status warns of) */
        x->job = job, x->target = target;
        (*n)++;
        return 0;
}

/* The families first to last of the samples, prefixed ("" or "target_"). */
static void render_samples(FILE *f, const char *prefix, Field first, Field last, const Sample *samples, size_t n)
{
        for (Field k = first; k <= last; k++) {
                print_family(f, prefix, k);
                for (size_t i = 0; i < n; i++) {
                        if (samples[i].job)
                                fprintf(f, "blkvault_%s%s{job=\"%s\",target=\"%s\"} ", prefix, fields[k].name,
                                        samples[i].job, samples[i].target);
                        else
                                fprintf(f, "blkvault_%s%s{target=\"%s\"} ", prefix, fields[k].name, samples[i].target);
                        print_value(f, &samples[i].s, k);
                }
        }
}

/* The jobs' families: one sample per (job, target) that has run; then the targets' run families
 * (not the numbers of their jobs). Each state file is read once. */
static int render_runs(FILE *f, const BvConfig *c, const char *dir)
{
        _cleanup_free_ Sample *samples = calloc(c->n_jobs * c->n_targets + c->n_targets + 1, sizeof(*samples));
        size_t n = 0;
        int r = samples ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < c->n_jobs; i++)
                for (size_t t = 0; r >= 0 && t < c->n_targets; t++)
                        if (bv_conf_job_wants(&c->jobs[i], c->targets[t].name))
                                r = add_sample(dir, c->jobs[i].name, c->targets[t].name, samples, &n);
        if (r < 0)
                return r;
        render_samples(f, "", 0, F_MAX - 1, samples, n);
        size_t jobs = n;
        for (size_t t = 0; r >= 0 && t < c->n_targets; t++)
                r = add_sample(dir, NULL, c->targets[t].name, samples, &n);
        if (r >= 0)
                render_samples(f, "target_", F_LAST_RUN, F_DURATION, samples + jobs, n - jobs);
        return r;
}

static int render_alarms(FILE *f, const BvConfig *c, const char *dir, uint64_t now)
{
        fprintf(f, "# HELP blkvault_age_alarm 1 when no drive of the job holds a good backup younger than its "
                   "max-age.\n# TYPE blkvault_age_alarm gauge\n");
        for (size_t i = 0; i < c->n_jobs; i++) {
                BvJobStatus st;
                int r = bv_state_job_status(dir, c, &c->jobs[i], now, &st);
                if (r < 0)
                        return r;
                fprintf(f, "blkvault_age_alarm{job=\"%s\"} %d\n", c->jobs[i].name, st.alarm);
        }
        fprintf(f, "# HELP blkvault_max_age_seconds The job's max-age.\n# TYPE blkvault_max_age_seconds gauge\n");
        for (size_t i = 0; i < c->n_jobs; i++)
                fprintf(f, "blkvault_max_age_seconds{job=\"%s\"} %llu\n", c->jobs[i].name,
                        (unsigned long long)c->jobs[i].max_age);
        fprintf(f, "# HELP blkvault_configuration_mistakes Mistakes in the configuration (their sections are "
                   "skipped).\n# TYPE blkvault_configuration_mistakes gauge\nblkvault_configuration_mistakes %zu\n",
                c->n_errors);
        return 0;
}

int bv_metrics_render(FILE *f, const BvConfig *c, const char *state_dir, uint64_t now)
{
        int r = render_runs(f, c, state_dir);
        if (r >= 0)
                r = render_alarms(f, c, state_dir, now);
        return r;
}

int bv_metrics_write(const char *path, const BvConfig *c, const char *state_dir, uint64_t now)
{
        _cleanup_free_ char *text = NULL, *dir = NULL;
        size_t len = 0;
        const char *slash = strrchr(path, '/');

        if (!slash || !slash[1])
                return -EINVAL;
        if (!(dir = strndup(path, slash == path ? 1 : (size_t)(slash - path))))
                return -ENOMEM;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        int r = bv_metrics_render(f, c, state_dir, now);
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        _cleanup_close_ int fd = -EBADF;
        char tmpname[64];
        r = bv_tmpfile_open(dfd, &fd, tmpname);
        if (r < 0)
                return r;
        /* node-exporter reads it as its own user */
        r = fchmod(fd, 0644) < 0 ? -errno : bv_write_all(fd, text, len);
        if (r < 0) {
                bv_tmpfile_discard(dfd, tmpname);
                return r;
        }
        return bv_tmpfile_link(dfd, fd, tmpname, slash + 1, true);
}
