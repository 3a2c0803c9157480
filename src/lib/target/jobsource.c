/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drive.h"
#include "hooks.h"
#include "jobsource.h"
#include "macro.h"
#include "process.h"

static int cancelled;
static pid_t command_pid; /* the command being read, for bv_job_cancel to end */

void bv_job_cancel(void)
{
        __atomic_store_n(&cancelled, 1, __ATOMIC_SEQ_CST);
        pid_t pid = __atomic_load_n(&command_pid, __ATOMIC_SEQ_CST);
        if (pid > 0)
                kill(-pid, SIGTERM); /* the command's group: its pipe ends, the read under way returns */
}

bool bv_job_cancelled(void)
{
        return __atomic_load_n(&cancelled, __ATOMIC_SEQ_CST) != 0;
}

struct BvJobSource {
        BvSource *inner, *outer;
        pid_t pid;              /* the command, until reaped */
        int status;             /* its exit status once reaped */
        char *snapshot;         /* VG/LV of the snapshot to remove */
};

static int reap(BvJobSource *js)
{
        if (js->pid <= 0)
                return 0;
        int r = bv_wait_exit(js->pid);
        if (r < 0)
                return r;
        js->pid = 0;
        __atomic_store_n(&command_pid, 0, __ATOMIC_SEQ_CST);
        js->status = r;
        return 0;
}

static int js_next(void *impl, BvExtent *ret)
{
        BvJobSource *js = impl;
        if (bv_job_cancelled())
                return -ECANCELED;
        int r = bv_source_next(js->inner, ret);
        if (bv_job_cancelled())
                return -ECANCELED;
        if (r == 0 && js->pid > 0) {
                /* the command's end: the image is good only if it exited with 0 */
                r = reap(js);
                if (r >= 0 && js->status != 0)
                        r = -ECHILD;
        }
        return r;
}

static int js_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        BvJobSource *js = impl;
        return bv_job_cancelled() ? -ECANCELED : bv_source_read_at(js->inner, buf, len, offset);
}

static uint64_t js_size(void *impl)
{
        return bv_source_size(((BvJobSource *)impl)->inner);
}

static bool js_uring(void *impl)
{
        return bv_source_uses_uring(((BvJobSource *)impl)->inner);
}

static bool js_direct(void *impl)
{
        return bv_source_uses_direct(((BvJobSource *)impl)->inner);
}

static int js_identity(void *impl, BvSourceIdentity *ret)
{
        return bv_source_identity(((BvJobSource *)impl)->inner, ret);
}

static void js_read_stats(void *impl, BvSourceReadStats *ret)
{
        bv_source_read_stats(((BvJobSource *)impl)->inner, ret);
}

static void js_free(void *impl)
{
        /* js itself belongs to bv_job_source_close */
}

static const BvSourceOps js_ops = {
        .next = js_next,        .read_at = js_read_at, .size = js_size,
        .uses_uring = js_uring, .uses_direct = js_direct, .identity = js_identity,
        .read_stats = js_read_stats, .free = js_free,
};

/* lvs: the volume group, name and segment type of the logical volume at path. */
static int lvm_lookup(const char *path, char vg[128], char lv[128], char type[32], int *fail_status, char *out,
                      size_t size)
{
        char *argv[] = { (char *)"lvs", (char *)"--noheadings", (char *)"-o", (char *)"vg_name,lv_name,segtype",
                         (char *)path, NULL };
        int r = bv_target_run(argv, out, size);
        if (r < 0)
                return r;
        if (r != 0 || sscanf(out, " %127s %127s %31s", vg, lv, type) != 3)
                return *fail_status = r, -ECHILD;
        return 0;
}

static int lvm_remove(const char *vg_lv, int *fail_status, char *out, size_t size)
{
        char *argv[] = { (char *)"lvremove", (char *)"--yes", (char *)vg_lv, NULL };
        int r = bv_target_run(argv, out, size);
        if (r > 0)
                return *fail_status = r, -ECHILD;
        return r;
}

/* A new snapshot of the logical volume at path, named blkvault-snap-JOB (one left by a run that
 * died is removed first): its VG/LV in *ret_name and device path in *ret_path. Thick volumes get
 * 20% of the origin's size for the changes written while it is read (an overflow invalidates
 * the snapshot, whose reads then fail: the backup fails, it is never inconsistent). */
static int lvm_snapshot(const char *path, const char *job, char **ret_name, char **ret_path, int *fail_status,
                        char *out, size_t size)
{
        char vg[128], lv[128], type[32];
        _cleanup_free_ char *name = NULL, *snap = NULL, *dev = NULL;
        struct stat st;

        int r = lvm_lookup(path, vg, lv, type, fail_status, out, size);
        if (r < 0)
                return r;
        if (asprintf(&snap, "blkvault-snap-%s", job) < 0 || asprintf(&name, "%s/%s", vg, snap) < 0 ||
            asprintf(&dev, "/dev/%s/%s", vg, snap) < 0)
                return -ENOMEM;
        if (stat(dev, &st) >= 0 && (r = lvm_remove(name, fail_status, out, size)) < 0)
                return r;
        bool thin = strcmp(type, "thin") == 0;
        char target[300];
        snprintf(target, sizeof(target), "%s/%s", vg, lv);
        char *thick_argv[] = { (char *)"lvcreate", (char *)"--snapshot", (char *)"--name", snap, (char *)"--extents",
                               (char *)"20%ORIGIN", target, NULL };
        char *thin_argv[] = { (char *)"lvcreate", (char *)"--snapshot", (char *)"--name", snap,
                              (char *)"--setactivationskip", (char *)"n", (char *)"--activate", (char *)"y", target, NULL };
        r = bv_target_run(thin ? thin_argv : thick_argv, out, size);
        if (r > 0)
                return *fail_status = r, -ECHILD;
        if (r < 0)
                return r;
        *ret_name = TAKE_PTR(name);
        *ret_path = TAKE_PTR(dev);
        return 0;
}

static int open_inner(BvJobSource *js, const BvConfJob *j, const char *const vars[], int *fail_status, char *out,
                      size_t size)
{
        const char *cmd = bv_conf_job_command(j);
        _cleanup_free_ char *snap_path = NULL;
        char fdpath[64];

        if (cmd) {
                _cleanup_close_ int fd = -EBADF;
                pid_t pid = bv_hook_spawn_piped(cmd, vars, &fd);
                if (pid < 0)
                        return pid;
                js->pid = pid;
                __atomic_store_n(&command_pid, pid, __ATOMIC_SEQ_CST);
                snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
                return bv_source_open(fdpath, NULL, &js->inner);
        }
        if (!j->snapshot)
                return bv_source_open(j->source, NULL, &js->inner);
        int r = lvm_snapshot(j->source, j->name, &js->snapshot, &snap_path, fail_status, out, size);
        if (r < 0)
                return r;
        return bv_source_open(snap_path, NULL, &js->inner);
}

int bv_job_source_open(const BvConfJob *j, const char *const vars[], BvJobSource **ret, int *fail_status,
                       char *out, size_t size)
{
        BvJobSource *js = calloc(1, sizeof(*js));
        int status = 0;
        if (!js)
                return -ENOMEM;
        if (out && size)
                out[0] = '\0';
        int r = open_inner(js, j, vars, fail_status, out, size);
        if (r >= 0) {
                const char *cmd = bv_conf_job_command(j);
                r = bv_source_new(&js_ops, js, bv_source_kind(js->inner), cmd ? cmd : j->source, &js->outer);
        }
        if (r < 0) {
                bv_job_source_close(js, &status, NULL, 0);
                return r;
        }
        *ret = js;
        return 0;
}

BvSource *bv_job_source(BvJobSource *js)
{
        return js->outer;
}

int bv_job_source_close(BvJobSource *js, int *fail_status, char *out, size_t size)
{
        char sink[1024];
        int r = 0;

        if (!js)
                return 0;
        bv_source_free(js->outer);
        bv_source_free(js->inner);
        if (js->pid > 0) {
                kill(-js->pid, SIGTERM);
                r = reap(js);
        } else if (js->status != 0)
                r = -ECHILD, *fail_status = js->status;
        if (js->snapshot) {
                int q = out ? lvm_remove(js->snapshot, fail_status, out, size) :
                              lvm_remove(js->snapshot, fail_status, sink, sizeof(sink));
                if (q < 0 && r >= 0)
                        r = q;
        }
        free(js->snapshot);
        free(js);
        return r;
}
