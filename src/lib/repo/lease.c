/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "hex.h"
#include "json-util.h"
#include "lock.h"
#include "macro.h"
#include "random.h"
#include "repo-internal.h"

#define LEASE_NAME_LEN 22 /* 16 hex digits + ".lease" */
#define LEASE_MAX 4096

struct BvLease {
        int dirfd; /* leases/ */
        int fd;    /* holds the flock */
        char name[LEASE_NAME_LEN + 1];
        uint64_t epoch; /* gc/epoch as read before the lease became visible */
};

static const char *const kind_names[] = { [BV_LEASE_READ] = "read", [BV_LEASE_WRITE] = "write",
                                          [BV_LEASE_EXPORT] = "export" };

static int subdir(int repo_dirfd, const char *name, bool create)
{
        if (create && mkdirat(repo_dirfd, name, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        return bv_open_dir_beneath(repo_dirfd, name);
}

int bv_gc_epoch_read(int repo_dirfd, uint64_t *ret)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r = bv_read_file_beneath(repo_dirfd, "gc/epoch", 64, (void **)&data, &len);
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

int bv_gc_epoch_write(int repo_dirfd, uint64_t epoch)
{
        _cleanup_close_ int dirfd = subdir(repo_dirfd, "gc", true);
        char buf[32];
        if (dirfd < 0)
                return dirfd;
        int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", epoch);
        return bv_write_file_durable(dirfd, "epoch", buf, (size_t)n, true);
}

/* {"kind":K,"epoch":E,"pid":P,"snapshot":""} and a newline (json-c writes it). */
static int lease_json(BvLeaseKind kind, uint64_t epoch, char **ret)
{
        _cleanup_(json_object_putp) struct json_object *o = BV_JSON_OBJECT(
                { "kind", json_object_new_string(kind_names[kind]) },
                { "epoch", json_object_new_uint64(epoch) },
                { "pid", json_object_new_int(getpid()) },
                { "snapshot", json_object_new_string("") });
        const char *text = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;
        if (!text || asprintf(ret, "%s\n", text) < 0)
                return -ENOMEM;
        return 0;
}

static int lease_link(BvLease *l, int fd, const char *tmpname, BvLeaseKind kind, uint64_t epoch)
{
        _cleanup_free_ char *json = NULL;
        uint8_t raw[8];
        int r = lease_json(kind, epoch, &json);
        if (r < 0)
                return r;
        r = bv_write_all(fd, json, strlen(json));
        if (r < 0)
                return r;
        r = bv_random_bytes(raw, sizeof(raw));
        if (r < 0)
                return r;
        bv_hex_encode(raw, sizeof(raw), l->name);
        strcpy(l->name + 16, ".lease");
        return bv_tmpfile_link(l->dirfd, fd, tmpname, l->name, false);
}

int bv_lease_take(int repo_dirfd, BvLeaseKind kind, BvLease **ret, uint64_t *ret_epoch,
                  BvRepoProblem *ret_problem)
{
        _cleanup_free_ BvLease *l = calloc(1, sizeof(*l));
        _cleanup_close_ int fd = -EBADF;
        char tmpname[64];
        uint64_t epoch;
        int r;

        if (!l)
                return -ENOMEM;
        if ((unsigned)kind >= ELEMENTSOF(kind_names))
                return -EINVAL;
        r = bv_gc_epoch_read(repo_dirfd, &epoch);
        if (r < 0)
                return bv_repo_problem_note(ret_problem, repo_dirfd, "gc/epoch", false, r);
        l->dirfd = subdir(repo_dirfd, "leases", true);
        if (l->dirfd < 0)
                return bv_repo_problem_note(ret_problem, repo_dirfd, "leases", true, l->dirfd);
        r = bv_tmpfile_open_prefix(l->dirfd, ".tmp-", &fd, tmpname);
        if (r >= 0 && flock(fd, LOCK_EX) < 0) /* nobody else can see it yet: never blocks */
                r = negative_errno();
        if (r >= 0)
                r = lease_link(l, fd, tmpname, kind, epoch);
        if (r < 0) {
                if (fd >= 0)
                        bv_tmpfile_discard(l->dirfd, tmpname);
                safe_close(l->dirfd);
                return bv_repo_problem_note(ret_problem, repo_dirfd, "leases", true, r);
        }
        l->fd = TAKE_FD(fd);
        l->epoch = epoch;
        if (ret_epoch)
                *ret_epoch = epoch;
        *ret = TAKE_PTR(l);
        return 0;
}

uint64_t bv_lease_epoch(const BvLease *l)
{
        return l->epoch;
}

void bv_lease_release(BvLease *l)
{
        if (!l)
                return;
        /* unlink while still locked: gc never sees it unlocked and half gone */
        (void)unlinkat(l->dirfd, l->name, 0);
        safe_close(l->fd);
        safe_close(l->dirfd);
        free(l);
}

static bool lease_name_valid(const char *n)
{
        if (strlen(n) != LEASE_NAME_LEN || strcmp(n + 16, ".lease") != 0)
                return false;
        return bv_hex_is_lower_prefix(n, 16);
}

/* The epoch of a lease held by a live holder (0 when it does not parse). */
static uint64_t lease_epoch(int fd)
{
        char buf[LEASE_MAX];
        ssize_t n = bv_pread_all(fd, buf, sizeof(buf) - 1, 0);
        _cleanup_(json_object_putp) struct json_object *o = NULL;
        uint64_t epoch = 0;
        if (n <= 0 || bv_json_parse_object(buf, (size_t)n, 2, &o) < 0 || bv_json_get_u64(o, "epoch", &epoch) < 0)
                return 0;
        return epoch;
}

/* 1: live (epoch in *ret_epoch), 0: reaped or gone. */
static int lease_test(int dirfd, const char *name, bool reap, uint64_t *ret_epoch)
{
        _cleanup_close_ int fd = bv_open_file_beneath(dirfd, name, O_RDONLY);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return negative_errno();
                *ret_epoch = lease_epoch(fd);
                return 1;
        }
        /* its holder ended: nobody can lock it again once it is unlinked */
        if (reap && unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

int bv_leases_scan(int repo_dirfd, bool reap, uint64_t *ret_min_epoch, uint64_t *ret_max_epoch, size_t *ret_live,
                   BvRepoProblem *ret_problem)
{
        _cleanup_close_ int dirfd = subdir(repo_dirfd, "leases", reap);
        uint64_t min = UINT64_MAX, max = 0;
        size_t live = 0;
        int reaped = 0, r = 0;

        if (dirfd == -ENOENT && !reap) { /* nothing to look at, and a dry run creates nothing */
                *ret_min_epoch = min;
                if (ret_max_epoch)
                        *ret_max_epoch = max;
                *ret_live = 0;
                return 0;
        }
        if (dirfd < 0)
                return bv_repo_problem_note(ret_problem, repo_dirfd, "leases", true, dirfd);
        DIR *d = NULL;
        r = bv_opendir_beneath(dirfd, ".", &d); /* the leases/ just opened, not a second lookup */
        if (r < 0)
                return bv_repo_problem_note(ret_problem, repo_dirfd, "leases", true, r);
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                uint64_t e;
                if (!lease_name_valid(de->d_name))
                        continue;
                r = lease_test(dirfd, de->d_name, reap, &e);
                if (r > 0) {
                        live++;
                        min = MIN(min, e);
                        max = MAX(max, e);
                } else if (r == 0)
                        reaped++;
                else {
                        char path[sizeof("leases/") + LEASE_NAME_LEN];
                        snprintf(path, sizeof(path), "leases/%s", de->d_name);
                        r = bv_repo_problem_note(ret_problem, repo_dirfd, path, false, r);
                }
        }
        if (r >= 0 && errno)
                r = bv_repo_problem_note(ret_problem, repo_dirfd, "leases", true, negative_errno());
        closedir(d);
        if (r < 0)
                return r;
        *ret_min_epoch = min;
        if (ret_max_epoch)
                *ret_max_epoch = max;
        *ret_live = live;
        return reaped;
}

/* gc: locks/gc, exclusively. Writers: locks/write, then a lease. Readers: a lease, or where
 * leases/ cannot be written (a read-only mount, no write permission, a full filesystem) the shared
 * locks/gc, which keeps gc out while they read. */
int repo_open_lock(int dirfd, BvOpenFlags flags, BvRepoProblem *problem, int *ret_lock_fd, BvLease **ret_lease)
{
        bool wait = !!(flags & BV_OPEN_WAIT);
        uint64_t epoch;
        int rr;

        if (flags & (BV_OPEN_WRITE | BV_OPEN_GC)) {
                BvLockKind kind = (flags & BV_OPEN_GC) ? BV_LOCK_GC : BV_LOCK_WRITE;
                rr = bv_lock_take(dirfd, kind, wait);
                if (rr < 0)
                        bv_repo_problem_note(problem, dirfd, kind == BV_LOCK_GC ? "locks/gc" : "locks/write", false, rr);
                if (rr == -EBUSY && problem)
                        (void)bv_lock_holder(dirfd, kind, problem->holder, sizeof(problem->holder));
                if (rr < 0)
                        return rr;
                *ret_lock_fd = rr;
        }
        /* a damaged gc/epoch stops gc and writers, naming it; a reader keeps gc out instead */
        rr = bv_gc_epoch_read(dirfd, &epoch);
        if (rr < 0 && rr != -ENOMEM && (flags & (BV_OPEN_WRITE | BV_OPEN_GC)))
                return bv_repo_problem_note(problem, dirfd, "gc/epoch", false, rr);
        if (flags & BV_OPEN_GC)
                return 0;
        bool epoch_bad = rr < 0 && rr != -ENOMEM;
        rr = rr < 0 ? rr : bv_lease_take(dirfd,
                           (flags & BV_OPEN_WRITE) ? BV_LEASE_WRITE
                           : (flags & BV_OPEN_EXPORT) ? BV_LEASE_EXPORT
                                                      : BV_LEASE_READ,
                           ret_lease, NULL, problem);
        /* a full filesystem too: a restore from a full backup disk must still read */
        if ((epoch_bad || rr == -EROFS || rr == -EACCES || rr == -EPERM || rr == -ENOSPC || rr == -EDQUOT) &&
            !(flags & BV_OPEN_WRITE)) {
                if (problem)
                        *problem = (BvRepoProblem){}; /* not a failure: the reader reads under locks/gc */
                rr = bv_lock_take(dirfd, BV_LOCK_READ, wait);
                if (rr < 0)
                        return bv_repo_problem_note(problem, dirfd, "locks/gc", false, rr);
                *ret_lock_fd = rr;
                return 0;
        }
        return rr < 0 ? rr : 0; /* bv_lease_take named gc/epoch or leases/ */
}
