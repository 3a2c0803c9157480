/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gc.h"
#include "macro.h"
#include "prune.h"
#include "remote.h"
#include "run.h"
#include "timeutil.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BvRepo, bv_repo_close)
DEFINE_TRIVIAL_CLEANUP_FUNC(BvCopyDst, bv_copy_dst_close)

int bv_remote_env(const BvConfRemote *rm)
{
        if (rm->endpoint && setenv("AWS_ENDPOINT_URL_S3", rm->endpoint, 1) < 0)
                return -errno;
        if (rm->region && setenv("AWS_REGION", rm->region, 1) < 0)
                return -errno;
        if (!rm->credentials)
                return 0;
        /* the file's [default] profile, and nothing of the environment's keys beside it */
        unsetenv("AWS_ACCESS_KEY_ID"), unsetenv("AWS_SECRET_ACCESS_KEY"), unsetenv("AWS_SESSION_TOKEN");
        unsetenv("AWS_PROFILE");
        return setenv("AWS_SHARED_CREDENTIALS_FILE", rm->credentials, 1) < 0 ? -errno : 0;
}

/* The snapshot ids of src that go to rm: those named after a job that runs on t and names rm. */
static int wanted_snapshots(const BvConfig *c, const BvConfRemote *rm, const BvConfTarget *t, BvRepo *src,
                            const char ***ret, size_t *ret_n)
{
        BvSnapshot *const *list;
        size_t n, k = 0;
        int r = bv_repo_snapshots(src, &list, &n);
        if (r < 0)
                return r;
        const char **ids = calloc(n + 1, sizeof(*ids));
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const BvConfJob *j = list[i]->name ? bv_conf_job_by_name(c, list[i]->name) : NULL;
                if (j && bv_conf_job_wants(j, t->name) && bv_conf_job_copies_to(j, rm->name))
                        ids[k++] = list[i]->id;
        }
        *ret = ids, *ret_n = k;
        return 0;
}

/* The remote's retention at its repository (opened again, for gc, the copy's lease gone): prune by
 * its keep-* (each snapshot name on its own, as a job's), then gc. */
static int prune_remote(const BvConfRemote *rm, const BvConfTarget *t, BvRemoteCopy *rc)
{
        _cleanup_(bv_repo_closep) BvRepo *repo = NULL;
        _cleanup_free_ BvPruneItem *items = NULL;
        BvSecret secret = { .key_file = t->key_file };
        BvGcOptions o = { .max_unused = BV_GC_MAX_UNUSED_DEFAULT };
        BvGcStats st;
        BvPolicy p;
        size_t n = 0;

        bv_target_policy(&rm->keep, &p);
        int r = bv_repo_open(rc->dst, &secret, BV_OPEN_GC | BV_OPEN_WAIT, &repo);
        if (r >= 0)
                r = bv_prune(repo, &p, NULL, false, &items, &n, NULL);
        if (r < 0)
                return rc->step = "prune", r;
        rc->pruned = true, rc->forgotten = (size_t)r, rc->kept = n - (size_t)r;
        r = bv_gc(repo, &o, &st);
        if (r < 0)
                return rc->step = "gc", r;
        rc->packs_deleted = st.packs_deleted, rc->bytes_deleted = st.bytes_deleted;
        return 0;
}

/* The drive's repository (held, read-only) to the remote's. */
static int copy_held(const BvConfig *c, const BvConfRemote *rm, const BvConfTarget *t, const char *repo_path,
                     bool (*cancelled)(void), BvRemoteCopy *rc)
{
        _cleanup_(bv_repo_closep) BvRepo *src = NULL;
        _cleanup_(bv_copy_dst_closep) BvCopyDst *dst = NULL;
        _cleanup_free_ const char **ids = NULL;
        BvSecret secret = { .key_file = t->key_file };
        BvRepoProblem problem = {};

        int r = bv_repo_open(repo_path, &secret, BV_OPEN_READ, &src);
        if (r < 0)
                return rc->step = "open", r;
        BvCopyOptions o = { .limit_upload = rm->limit_upload, .limit_download = rm->limit_download,
                            .cancelled = cancelled };
        if (!rc->all) {
                r = wanted_snapshots(c, rm, t, src, &ids, &rc->n_wanted);
                if (r < 0)
                        return rc->step = "open", r;
                if (rc->n_wanted == 0)
                        return 0; /* none of its jobs has a snapshot on the drive yet */
                o.snapshots = ids, o.n_snapshots = rc->n_wanted;
        }
        o.object_lock_seconds = rm->object_lock; /* COMPLIANCE */
        r = bv_remote_env(rm);
        if (r >= 0 && rm->object_lock) /* a bucket without Object Lock: refused before anything is written */
                r = bv_copy_check_object_lock(rc->dst, problem.message, sizeof(problem.message));
        if (r >= 0)
                r = bv_copy_open_dst(src, rc->dst, NULL, false, &problem, &rc->created, &dst);
        if (r < 0) {
                snprintf(rc->said, sizeof(rc->said), "%s", problem.message[0] ? problem.message : problem.holder);
                return rc->step = "open remote", r;
        }
        r = bv_copy(src, dst, &o, &rc->stats);
        if (r < 0) {
                bv_copy_dst_storage_error(dst, rc->said, sizeof(rc->said));
                if (!rc->said[0])
                        bv_repo_storage_error(src, rc->said, sizeof(rc->said));
                return rc->step = "copy", r;
        }
        bv_copy_dst_close(TAKE_PTR(dst)); /* its lease would hold gc's deletions back */
        return bv_conf_remote_prunes(rm) ? prune_remote(rm, t, rc) : 0;
}

int bv_remote_copy_drive(const BvConfig *c, const BvConfRemote *rm, const BvConfTarget *t, const char *dev,
                         const char *run_dir, bool (*cancelled)(void), BvRemoteCopy *ret)
{
        uint64_t start = bv_now_monotonic_ns();
        BvDriveHold h;

        *ret = (BvRemoteCopy){ .remote = rm, .target = t, .all = bv_conf_target_copies_all(t, rm->name) };
        int r = bv_conf_remote_location(rm, t->name, &ret->dst);
        if (r < 0)
                return ret->result = r;
        r = bv_target_hold_drive(t, dev, run_dir, rm->name, &h);
        if (r < 0)
                ret->step = h.step;
        else
                r = copy_held(c, rm, t, h.repo_path, cancelled, ret);
        const char *step = NULL;
        int q = bv_target_release_drive(&h, &step);
        if (q < 0 && r >= 0)
                r = q, ret->step = step;
        ret->duration_ms = (bv_now_monotonic_ns() - start) / 1000000;
        return ret->result = r;
}

void bv_remote_copy_done(BvRemoteCopy *rc)
{
        free(rc->dst);
        rc->dst = NULL;
}
