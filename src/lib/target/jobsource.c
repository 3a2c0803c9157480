/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drive.h"
#include "hooks.h"
#include "jobsource.h"
#include "lvmsnap.h"
#include "macro.h"
#include "process.h"
#include "used-source.h"

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
        BvLvmSnap *snapshot;    /* snapshot = yes */
        bool used_only;         /* used-only = yes: what its map said, and why it was read whole */
        BvFsUsedMap used;
        char used_why[256];
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

/* A thin volume's snapshot reads its delta: the changed-block ops of the source under it. */
static const char *js_changed_map(void *impl)
{
        return bv_source_changed_map(((BvJobSource *)impl)->inner);
}

static const char *js_parent_map(void *impl)
{
        return bv_source_parent_map(((BvJobSource *)impl)->inner);
}

static BvWholeRead *js_whole_read(void *impl)
{
        return bv_source_whole_read(((BvJobSource *)impl)->inner);
}

static const char *js_image_format(void *impl)
{
        return bv_source_image_format(((BvJobSource *)impl)->inner);
}

static void js_free(void *impl)
{
        /* js itself belongs to bv_job_source_close */
}

static const BvSourceOps js_ops = {
        .next = js_next,        .read_at = js_read_at, .size = js_size,
        .uses_uring = js_uring, .uses_direct = js_direct, .identity = js_identity,
        .read_stats = js_read_stats, .changed_map = js_changed_map, .parent_map = js_parent_map,
        .whole_read = js_whole_read, .image_format = js_image_format, .free = js_free,
};

static int open_inner(BvJobSource *js, const BvConfJob *j, const char *target, const char *const vars[],
                      int *fail_status, char *out, size_t size)
{
        const char *cmd = bv_conf_job_command(j);
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
                return bv_source_open(j->source,
                                      &(BvSourceOptions){ .as_file = j->as_file, .image_format = j->image_format,
                                                          .error_detail = out, .error_detail_size = size },
                                      &js->inner);
        return bv_lvm_snap_open(j->source, j->name, target, NULL, &js->snapshot, &js->inner, fail_status, out, size);
}

int bv_job_source_open(const BvConfJob *j, const char *target, const char *const vars[], BvJobSource **ret,
                       int *fail_status, char *out, size_t size)
{
        BvJobSource *js = calloc(1, sizeof(*js));
        int status = 0;
        if (!js)
                return -ENOMEM;
        if (out && size)
                out[0] = '\0';
        int r = open_inner(js, j, target, vars, fail_status, out, size);
        if (r >= 0 && j->used_only && !bv_conf_job_command(j)) {
                js->used_only = true;
                r = bv_fs_used_open(js->inner, js->snapshot != NULL, &js->used, &js->inner, js->used_why,
                                    sizeof(js->used_why));
        }
        if (r >= 0) {
                const char *cmd = bv_conf_job_command(j);
                r = bv_source_new(&js_ops, js, bv_source_kind(js->inner), cmd ? cmd : j->source, &js->outer);
        }
        if (r < 0) {
                bv_job_source_close(js, false, &status, NULL, 0);
                return r;
        }
        *ret = js;
        return 0;
}

BvSource *bv_job_source(BvJobSource *js)
{
        return js->outer;
}

bool bv_job_source_thin(const BvJobSource *js)
{
        return js->snapshot && bv_lvm_snap_thin(js->snapshot);
}

const char *bv_job_source_reason(const BvJobSource *js)
{
        return js->snapshot ? bv_lvm_snap_reason(js->snapshot) : "";
}

const BvFsUsedMap *bv_job_source_used(const BvJobSource *js, const char **ret_why)
{
        *ret_why = js->used_why;
        return js->used_only ? &js->used : NULL;
}

int bv_job_source_close(BvJobSource *js, bool published, int *fail_status, char *out, size_t size)
{
        int r = 0;

        if (!js)
                return 0;
        bv_source_free(js->outer);
        bv_source_free(js->inner);
        bv_fs_used_map_done(&js->used);
        if (js->pid > 0) {
                kill(-js->pid, SIGTERM);
                r = reap(js);
        } else if (js->status != 0)
                r = -ECHILD, *fail_status = js->status;
        int q = bv_lvm_snap_close(js->snapshot, published, fail_status, out, size);
        if (q < 0 && r >= 0)
                r = q;
        free(js);
        return r;
}
