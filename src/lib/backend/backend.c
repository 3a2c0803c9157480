/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The backend seam: object kinds and their keys, opening a location, and the wrappers that
 * dispatch to an implementation's ops (backend.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend-s3.h"
#include "backend.h"
#include "hex.h"
#include "macro.h"
#include "random.h"

static const struct {
        const char *folder; /* "" for the top */
        const char *what;
        bool single;   /* one object of its kind, named by its folder alone */
        bool fan_out;  /* names are "xx/<name>" (packs) */
} kinds[BV_KIND_COUNT] = {
        [BV_KIND_CONFIG] = { "", "config", true, false },
        [BV_KIND_KEY] = { "keys", "key slot", false, false },
        [BV_KIND_PACK] = { "packs", "pack", false, true },
        [BV_KIND_INDEX] = { "index", "index segment", false, false },
        [BV_KIND_SNAPSHOT] = { "snapshots", "snapshot record", false, false },
        [BV_KIND_LEASE] = { "leases", "lease", false, false },
        [BV_KIND_CONDEMNED] = { "gc", "condemned list", false, false },
        [BV_KIND_GC_EPOCH] = { "gc", "gc epoch", true, false },
        [BV_KIND_VERIFY_STATE] = { "", "verify state", true, false },
        [BV_KIND_LOCK] = { "locks", "lock", false, false },
        [BV_KIND_TMP] = { "tmp", "temporary file", false, false },
};

/* The single objects' own names, as their keys end. */
static const char *single_name(BvObjKind kind)
{
        switch (kind) {
        case BV_KIND_CONFIG:
                return "config";
        case BV_KIND_GC_EPOCH:
                return "epoch";
        case BV_KIND_VERIFY_STATE:
                return "verify-state";
        default:
                return NULL;
        }
}

const char *bv_obj_kind_folder(BvObjKind kind)
{
        return (unsigned)kind < BV_KIND_COUNT ? kinds[kind].folder : NULL;
}

const char *bv_obj_kind_name(BvObjKind kind)
{
        return (unsigned)kind < BV_KIND_COUNT ? kinds[kind].what : "object";
}

/* A name component: not empty, not "." or "..", no '/'. */
static bool component_ok(const char *s, size_t n)
{
        if (n == 0 || memchr(s, '/', n))
                return false;
        return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

static bool name_ok(BvObjKind kind, const char *name)
{
        size_t n = strlen(name);
        const char *slash;

        if (n > BV_BACKEND_NAME_MAX)
                return false;
        if (!kinds[kind].fan_out)
                return component_ok(name, n);
        slash = strchr(name, '/'); /* "xx/<name>": two components */
        return slash && component_ok(name, (size_t)(slash - name)) &&
               component_ok(slash + 1, n - (size_t)(slash - name) - 1);
}

int bv_obj_key(BvObjKind kind, const char *name, char ret[BV_BACKEND_KEY_MAX])
{
        const char *folder;
        int n;

        if ((unsigned)kind >= BV_KIND_COUNT)
                return -EINVAL;
        folder = kinds[kind].folder;
        if (kinds[kind].single) {
                if (name && *name)
                        return -EINVAL;
                n = snprintf(ret, BV_BACKEND_KEY_MAX, "%s%s%s", folder, *folder ? "/" : "", single_name(kind));
        } else {
                if (!name || !name_ok(kind, name))
                        return -EINVAL;
                n = snprintf(ret, BV_BACKEND_KEY_MAX, "%s/%s", folder, name);
        }
        return n < 0 || n >= BV_BACKEND_KEY_MAX ? -EINVAL : 0;
}

int bv_backend_open(const char *location, bool create, BvBackend **ret)
{
        if (!location || !*location || !ret)
                return -EINVAL;
        /* s3://BUCKET[/PREFIX]: the S3 backend (backend-s3.h) */
        if (strncmp(location, "s3://", 5) == 0)
                return bv_backend_s3_open(location, create, ret, NULL, 0);
        return bv_backend_local_open(location, create, ret);
}

int bv_backend_open_read(const char *location, int64_t at, BvBackend **ret, char *errbuf, size_t errlen)
{
        if (errbuf && errlen > 0)
                errbuf[0] = '\0';
        if (!location || !*location || !ret || at < 0)
                return -EINVAL;
        if (strncmp(location, "s3://", 5) == 0)
                return at ? bv_backend_s3_open_at(location, at, ret, errbuf, errlen)
                          : bv_backend_s3_open(location, false, ret, errbuf, errlen);
        return at ? -EOPNOTSUPP : bv_backend_local_open(location, false, ret);
}

void bv_backend_close(BvBackend *b)
{
        if (b)
                b->ops->close(b);
}

bool bv_backend_is_local(const BvBackend *b)
{
        return b && strcmp(b->ops->scheme, "file") == 0;
}

const char *bv_backend_location(const BvBackend *b)
{
        return b->location;
}

#define DISPATCH(b, op, ...) ((b) && (b)->ops->op ? (b)->ops->op(__VA_ARGS__) : -EOPNOTSUPP)

int bv_backend_put(BvBackend *b, BvObjKind kind, const char *name, const void *data, size_t len, BvPutFlags flags)
{
        return DISPATCH(b, put, b, kind, name, data, len, flags);
}

int bv_backend_get(BvBackend *b, BvObjKind kind, const char *name, size_t max, void **ret, size_t *ret_len)
{
        return DISPATCH(b, get, b, kind, name, max, ret, ret_len);
}

int bv_backend_stat(BvBackend *b, BvObjKind kind, const char *name, BvObjEntry *ret)
{
        return DISPATCH(b, stat, b, kind, name, ret);
}

int bv_backend_exists(BvBackend *b, BvObjKind kind, const char *name)
{
        BvObjEntry e;
        int r = bv_backend_stat(b, kind, name, &e);

        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : 1;
}

int bv_backend_remove(BvBackend *b, BvObjKind kind, const char *name)
{
        return DISPATCH(b, remove, b, kind, name);
}

int bv_backend_list(BvBackend *b, BvObjKind kind, bv_obj_list_fn fn, void *userdata)
{
        return DISPATCH(b, list, b, kind, fn, userdata);
}

int bv_obj_reader_open(BvBackend *b, BvObjKind kind, const char *name, BvObjReader **ret)
{
        return DISPATCH(b, reader_open, b, kind, name, ret);
}

ssize_t bv_obj_reader_pread(BvObjReader *r, void *buf, size_t len, uint64_t offset)
{
        return r->backend->ops->reader_pread(r, buf, len, offset);
}

uint64_t bv_obj_reader_size(BvObjReader *r)
{
        return r->backend->ops->reader_size(r);
}

void bv_obj_reader_advise(BvObjReader *r, uint64_t offset, uint64_t len)
{
        if (r->backend->ops->reader_advise)
                r->backend->ops->reader_advise(r, offset, len);
}

int bv_obj_reader_fd(BvObjReader *r)
{
        return DISPATCH(r->backend, reader_fd, r);
}

void bv_obj_reader_close(BvObjReader *r)
{
        if (r)
                r->backend->ops->reader_close(r);
}

int bv_obj_writer_open(BvBackend *b, BvObjKind kind, BvObjWriter **ret)
{
        return DISPATCH(b, writer_open, b, kind, ret);
}

int bv_obj_writer_fd(BvObjWriter *w)
{
        return DISPATCH(w->backend, writer_fd, w);
}

int bv_obj_writer_commit(BvObjWriter *w, const char *name, BvPutFlags flags)
{
        return DISPATCH(w->backend, writer_commit, w, name, flags);
}

void bv_obj_writer_abort(BvObjWriter *w)
{
        if (w)
                w->backend->ops->writer_abort(w);
}

int bv_backend_lock(BvBackend *b, BvLockKind kind, bool wait)
{
        return DISPATCH(b, lock, b, kind, wait);
}

int bv_backend_lock_holder(BvBackend *b, BvLockKind kind, char *buf, size_t size)
{
        return DISPATCH(b, lock_holder, b, kind, buf, size);
}

int bv_backend_lease_take(BvBackend *b, const void *body, size_t len, BvBackendLease **ret)
{
        return DISPATCH(b, lease_take, b, body, len, ret);
}

int bv_lease_name_new(char ret[BV_LEASE_NAME_SIZE])
{
        uint8_t raw[8];
        int r = bv_random_bytes(raw, sizeof(raw));

        if (r < 0)
                return r;
        bv_hex_encode(raw, sizeof(raw), ret);
        strcpy(ret + 2 * sizeof(raw), ".lease");
        return 0;
}

void bv_backend_lease_release(BvBackendLease *l)
{
        if (l)
                l->backend->ops->lease_release(l);
}

int bv_backend_lease_alive(BvBackend *b, const char *name, bool reap, size_t max, char **ret_body)
{
        return DISPATCH(b, lease_alive, b, name, reap, max, ret_body);
}

int bv_backend_culprit(BvBackend *b, const char *key, bool want_dir, mode_t *ret_mode)
{
        if (b && !b->ops->culprit)
                return 0; /* nothing beyond the key to blame */
        return DISPATCH(b, culprit, b, key, want_dir, ret_mode);
}
