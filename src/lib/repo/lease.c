/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "lease.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend-s3.h"
#include "hex.h"
#include "random.h"
#include "json-util.h"
#include "lock.h"
#include "macro.h"
#include "repo-internal.h"

#define LEASE_NAME_LEN (BV_LEASE_NAME_SIZE - 1) /* 16 hex digits + ".lease" (bv_lease_name_new) */
#define LEASE_MAX 4096

struct BvLease {
        BvBackendLease *held; /* the backend's lease object, held while the holder lives */
        uint64_t epoch;       /* gc/epoch as read before the lease became visible */
        char *body;           /* what it holds (a gc's own lease is known by it) */
};

static const char *const kind_names[] = { [BV_LEASE_READ] = "read", [BV_LEASE_WRITE] = "write",
                                          [BV_LEASE_EXPORT] = "export", [BV_LEASE_GC] = "gc" };

int bv_gc_epoch_read(BvBackend *b, uint64_t *ret)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r = bv_backend_get(b, BV_KIND_GC_EPOCH, NULL, 64, (void **)&data, &len);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        if (r < 0)
                return r;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(data, &end, 10);
        if (errno || end == data || data[0] == '-' || strcmp(end, "\n") != 0)
                return -EBADMSG;
        *ret = v;
        return 0;
}

int bv_gc_epoch_write(BvBackend *b, uint64_t epoch)
{
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", epoch);
        return bv_backend_put(b, BV_KIND_GC_EPOCH, NULL, buf, (size_t)n, BV_PUT_REPLACE);
}

/* {"kind":K,"epoch":E,"pid":P,"snapshot":""} and a newline (json-c writes it); a gc's lease also
 * has "token", 16 random hex digits: a gc tells its own lease from another machine's by its body. */
static int lease_json(BvLeaseKind kind, uint64_t epoch, char **ret)
{
        uint8_t raw[8] = {};
        char token[2 * sizeof(raw) + 1];
        int r = kind == BV_LEASE_GC ? bv_random_bytes(raw, sizeof(raw)) : 0;
        if (r < 0)
                return r;
        bv_hex_encode(raw, sizeof(raw), token);
        _cleanup_(json_object_putp) struct json_object *o = BV_JSON_OBJECT(
                { "kind", json_object_new_string(kind_names[kind]) },
                { "epoch", json_object_new_uint64(epoch) },
                { "pid", json_object_new_int(getpid()) },
                { "snapshot", json_object_new_string("") },
                { kind == BV_LEASE_GC ? "token" : NULL, kind == BV_LEASE_GC ? json_object_new_string(token) : NULL });
        const char *text = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
        if (!text || asprintf(ret, "%s\n", text) < 0)
                return -ENOMEM;
        return 0;
}

int bv_lease_take(BvBackend *b, BvLeaseKind kind, BvLease **ret, uint64_t *ret_epoch, BvRepoProblem *ret_problem)
{
        uint64_t epoch;
        int r = bv_gc_epoch_read(b, &epoch);
        if (r < 0)
                return bv_repo_problem_note(ret_problem, b, "gc/epoch", false, r);
        r = bv_lease_take_epoch(b, kind, epoch, ret, ret_problem);
        if (r >= 0 && ret_epoch)
                *ret_epoch = epoch;
        return r;
}

int bv_lease_take_epoch(BvBackend *b, BvLeaseKind kind, uint64_t epoch, BvLease **ret, BvRepoProblem *ret_problem)
{
        _cleanup_free_ BvLease *l = calloc(1, sizeof(*l));
        _cleanup_free_ char *json = NULL;
        int r;

        if (!l)
                return -ENOMEM;
        if ((unsigned)kind >= ELEMENTSOF(kind_names))
                return -EINVAL;
        r = lease_json(kind, epoch, &json);
        if (r < 0)
                return r;
        r = bv_backend_lease_take(b, json, strlen(json), &l->held);
        if (r < 0)
                return bv_repo_problem_note(ret_problem, b, "leases", true, r);
        l->epoch = epoch;
        l->body = TAKE_PTR(json);
        *ret = TAKE_PTR(l);
        return 0;
}

uint64_t bv_lease_epoch(const BvLease *l)
{
        return l->epoch;
}

bool bv_lease_fresh(const BvLease *l)
{
        return l && bv_backend_s3_lease_fresh(l->held);
}

void bv_lease_release(BvLease *l)
{
        if (!l)
                return;
        bv_backend_lease_release(l->held);
        free(l->body);
        free(l);
}

static bool lease_name_valid(const char *n)
{
        if (strlen(n) != LEASE_NAME_LEN || strcmp(n + 16, ".lease") != 0)
                return false;
        return bv_hex_is_lower_prefix(n, 16);
}

/* The epoch a live holder's lease carries (0 when it does not parse); *ret_gc: it is a gc's. */
static uint64_t lease_epoch(const char *body, bool *ret_gc)
{
        _cleanup_(json_object_putp) struct json_object *o = NULL;
        struct json_object *kind;
        uint64_t epoch = 0;
        *ret_gc = false;
        if (bv_json_parse_object(body, strlen(body), 2, &o) < 0)
                return 0;
        *ret_gc = json_object_object_get_ex(o, "kind", &kind) && json_object_is_type(kind, json_type_string) &&
                  strcmp(json_object_get_string(kind), kind_names[BV_LEASE_GC]) == 0;
        if (bv_json_get_u64(o, "epoch", &epoch) < 0)
                return 0;
        return epoch;
}

typedef struct Scan {
        BvBackend *b;
        bool reap;
        uint64_t min, max;
        size_t live;
        int reaped;
        const char *own;                         /* the body of this gc's own lease */
        const char *own_name;                    /* a lease not read (the caller's own) */
        size_t gcs;                              /* live gc leases but its own */
        char gc_name[LEASE_NAME_LEN + 1];        /* the last one met */
        char gc_body[160];
        BvRepoProblem *problem;
} Scan;

/* Tests one lease: live (its epoch counted), or ended (reaped) or gone. */
static int scan_one(const BvObjEntry *e, void *userdata)
{
        Scan *s = userdata;
        _cleanup_free_ char *body = NULL;
        char path[sizeof("leases/") + LEASE_NAME_LEN];
        int r;

        if (!lease_name_valid(e->name) || (s->own_name && strcmp(e->name, s->own_name) == 0))
                return 0;
        r = bv_backend_lease_alive(s->b, e->name, s->reap, LEASE_MAX - 1, &body);
        if (r < 0) {
                snprintf(path, sizeof(path), "leases/%s", e->name);
                return bv_repo_problem_note(s->problem, s->b, path, false, r);
        }
        if (r == 0) {
                s->reaped++;
                return 0;
        }
        bool gc;
        uint64_t epoch = lease_epoch(body, &gc);
        if (gc) {
                if (s->own && strcmp(body, s->own) == 0)
                        return 0;
                s->gcs++;
                snprintf(s->gc_name, sizeof(s->gc_name), "%s", e->name);
                snprintf(s->gc_body, sizeof(s->gc_body), "%s", body);
                return 0;
        }
        s->live++;
        s->min = MIN(s->min, epoch);
        s->max = MAX(s->max, epoch);
        return 0;
}

int bv_leases_scan(BvBackend *b, bool reap, uint64_t *ret_min_epoch, uint64_t *ret_max_epoch, size_t *ret_live,
                   BvRepoProblem *ret_problem)
{
        Scan s = { .b = b, .reap = reap, .min = UINT64_MAX, .problem = ret_problem };
        int r;

        if (ret_problem)
                *ret_problem = (BvRepoProblem){};
        r = bv_backend_list(b, BV_KIND_LEASE, scan_one, &s);
        if (r < 0)
                /* a lease at fault was named by scan_one; otherwise leases/ itself is */
                return ret_problem && ret_problem->path[0] ? r
                                                           : bv_repo_problem_note(ret_problem, b, "leases", true, r);
        *ret_min_epoch = s.min;
        if (ret_max_epoch)
                *ret_max_epoch = s.max;
        *ret_live = s.live;
        return s.reaped;
}

int bv_gc_leases_live(BvBackend *b, const BvLease *own, size_t *ret)
{
        Scan s = { .b = b, .min = UINT64_MAX, .own_name = own && own->held ? own->held->name : NULL };
        int r = bv_backend_list(b, BV_KIND_LEASE, scan_one, &s);
        if (r < 0)
                return r;
        *ret = s.gcs;
        return 0;
}

int bv_gc_lease_take(BvBackend *b, BvLease **ret, BvRepoProblem *ret_problem)
{
        BvLease *l = NULL;
        Scan s = { .b = b, .min = UINT64_MAX, .problem = ret_problem };
        int r = bv_lease_take(b, BV_LEASE_GC, &l, NULL, ret_problem);
        if (r < 0)
                return r;
        s.own = l->body;
        r = bv_backend_list(b, BV_KIND_LEASE, scan_one, &s);
        if (r < 0 && !(ret_problem && ret_problem->path[0]))
                bv_repo_problem_note(ret_problem, b, "leases", true, r);
        if (r >= 0 && s.gcs > 0) {
                char path[sizeof("leases/") + LEASE_NAME_LEN];
                snprintf(path, sizeof(path), "leases/%s", s.gc_name);
                r = bv_repo_problem_note(ret_problem, b, path, false, -EBUSY);
                if (ret_problem) {
                        s.gc_body[strcspn(s.gc_body, "\n")] = '\0';
                        snprintf(ret_problem->holder, sizeof(ret_problem->holder), "its lease '%s' is live: %s", path,
                                 s.gc_body);
                }
        }
        if (r < 0) {
                bv_lease_release(l);
                return r;
        }
        *ret = l;
        return 0;
}

/* gc: locks/gc, exclusively. Writers: locks/write, then a lease. Readers: a lease, or where
 * leases/ cannot be written (a read-only mount, no write permission, a full filesystem) the shared
 * locks/gc, which keeps gc out while they read. */
int repo_open_lock(BvBackend *b, BvOpenFlags flags, BvRepoProblem *problem, int *ret_lock_fd, BvLease **ret_lease)
{
        bool wait = !!(flags & BV_OPEN_WAIT);
        uint64_t epoch;
        int rr;

        if (flags & (BV_OPEN_WRITE | BV_OPEN_GC)) {
                BvLockKind kind = (flags & BV_OPEN_GC) ? BV_LOCK_GC : BV_LOCK_WRITE;
                rr = bv_backend_lock(b, kind, wait);
                /* an index compaction holds locks/gc for a moment: a gc waits for it */
                char who[256];
                if (rr == -EBUSY && kind == BV_LOCK_GC && bv_backend_lock_holder(b, kind, who, sizeof(who)) == 1)
                        rr = bv_backend_lock(b, kind, true);
                if (rr < 0)
                        bv_repo_problem_note(problem, b, kind == BV_LOCK_GC ? "locks/gc" : "locks/write", false, rr);
                if (rr == -EBUSY && problem) /* who holds it, as it recorded itself */
                        (void)bv_backend_lock_holder(b, kind, problem->holder, sizeof(problem->holder));
                if (rr < 0)
                        return rr;
                *ret_lock_fd = rr;
        }
        /* a damaged gc/epoch stops gc and writers, naming it; a reader keeps gc out instead */
        rr = bv_gc_epoch_read(b, &epoch);
        if (rr < 0 && rr != -ENOMEM && (flags & (BV_OPEN_WRITE | BV_OPEN_GC)))
                return bv_repo_problem_note(problem, b, "gc/epoch", false, rr);
        if (flags & BV_OPEN_GC) /* locks/gc holds on this machine only: a remote one takes a gc lease */
                return bv_backend_is_local(b) ? 0 : bv_gc_lease_take(b, ret_lease, problem);
        bool epoch_bad = rr < 0 && rr != -ENOMEM;
        /* the epoch just read: read again it would only cost a request (it may have grown since,
         * and an older epoch in the lease only makes gc wait longer) */
        rr = rr < 0 ? rr : bv_lease_take_epoch(b,
                           (flags & BV_OPEN_WRITE) ? BV_LEASE_WRITE
                           : (flags & BV_OPEN_EXPORT) ? BV_LEASE_EXPORT
                                                      : BV_LEASE_READ,
                           epoch, ret_lease, problem);
        /* a full filesystem too: a restore from a full backup disk must still read */
        if ((epoch_bad || rr == -EROFS || rr == -EACCES || rr == -EPERM || rr == -ENOSPC || rr == -EDQUOT) &&
            !(flags & BV_OPEN_WRITE)) {
                if (problem)
                        *problem = (BvRepoProblem){}; /* not a failure: the reader reads under locks/gc */
                rr = bv_backend_lock(b, BV_LOCK_READ, wait);
                if (rr < 0)
                        return bv_repo_problem_note(problem, b, "locks/gc", false, rr);
                *ret_lock_fd = rr;
                return 0;
        }
        return rr < 0 ? rr : 0; /* bv_lease_take named gc/epoch or leases/ */
}
