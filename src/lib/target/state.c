/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "state.h"

const char *bv_state_dir(const char *override)
{
        const char *e = getenv(BV_STATE_ENV);
        return override ? override : e && *e ? e : BV_STATE_DIR;
}

/* "job-JOB@TARGET", "target-TARGET", or with kind "copy" "copy-REMOTE@TARGET". */
static int state_name_kind(const char *kind, const char *job, const char *target, char *buf, size_t size)
{
        int n = target ? snprintf(buf, size, "%s-%s@%s", kind, job, target) : snprintf(buf, size, "target-%s", job);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}


/* error=N as bv_state_record writes it (an errno, 0 for none). What it cannot have written (a
 * number beyond any errno, not a number) keeps what result= said: negating INT_MIN, as abs() did,
 * is undefined. */
static int parse_error(const char *v, int result)
{
        char *end;
        long e;

        errno = 0;
        e = strtol(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0' || e <= -4096 || e >= 4096)
                return result;
        return -(int)labs(e);
}

/* The index of disk in s->disks, or where it goes (n_disks, when there is room), or -1. */
static int disk_slot(const BvRunDisk *v, size_t n, const char *disk)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].disk, disk) == 0)
                        return (int)i;
        return n < BV_STATE_DISKS_MAX ? (int)n : -1;
}

/* "TARGET WHEN SNAPSHOT incremental|full NAME"; a line that does not parse is ignored. */
static void parse_disk(char *v, BvRunState *s)
{
        char *save = NULL, *disk = strtok_r(v, " ", &save), *when = strtok_r(NULL, " ", &save);
        char *snap = strtok_r(NULL, " ", &save), *how = strtok_r(NULL, " ", &save), *name = strtok_r(NULL, "", &save);
        int i = disk && name ? disk_slot(s->disks, s->n_disks, disk) : -1;

        if (i < 0 || strlen(disk) >= sizeof(s->disks[0].disk) || strlen(snap) >= sizeof(s->disks[0].snapshot))
                return;
        BvRunDisk *d = &s->disks[i];
        snprintf(d->disk, sizeof(d->disk), "%s", disk);
        d->when = strtoull(when, NULL, 10);
        snprintf(d->snapshot, sizeof(d->snapshot), "%s", snap);
        d->incremental = strcmp(how, "incremental") == 0;
        snprintf(d->name, sizeof(d->name), "%s", name);
        s->n_disks += (size_t)i == s->n_disks;
}

static void parse_state(char *text, BvRunState *s)
{
        for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *v = strchr(l, '=');
                if (!v)
                        continue;
                *v++ = '\0';
                if (strcmp(l, "last-run") == 0)
                        s->last_run = strtoull(v, NULL, 10);
                else if (strcmp(l, "last-good") == 0)
                        s->last_good = strtoull(v, NULL, 10);
                else if (strcmp(l, "error") == 0)
                        s->result = parse_error(v, s->result);
                else if (strcmp(l, "status") == 0)
                        s->status = atoi(v);
                else if (strcmp(l, "step") == 0)
                        snprintf(s->step, sizeof(s->step), "%s", v);
                else if (strcmp(l, "duration-ms") == 0)
                        s->numbers.duration_ms = strtoull(v, NULL, 10);
                else if (strcmp(l, "bytes-new") == 0)
                        s->numbers.bytes_new = strtoull(v, NULL, 10);
                else if (strcmp(l, "bytes-stored") == 0)
                        s->numbers.bytes_stored = strtoull(v, NULL, 10);
                else if (strcmp(l, "repo-bytes") == 0)
                        s->numbers.repo_bytes = strtoull(v, NULL, 10);
                else if (strcmp(l, "snapshot") == 0)
                        snprintf(s->snapshot, sizeof(s->snapshot), "%s", v);
                else if (strcmp(l, "disk") == 0)
                        parse_disk(v, s);
                else if (strcmp(l, "result") == 0 && strcmp(v, "failed") == 0 && s->result == 0)
                        s->result = -EIO;
        }
}

static int state_read(const char *dir, const char *kind, const char *job, const char *target, BvRunState *ret)
{
        _cleanup_free_ void *data = NULL;
        char name[2 * BV_CONF_NAME_MAX + 16];
        size_t len;

        int r = state_name_kind(kind, job, target, name, sizeof(name));
        if (r < 0)
                return r;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        r = bv_read_file(dfd, name, 64 * 1024, &data, &len);
        if (r < 0)
                return r;
        BvRunState s = {};
        parse_state(data, &s);
        *ret = s;
        return 0;
}

int bv_state_read(const char *dir, const char *job, const char *target, BvRunState *ret)
{
        return state_read(dir, "job", job, target, ret);
}

int bv_state_read_copy(const char *dir, const char *remote, const char *target, BvRunState *ret)
{
        return state_read(dir, "copy", remote, target, ret);
}

/* The disk lines of old's disks with disks (n) merged in, at text + *len. */
static int disk_lines(BvRunState *old, const BvRunDisk *disks, size_t n, char *text, size_t size, int *len)
{
        for (size_t i = 0; i < n; i++) {
                int k = disk_slot(old->disks, old->n_disks, disks[i].disk);
                if (k < 0)
                        continue;
                old->disks[k] = disks[i];
                old->n_disks += (size_t)k == old->n_disks;
        }
        for (size_t i = 0; i < old->n_disks; i++) {
                const BvRunDisk *d = &old->disks[i];
                int m = snprintf(text + *len, size - (size_t)*len, "disk=%s %llu %s %s %s\n", d->disk,
                                 (unsigned long long)d->when, d->snapshot, d->incremental ? "incremental" : "full",
                                 d->name);
                if (m < 0 || (size_t)m >= size - (size_t)*len)
                        return -ENAMETOOLONG;
                *len += m;
        }
        return 0;
}

static int state_record(const char *dir, const char *kind, const char *job, const char *target, uint64_t when,
                        int result, const char *step, int status, const char *snapshot, const BvRunNumbers *numbers,
                        const BvRunDisk *disks, size_t n_disks)
{
        char name[2 * BV_CONF_NAME_MAX + 16], text[640 + BV_STATE_DISKS_MAX * 400];
        BvRunNumbers none = {};
        const BvRunNumbers *m = numbers ? numbers : &none;
        BvRunState old = {};

        int r = state_name_kind(kind, job, target, name, sizeof(name));
        if (r < 0)
                return r;
        r = state_read(dir, kind, job, target, &old);
        if (r == -ENOMEM)
                return r;
        if (r < 0) /* none, or one that does not read (a FIFO, too large): replaced, or no run records again */
                old = (BvRunState){};
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        uint64_t good = result == 0 ? when : old.last_good;
        const char *snap = result == 0 && snapshot ? snapshot : old.snapshot;
        int n = snprintf(text, sizeof(text),
                         "last-run=%llu\nresult=%s\nstep=%s\nerror=%d\nstatus=%d\nlast-good=%llu\nduration-ms=%llu\n"
                         "bytes-new=%llu\nbytes-stored=%llu\nrepo-bytes=%llu\n%s%s%s",
                         (unsigned long long)when, result == 0 ? "ok" : "failed", result == 0 ? "" : step ?: "",
                         -result, result == 0 ? 0 : status, (unsigned long long)good,
                         (unsigned long long)m->duration_ms, (unsigned long long)m->bytes_new,
                         (unsigned long long)m->bytes_stored, (unsigned long long)m->repo_bytes,
                         *snap ? "snapshot=" : "", snap, *snap ? "\n" : "");
        if (n < 0 || (size_t)n >= sizeof(text))
                return -ENAMETOOLONG;
        r = disk_lines(&old, disks, n_disks, text, sizeof(text), &n);
        if (r < 0)
                return r;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        return bv_write_file_durable(dfd, name, text, (size_t)n, true);
}

int bv_state_record(const char *dir, const char *job, const char *target, uint64_t when, int result,
                    const char *step, int status, const char *snapshot, const BvRunNumbers *numbers,
                    const BvRunDisk *disks, size_t n_disks)
{
        return state_record(dir, "job", job, target, when, result, step, status, snapshot, numbers, disks, n_disks);
}

int bv_state_record_copy(const char *dir, const char *remote, const char *target, uint64_t when, int result,
                         const char *step, const BvRunNumbers *numbers)
{
        return state_record(dir, "copy", remote, target, when, result, step, 0, NULL, numbers, NULL, 0);
}

/* Each disk of s (of target) whose backup is newer than st's of it. */
static void merge_disks(BvJobStatus *st, const BvRunState *s, const char *target)
{
        for (size_t i = 0; i < s->n_disks; i++) {
                int k = disk_slot(st->disks, st->n_disks, s->disks[i].disk);
                if (k < 0 || ((size_t)k < st->n_disks && st->disks[k].when >= s->disks[i].when))
                        continue;
                st->disks[k] = s->disks[i], st->disk_targets[k] = target;
                st->n_disks += (size_t)k == st->n_disks;
        }
}

/* The newest run and good run over the targets a job runs on (kind "job") or a remote copies
 * from ("copy"), and the alarm when no good one is younger than max_age. */
static int state_status(const char *dir, const BvConfig *c, const BvConfJob *j, const BvConfRemote *rm,
                        uint64_t now, BvJobStatus *ret)
{
        BvJobStatus st = {};
        const char *kind = j ? "job" : "copy", *name = j ? j->name : rm->name;
        uint64_t max_age = j ? j->max_age : rm->max_age;
        for (size_t i = 0; i < c->n_targets; i++) {
                const BvConfTarget *t = &c->targets[i];
                BvRunState s;
                if (j ? !bv_conf_job_wants(j, t->name) : !bv_conf_target_copies_to(c, t, rm->name))
                        continue;
                int r = state_read(dir, kind, name, t->name, &s);
                if (r == -ENOENT)
                        continue;
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        if (!st.bad_target) {
                                st.bad_target = t->name, st.bad_error = r;
                                (void)state_name_kind(kind, name, t->name, st.bad_file, sizeof(st.bad_file));
                        }
                        continue;
                }
                if (s.last_run > st.last.last_run)
                        st.last = s, st.last_target = t->name;
                if (s.last_good > st.last_good)
                        st.last_good = s.last_good, st.good_target = t->name;
                merge_disks(&st, &s, t->name);
        }
        /* a good backup dated over a day ahead was recorded under a clock set ahead: it must not
         * silence the alarm until that date */
        st.alarm = st.last_good == 0 || (now > st.last_good && now - st.last_good > max_age) ||
                   (st.last_good > now && st.last_good - now > BV_STATE_FUTURE_SLACK);
        *ret = st;
        return 0;
}

int bv_state_job_status(const char *dir, const BvConfig *c, const BvConfJob *j, uint64_t now, BvJobStatus *ret)
{
        return state_status(dir, c, j, NULL, now, ret);
}

int bv_state_remote_status(const char *dir, const BvConfig *c, const BvConfRemote *rm, uint64_t now,
                           BvJobStatus *ret)
{
        return state_status(dir, c, NULL, rm, now, ret);
}
