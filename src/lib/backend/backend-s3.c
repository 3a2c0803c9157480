/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The S3 backend: backend.h's ops over the S3 client (s3.h). What each op does on S3 is in
 * backend-s3.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend-s3-cache.h"
#include "backend-s3-pit.h"
#include "backend-s3.h"
#include "fileio.h"
#include "macro.h"
#include "s3-internal.h"
#include "s3.h"
#include "s3-window.h"

typedef struct S3Backend {
        BvBackend base;
        bv_s3 *s3;
        char *bucket, *prefix;
        int lock_dirfd; /* opened on the first lock */
        pthread_mutex_t lock_mutex;
        int64_t retain_s; /* Object Lock on every put: retention from now, 0 none */
        bv_s3_lock_mode lock_mode;
        /* opened as at a point in time: read-only, every key resolved to its version then */
        bool pit;
        int64_t at;
        S3PitEntry *pit_v; /* sorted by key */
        size_t n_pit;
        S3Windows win; /* what readers read as streams, over all objects (s3-window.h) */
} S3Backend;

typedef struct S3Reader {
        BvObjReader base;
        char key[BV_BACKEND_KEY_MAX];
        const char *version_id; /* the point in time's, or NULL */
        char etag[80]; /* names the cached copy */
        uint64_t size;
        int fd; /* the whole object, once reader_fd asked for it */
        char name[BV_BACKEND_KEY_MAX + 96]; /* among the windows: key and ETag */
        S3Stream stream;
} S3Reader;

typedef struct S3Writer {
        BvObjWriter base;
        BvObjKind kind;
        int fd;
} S3Writer;

typedef struct S3Lease {
        BvBackendLease base;
        char name[BV_LEASE_NAME_SIZE];
        char key[BV_BACKEND_KEY_MAX];
        void *body;
        size_t len;
        pthread_t thread;
        pthread_mutex_t mutex;
        pthread_cond_t cond;
        bool stop;
        uint64_t put_ns; /* CLOCK_BOOTTIME when the last put that succeeded was sent (mutex) */
        bool lapsed;     /* a put succeeded half the grace or more after the one before was sent */
} S3Lease;

#define S3B(b) ((S3Backend *)(b))

static bv_s3 *client(BvBackend *b)
{
        return S3B(b)->s3;
}

const char *bv_backend_errmsg(BvBackend *b, char *buf, size_t len)
{
        if (!b || strcmp(b->ops->scheme, "s3") != 0) {
                if (len > 0)
                        buf[0] = '\0';
                return buf;
        }
        return bv_s3_errmsg(client(b), buf, len);
}

/* ---- a point in time ---- */

/* The version of key current at the point in time (NULL when the backend is not opened at one);
 * -ENOENT, with the client's message set, when key did not exist then. */
static int resolve(BvBackend *b, const char *key, const char **ret_version)
{
        S3Backend *s = S3B(b);
        const S3PitEntry *e;
        char when[32];

        *ret_version = NULL;
        if (!s->pit)
                return 0;
        e = s3_pit_find(s->pit_v, s->n_pit, key);
        if (!e) {
                s3_format_iso8601(s->at, when);
                s3_set_error(s->s3, key, "not there at %s (point in time)", when);
                return -ENOENT;
        }
        *ret_version = e->version_id;
        return 0;
}

/* ---- whole objects ---- */

static int first_cb(const bv_s3_object *o, void *userdata)
{
        *(int *)userdata = strcmp(o->key, "config") == 0 ? -EEXIST : -ENOTEMPTY;
        return -ECANCELED;
}

static int s3_create(BvBackend *b)
{
        int found = 0, r = bv_s3_list(client(b), "", first_cb, &found);

        if (r == -ECANCELED)
                return found;
        return r;
}

/* A create-only put on a store without conditional writes: HEAD first (-EEXIST if there). */
static int create_check(BvBackend *b, const char *key, const bv_s3_put_opts *o)
{
        bv_s3_object st = {};
        int r;

        if (!o->if_none_match || bv_s3_conditional_put(client(b)))
                return 0;
        r = bv_s3_head(client(b), key, NULL, &st);
        bv_s3_object_done(&st);
        return r >= 0 ? -EEXIST : r == -ENOENT ? 0 : r;
}

/* The options of a put: create-only, and the backend's Object Lock. */
static bv_s3_put_opts put_opts(BvBackend *b, BvPutFlags flags)
{
        S3Backend *s = S3B(b);

        return (bv_s3_put_opts){
                .if_none_match = !(flags & BV_PUT_REPLACE),
                .retain_until = s->retain_s > 0 ? bv_s3_now(s->s3) + s->retain_s : 0,
                .lock_mode = s->lock_mode,
        };
}

static int s3_put(BvBackend *b, BvObjKind kind, const char *name, const void *data, size_t len, BvPutFlags flags)
{
        char key[BV_BACKEND_KEY_MAX];
        bv_s3_put_opts o = put_opts(b, flags);
        int r = S3B(b)->pit ? -EROFS : bv_obj_key(kind, name, key);

        if (r >= 0)
                r = create_check(b, key, &o);
        return r < 0 ? r : bv_s3_put(client(b), key, data, len, &o);
}

static int s3_get(BvBackend *b, BvObjKind kind, const char *name, size_t max, void **ret, size_t *ret_len)
{
        char key[BV_BACKEND_KEY_MAX];
        const char *version = NULL;
        int r = bv_obj_key(kind, name, key);

        if (r >= 0)
                r = resolve(b, key, &version);
        return r < 0 ? r : bv_s3_get(client(b), key, version, max, ret, ret_len);
}

static int s3_stat(BvBackend *b, BvObjKind kind, const char *name, BvObjEntry *ret)
{
        char key[BV_BACKEND_KEY_MAX];
        const char *version = NULL;
        bv_s3_object o = {};
        int r = bv_obj_key(kind, name, key);

        if (r >= 0)
                r = resolve(b, key, &version);
        if (r >= 0)
                r = bv_s3_head(client(b), key, version, &o);
        if (r < 0)
                return r;
        *ret = (BvObjEntry){ .name = name, .size = o.size, .mtime_ns = o.mtime * (int64_t)1000000000, .type = S_IFREG };
        bv_s3_object_done(&o);
        return 0;
}

static int s3_remove(BvBackend *b, BvObjKind kind, const char *name)
{
        char key[BV_BACKEND_KEY_MAX];
        int r = S3B(b)->pit ? -EROFS : bv_obj_key(kind, name, key);

        return r < 0 ? r : bv_s3_delete(client(b), key, NULL);
}

typedef struct ListCtx {
        size_t strip; /* "folder/" */
        bool fan_out;
        bv_obj_list_fn fn;
        void *userdata;
        int count;
} ListCtx;

static int list_cb(const bv_s3_object *o, void *userdata)
{
        ListCtx *c = userdata;
        const char *name = o->key + c->strip, *slash = strchr(name, '/');
        BvObjEntry e = { .name = name, .size = o->size, .mtime_ns = o->mtime * (int64_t)1000000000, .type = S_IFREG };
        int r;

        /* what a local listing would show as one folder level: packs/xx/NAME, FOLDER/NAME */
        if (c->fan_out ? !slash || strchr(slash + 1, '/') : slash != NULL)
                return 0;
        r = c->fn(&e, c->userdata);
        if (r < 0)
                return r;
        c->count++;
        return 0;
}

static int s3_list(BvBackend *b, BvObjKind kind, bv_obj_list_fn fn, void *userdata)
{
        const char *folder = bv_obj_kind_folder(kind);
        char prefix[BV_BACKEND_KEY_MAX];
        ListCtx c = { .fn = fn, .userdata = userdata, .fan_out = kind == BV_KIND_PACK };
        int r;

        if (!folder || !*folder)
                return -EINVAL; /* the single objects are not listed */
        snprintf(prefix, sizeof(prefix), "%s/", folder);
        c.strip = strlen(prefix);
        if (S3B(b)->pit) {
                S3Backend *s = S3B(b);
                r = 0;
                for (size_t i = 0; i < s->n_pit && r >= 0; i++) {
                        const S3PitEntry *e = &s->pit_v[i];
                        bv_s3_object o = { .key = e->key, .version_id = e->version_id, .size = e->size, .mtime = e->mtime };
                        if (strncmp(e->key, prefix, c.strip) == 0)
                                r = list_cb(&o, &c);
                }
        } else
                r = bv_s3_list(client(b), prefix, list_cb, &c);
        return r < 0 ? r : c.count;
}

/* ---- readers ---- */

static int s3_reader_open(BvBackend *b, BvObjKind kind, const char *name, BvObjReader **ret)
{
        bv_s3_object o = {};
        S3Reader *rd;
        int r;

        rd = calloc(1, sizeof(*rd));
        if (!rd)
                return -ENOMEM;
        r = bv_obj_key(kind, name, rd->key);
        if (r >= 0)
                r = resolve(b, rd->key, &rd->version_id);
        if (r >= 0)
                r = bv_s3_head(client(b), rd->key, rd->version_id, &o);
        if (r < 0) {
                free(rd);
                return r;
        }
        rd->base.backend = b;
        rd->size = o.size;
        snprintf(rd->etag, sizeof(rd->etag), "%s", o.etag);
        snprintf(rd->name, sizeof(rd->name), "%s\n%s", rd->key, rd->etag);
        rd->fd = -EBADF;
        bv_s3_object_done(&o);
        *ret = &rd->base;
        return 0;
}

static ssize_t reader_fetch(void *userdata, uint64_t off, size_t len, void *buf)
{
        S3Reader *rd = userdata;

        return bv_s3_get_range(client(rd->base.backend), rd->key, rd->version_id, off, len, buf);
}

/* The reader's object among the backend's windows. */
#define reader_object(rd)                                                                                    \
        ((S3Object){ .name = (rd)->name, .size = (rd)->size, .stream = &(rd)->stream, .fetch = reader_fetch, \
                     .userdata = (rd) })

static ssize_t s3_reader_pread(BvObjReader *r, void *buf, size_t len, uint64_t offset)
{
        S3Reader *rd = (S3Reader *)r;
        ssize_t n;
        size_t done;

        if (offset >= rd->size)
                return 0;
        len = (size_t)MIN((uint64_t)len, rd->size - offset);
        if (rd->fd >= 0)
                return bv_pread_all(rd->fd, buf, len, offset);
        done = s3_windows_read(&S3B(r->backend)->win, &reader_object(rd), buf, len, offset);
        if (done == len)
                return (ssize_t)len;
        n = reader_fetch(rd, offset + done, len - done, (uint8_t *)buf + done);
        return n < 0 ? n : (ssize_t)done + n;
}

/* The stream will read [offset, offset+len) (pack.h asks 4 MiB ahead). */
static void s3_reader_advise(BvObjReader *r, uint64_t offset, uint64_t len)
{
        S3Reader *rd = (S3Reader *)r;

        if (rd->fd < 0)
                s3_windows_advise(&S3B(r->backend)->win, &reader_object(rd), offset, len);
}

static uint64_t s3_reader_size(BvObjReader *r)
{
        return ((S3Reader *)r)->size;
}

static int lock_dir_locked(S3Backend *s);

/* The cache's bound: $BLKVAULT_S3_CACHE_MAX bytes, else 1 GiB. */
static uint64_t cache_max(void)
{
        const char *e = getenv("BLKVAULT_S3_CACHE_MAX");
        char *end;
        unsigned long long v;

        if (!e || !*e)
                return UINT64_C(1) << 30;
        v = strtoull(e, &end, 10);
        return *end ? UINT64_C(1) << 30 : (uint64_t)v;
}

/* The whole object in a file, for callers that mmap (index segments): the copy in the local
 * cache (backend-s3-cache.h) when there is one, else one GET, kept in the cache (or a memfd
 * where the cache cannot be written). */
static int s3_reader_fd(BvObjReader *r)
{
        S3Reader *rd = (S3Reader *)r;
        S3Backend *s = S3B(r->backend);
        _cleanup_close_ int fd = -EBADF;
        char name[128];
        int dirfd, k;
        void *data;
        size_t len;

        if (rd->fd >= 0)
                return rd->fd;
        dirfd = lock_dir_locked(s);
        bool cacheable = dirfd >= 0 && s3_cache_name(rd->etag, rd->size, name, sizeof(name)) >= 0;
        if (cacheable && (fd = s3_cache_open(dirfd, name)) >= 0) {
                rd->fd = TAKE_FD(fd);
                return rd->fd;
        }
        k = bv_s3_get(client(r->backend), rd->key, rd->version_id, SIZE_MAX, &data, &len);
        if (k < 0)
                return k;
        fd = cacheable && len == rd->size ? s3_cache_put(dirfd, name, data, len, cache_max()) : -EINVAL;
        if (fd < 0) {
                fd = memfd_create("blkvault-s3-object", MFD_CLOEXEC);
                k = fd < 0 ? -errno : bv_pwrite_all(fd, data, len, 0);
        }
        free(data);
        if (k < 0)
                return k;
        rd->size = len;
        rd->fd = TAKE_FD(fd);
        return rd->fd;
}

static void s3_reader_close(BvObjReader *r)
{
        S3Reader *rd = (S3Reader *)r;

        safe_close(rd->fd);
        s3_windows_forget(&S3B(r->backend)->win, rd->name);
        free(rd);
}

/* ---- writers: a spool file, PUT at commit ---- */

static int s3_writer_open(BvBackend *b, BvObjKind kind, BvObjWriter **ret)
{
        const char *dir = getenv("TMPDIR");
        S3Writer *w;
        int fd;

        fd = open(dir && *dir ? dir : "/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        w = calloc(1, sizeof(*w));
        if (!w) {
                safe_close(fd);
                return -ENOMEM;
        }
        *w = (S3Writer){ .base.backend = b, .kind = kind, .fd = fd };
        *ret = &w->base;
        return 0;
}

static int s3_writer_fd(BvObjWriter *w)
{
        return ((S3Writer *)w)->fd;
}

static void s3_writer_abort(BvObjWriter *w)
{
        safe_close(((S3Writer *)w)->fd);
        free(w);
}

static int s3_writer_commit(BvObjWriter *w, const char *name, BvPutFlags flags)
{
        S3Writer *sw = (S3Writer *)w;
        BvBackend *b = w->backend;
        char key[BV_BACKEND_KEY_MAX];
        bv_s3_put_opts o = put_opts(b, flags);
        uint64_t size;
        int r = S3B(b)->pit ? -EROFS : bv_obj_key(sw->kind, name, key);

        if (r >= 0)
                r = bv_fd_size(sw->fd, &size);
        if (r >= 0)
                r = create_check(b, key, &o);
        if (r >= 0)
                r = bv_s3_put_fd(client(b), key, sw->fd, 0, size, &o);
        s3_writer_abort(w);
        return r;
}

/* ---- locks: flock on files of a local directory for this bucket and prefix ---- */

/* $BLKVAULT_CACHE_DIR, $XDG_CACHE_HOME/blkvault, /var/cache/blkvault (root), ~/.cache/blkvault */
static char *cache_base(void)
{
        const char *e = getenv("BLKVAULT_CACHE_DIR"), *home;
        char *s = NULL;

        if (e && *e)
                return strdup(e);
        e = getenv("XDG_CACHE_HOME");
        if (e && *e)
                return asprintf(&s, "%s/blkvault", e) < 0 ? NULL : s;
        if (geteuid() == 0)
                return strdup("/var/cache/blkvault");
        home = getenv("HOME");
        if (!home || !*home)
                return NULL;
        return asprintf(&s, "%s/.cache/blkvault", home) < 0 ? NULL : s;
}

static int lock_dir(S3Backend *s)
{
        _cleanup_free_ char *base = cache_base(), *sub = NULL;
        _cleanup_close_ int basefd = -EBADF;
        int r;

        if (s->lock_dirfd >= 0)
                return s->lock_dirfd;
        if (!base)
                return -ENOMEM;
        /* the prefix's '/' kept: s3/BUCKET/PREFIX/ mirrors the location ("_" for the root) */
        if (asprintf(&sub, "s3/%s/%s", s->bucket, *s->prefix ? s->prefix : "_") < 0)
                return -ENOMEM;
        if (mkdir(base, 0700) < 0 && errno != EEXIST)
                return -errno;
        basefd = open(base, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        if (basefd < 0)
                return -errno;
        r = bv_mkdir_p(basefd, sub);
        if (r < 0)
                return r;
        r = bv_open_dir_beneath(basefd, sub);
        if (r >= 0)
                s->lock_dirfd = r;
        return r;
}

/* lock_dir under lock_mutex: the lock ops and the readers' cache share the directory. */
static int lock_dir_locked(S3Backend *s)
{
        BV_LOCK_GUARD(&s->lock_mutex);
        return lock_dir(s);
}

int bv_backend_s3_cache_dirfd(BvBackend *b)
{
        if (!b || strcmp(b->ops->scheme, "s3") != 0)
                return -EOPNOTSUPP;
        int fd = lock_dir_locked(S3B(b));
        if (fd < 0)
                return fd;
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return fd < 0 ? -errno : fd;
}

static int s3_lock(BvBackend *b, BvLockKind kind, bool wait)
{
        int fd = lock_dir_locked(S3B(b));
        return fd < 0 ? fd : bv_lock_take(fd, kind, wait);
}

static int s3_lock_holder(BvBackend *b, BvLockKind kind, char *buf, size_t size)
{
        int fd = lock_dir_locked(S3B(b));
        return fd < 0 ? fd : bv_lock_holder(fd, kind, buf, size);
}

/* ---- leases: an object put again every heartbeat while held ---- */

/* Half the grace, in ns. */
static uint64_t lease_half_grace_ns(void)
{
        return (uint64_t)BV_S3_LEASE_GRACE_BEATS * (uint64_t)bv_s3_lease_heartbeat_s() * 500000000u;
}

/* Counts a suspended machine's sleep too (CLOCK_MONOTONIC does not): the storage's clock ran. */
static uint64_t boottime_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bv_s3_lease_heartbeat_s(void)
{
        const char *e = getenv("BLKVAULT_S3_LEASE_HEARTBEAT");
        char *end;
        long v;

        if (!e || !*e)
                return BV_S3_LEASE_HEARTBEAT_S;
        errno = 0;
        v = strtol(e, &end, 10);
        return errno || *end || v < 1 || v > 3600 ? BV_S3_LEASE_HEARTBEAT_S : (int)v;
}

static void *heartbeat(void *userdata)
{
        S3Lease *l = userdata;
        struct timespec until;

        pthread_mutex_lock(&l->mutex);
        while (!l->stop) {
                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_sec += bv_s3_lease_heartbeat_s();
                while (!l->stop && pthread_cond_timedwait(&l->cond, &l->mutex, &until) != ETIMEDOUT)
                        ;
                if (l->stop)
                        break;
                pthread_mutex_unlock(&l->mutex);
                /* a failed refresh is retried at the next beat; the grace spans several */
                uint64_t sent = boottime_ns();
                int r = bv_s3_put(client(l->base.backend), l->key, l->body, l->len, NULL);
                pthread_mutex_lock(&l->mutex);
                if (r >= 0) {
                        /* the lease may have looked dead in between (and been reaped): this put
                         * made it anew, but a gc may have gone on without it */
                        l->lapsed |= boottime_ns() - l->put_ns >= lease_half_grace_ns();
                        l->put_ns = sent;
                }
        }
        pthread_mutex_unlock(&l->mutex);
        return NULL;
}

static void lease_free(S3Lease *l)
{
        pthread_cond_destroy(&l->cond);
        pthread_mutex_destroy(&l->mutex);
        free(l->body);
        free(l);
}

static int s3_lease_take(BvBackend *b, const void *body, size_t len, BvBackendLease **ret)
{
        pthread_condattr_t attr;
        S3Lease *l;
        int r;

        if (S3B(b)->pit)
                return -EROFS;
        l = calloc(1, sizeof(*l));
        if (!l || !(l->body = malloc(MAX(len, (size_t)1)))) {
                free(l);
                return -ENOMEM;
        }
        memcpy(l->body, body, len);
        l->len = len;
        l->base.backend = b;
        l->base.name = l->name;
        pthread_mutex_init(&l->mutex, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&l->cond, &attr);
        pthread_condattr_destroy(&attr);
        r = bv_lease_name_new(l->name);
        if (r >= 0)
                r = bv_obj_key(BV_KIND_LEASE, l->name, l->key);
        l->put_ns = boottime_ns();
        if (r >= 0)
                r = bv_s3_put(client(b), l->key, body, len, NULL);
        if (r >= 0 && (r = -pthread_create(&l->thread, NULL, heartbeat, l)) < 0)
                (void)bv_s3_delete(client(b), l->key, NULL);
        if (r < 0) {
                lease_free(l);
                return r;
        }
        *ret = &l->base;
        return 0;
}

static void s3_lease_release(BvBackendLease *lease)
{
        S3Lease *l = (S3Lease *)lease;

        pthread_mutex_lock(&l->mutex);
        l->stop = true;
        pthread_cond_signal(&l->cond);
        pthread_mutex_unlock(&l->mutex);
        pthread_join(l->thread, NULL);
        (void)bv_s3_delete(client(lease->backend), l->key, NULL);
        lease_free(l);
}

bool bv_backend_s3_lease_fresh(BvBackendLease *lease)
{
        S3Lease *l = (S3Lease *)lease;

        if (!lease || strcmp(lease->backend->ops->scheme, "s3") != 0)
                return false;
        BV_LOCK_GUARD(&l->mutex);
        return !l->lapsed && boottime_ns() - l->put_ns < lease_half_grace_ns();
}

static int s3_lease_alive(BvBackend *b, const char *name, bool reap, size_t max, char **ret_body)
{
        char key[BV_BACKEND_KEY_MAX];
        bv_s3_object o = {};
        size_t len;
        int r = bv_obj_key(BV_KIND_LEASE, name, key);

        if (r < 0)
                return r;
        if (S3B(b)->pit)
                return 0; /* nobody holds a lease in the past */
        r = bv_s3_head(client(b), key, NULL, &o);
        bv_s3_object_done(&o);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        /* its age by the server's clock (the HEAD's Date), not this machine's: a clock of ours
         * running ahead of the storage's must not make live leases look dead (LIFECYCLE.md) */
        int64_t now = o.server_time > 0 ? o.server_time : (int64_t)time(NULL);
        if (o.mtime + BV_S3_LEASE_GRACE_BEATS * bv_s3_lease_heartbeat_s() < now) {
                if (reap)
                        (void)bv_s3_delete(client(b), key, NULL);
                return 0;
        }
        if (ret_body) {
                r = bv_s3_get(client(b), key, NULL, max, (void **)ret_body, &len);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return r;
        }
        return 1;
}

/* ---- the probe for conditional writes, remembered ---- */

/* How long this machine trusts what the probe found for an endpoint and bucket. */
#define PROBE_TTL_S (24 * 3600)
#define PROBE_FILE "conditional-put"

/* What the probe found for this endpoint and bucket less than PROBE_TTL_S ago, from the file it
 * left in the backend's directory: 1 honoured, 0 not, -ENOENT none to trust. */
static int probe_remembered(S3Backend *s, int dirfd)
{
        _cleanup_free_ char *text = NULL;
        struct stat st;
        size_t len, n = strlen(s->s3->base_url);

        if (fstatat(dirfd, PROBE_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_mtime + PROBE_TTL_S < time(NULL) || st.st_mtime > time(NULL) + 60)
                return -ENOENT;
        if (bv_read_file_beneath(dirfd, PROBE_FILE, 4096, (void **)&text, &len) < 0 || len != n + 3 ||
            memcmp(text, s->s3->base_url, n) != 0 || text[n] != ' ' || text[n + 2] != '\n' ||
            (text[n + 1] != '0' && text[n + 1] != '1'))
                return -ENOENT;
        return text[n + 1] == '1';
}

/* Whether the store honours If-None-Match: * on PUT: as the probe found it lately on this
 * machine, else probed now (three requests) and remembered. The bucket is checked (one LIST,
 * bv_s3_check_bucket) only with a new probe: a remembered one says that it answered us lately,
 * and a bucket gone since fails the first request that needs it, naming it, as well. */
static int probe_conditional(S3Backend *s)
{
        _cleanup_free_ char *text = NULL;
        int dirfd = lock_dir_locked(s), r;

        if (dirfd >= 0 && (r = probe_remembered(s, dirfd)) >= 0) {
                s->s3->conditional_put = r;
                return 0;
        }
        r = bv_s3_check_bucket(s->s3);
        if (r < 0)
                return r;
        r = s3_probe_conditional(s->s3);
        if (r < 0 || dirfd < 0)
                return r;
        if (asprintf(&text, "%s %d\n", s->s3->base_url, s->s3->conditional_put ? 1 : 0) >= 0)
                (void)bv_write_file_durable(dirfd, PROBE_FILE, text, strlen(text), true);
        return 0;
}

/* ---- open, close ---- */

static void s3_close(BvBackend *b)
{
        S3Backend *s = S3B(b);

        bv_s3_free(s->s3);
        s3_pit_free(s->pit_v, s->n_pit);
        safe_close(s->lock_dirfd);
        pthread_mutex_destroy(&s->lock_mutex);
        s3_windows_done(&s->win);
        free(s->bucket);
        free(s->prefix);
        free(b->location);
        free(s);
}

static const BvBackendOps s3_ops = {
        .scheme = "s3",
        .create = s3_create,
        .close = s3_close,
        .put = s3_put,
        .get = s3_get,
        .stat = s3_stat,
        .remove = s3_remove,
        .list = s3_list,
        .reader_open = s3_reader_open,
        .reader_pread = s3_reader_pread,
        .reader_size = s3_reader_size,
        .reader_advise = s3_reader_advise,
        .reader_fd = s3_reader_fd,
        .reader_close = s3_reader_close,
        .writer_open = s3_writer_open,
        .writer_fd = s3_writer_fd,
        .writer_commit = s3_writer_commit,
        .writer_abort = s3_writer_abort,
        .lock = s3_lock,
        .lock_holder = s3_lock_holder,
        .lease_take = s3_lease_take,
        .lease_release = s3_lease_release,
        .lease_alive = s3_lease_alive,
};

static int s3_open(const char *location, bool create, int64_t at, BvBackend **ret, char *errbuf, size_t errlen)
{
        bv_s3_conf *conf = NULL;
        S3Backend *s;
        int r;

        if (errbuf && errlen > 0)
                errbuf[0] = '\0';
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base.ops = &s3_ops;
        s->lock_dirfd = -EBADF;
        pthread_mutex_init(&s->lock_mutex, NULL);
        r = s3_windows_init(&s->win, 0);
        if (r >= 0)
                r = bv_s3_conf_from_env(location, NULL, &conf);
        if (r >= 0 && (!(s->base.location = strdup(location)) || !(s->bucket = strdup(conf->bucket)) ||
                       !(s->prefix = strdup(conf->prefix))))
                r = -ENOMEM;
        if (r >= 0) {
                r = bv_s3_open(conf, BV_S3_NO_CHECK, &s->s3, errbuf, errlen);
                if (r >= 0 && (r = at ? bv_s3_check_bucket(s->s3) : probe_conditional(s)) < 0 && errbuf)
                        bv_s3_errmsg(s->s3, errbuf, errlen);
        } else if (errbuf && r == -ESRCH)
                snprintf(errbuf, errlen, "%s: AWS_PROFILE '%s' names no profile: neither the credentials file "
                         "(AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) has a [%s] section nor the config file "
                         "(AWS_CONFIG_FILE, else ~/.aws/config) a [profile %s] one", location, getenv("AWS_PROFILE"),
                         getenv("AWS_PROFILE"), getenv("AWS_PROFILE"));
        else if (errbuf)
                snprintf(errbuf, errlen, "%s: %s", location,
                         r == -ENOKEY ? "no S3 credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials)"
                                      : "not a usable S3 location or configuration (s3://BUCKET[/PREFIX], AWS_ENDPOINT_URL, AWS_MAX_ATTEMPTS, BLKVAULT_S3_TIMEOUT)");
        bv_s3_conf_free(conf);
        if (r >= 0 && create) {
                r = s3_create(&s->base);
                if (r < 0 && errbuf)
                        snprintf(errbuf, errlen, "%s: %s", location,
                                 r == -EEXIST ? "a repository is already there" : r == -ENOTEMPTY ? "holds objects already" : "cannot list it");
        }
        if (r >= 0 && at) {
                s->pit = true;
                s->at = at;
                r = s3_pit_load(s->s3, at, &s->pit_v, &s->n_pit);
                if (r < 0 && errbuf)
                        bv_s3_errmsg(s->s3, errbuf, errlen);
        }
        if (r < 0) {
                s3_close(&s->base);
                return r;
        }
        *ret = &s->base;
        return 0;
}

int bv_backend_s3_open(const char *location, bool create, BvBackend **ret, char *errbuf, size_t errlen)
{
        return s3_open(location, create, 0, ret, errbuf, errlen);
}

int bv_backend_s3_open_at(const char *location, int64_t at, BvBackend **ret, char *errbuf, size_t errlen)
{
        if (at <= 0)
                return -EINVAL;
        return s3_open(location, false, at, ret, errbuf, errlen);
}

int bv_backend_s3_stats(BvBackend *b, bv_s3_stats *ret)
{
        if (!b || strcmp(b->ops->scheme, "s3") != 0)
                return -EOPNOTSUPP;
        bv_s3_get_stats(client(b), ret);
        return 0;
}

int64_t bv_backend_s3_now(BvBackend *b)
{
        if (!b || strcmp(b->ops->scheme, "s3") != 0)
                return (int64_t)time(NULL);
        return bv_s3_now(client(b));
}

int bv_backend_s3_set_object_lock(BvBackend *b, int64_t retain_seconds, bv_s3_lock_mode mode)
{
        if (!b || strcmp(b->ops->scheme, "s3") != 0)
                return -EOPNOTSUPP;
        if (retain_seconds < 0)
                return -EINVAL;
        S3B(b)->retain_s = retain_seconds;
        S3B(b)->lock_mode = mode == BV_S3_LOCK_GOVERNANCE ? BV_S3_LOCK_GOVERNANCE : BV_S3_LOCK_COMPLIANCE;
        return 0;
}

int bv_backend_s3_object_lock_enabled(BvBackend *b)
{
        if (!b || strcmp(b->ops->scheme, "s3") != 0)
                return -EOPNOTSUPP;
        return bv_s3_object_lock_enabled(client(b));
}

int bv_backend_s3_retention_mode(BvBackend *b, BvObjKind kind, const char *name, int64_t *ret_until,
                                 bv_s3_lock_mode *ret_mode)
{
        char key[BV_BACKEND_KEY_MAX];
        bv_s3_object o = {};
        int r = !b || strcmp(b->ops->scheme, "s3") != 0 ? -EOPNOTSUPP : bv_obj_key(kind, name, key);

        if (r >= 0)
                r = bv_s3_head(client(b), key, NULL, &o);
        if (r >= 0) {
                *ret_until = o.retain_until;
                if (ret_mode)
                        *ret_mode = o.lock_mode;
        }
        bv_s3_object_done(&o);
        return r;
}

int bv_backend_s3_retention(BvBackend *b, BvObjKind kind, const char *name, int64_t *ret_until)
{
        return bv_backend_s3_retention_mode(b, kind, name, ret_until, NULL);
}

int bv_backend_s3_extend_retention(BvBackend *b, BvObjKind kind, const char *name, int64_t until)
{
        char key[BV_BACKEND_KEY_MAX];
        int64_t now_until = 0;
        int r = !b || strcmp(b->ops->scheme, "s3") != 0 ? -EOPNOTSUPP : S3B(b)->pit ? -EROFS : bv_obj_key(kind, name, key);

        if (r >= 0)
                r = bv_s3_set_retention(client(b), key, NULL, S3B(b)->lock_mode ?: BV_S3_LOCK_COMPLIANCE, until);
        /* refused: perhaps it is retained longer already, which a COMPLIANCE lock does not shorten */
        if (r == -EACCES && bv_backend_s3_retention(b, kind, name, &now_until) >= 0 && now_until >= until)
                r = 0;
        return r;
}

typedef struct Foreign {
        char *what;
        size_t len;
} Foreign;

static int foreign_cb(const bv_s3_object *o, void *userdata)
{
        Foreign *f = userdata;
        if (strncmp(o->key, "keys/", 5) == 0)
                return 0; /* a creation by copy that was interrupted before its config */
        if (strncmp(o->key, ".probe-conditional-put-", 23) == 0)
                return 0; /* another process's probe, at its open */
        snprintf(f->what, f->len, "%s", o->key);
        return -ENOTEMPTY;
}

int bv_backend_s3_foreign(BvBackend *b, char *what, size_t what_len)
{
        Foreign f = { .what = what, .len = what_len };
        if (!b || strcmp(b->ops->scheme, "s3") != 0)
                return -EOPNOTSUPP;
        return bv_s3_list(client(b), "", foreign_cb, &f);
}
