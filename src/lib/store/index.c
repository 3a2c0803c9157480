/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The chunk index (docs/FORMAT.md, "Index"): immutable memory-mapped segment files plus an
 * in-memory pending table of the current batch.
 *
 * Locking, always taken in this order:
 *   update_mutex   serializes whoever builds a new segment array (flush, compact, refresh) and
 *                  whoever walks segments for long (check); holders may read x->segs unlocked
 *   pending_mutex  the pending table (claim, unclaim, add_pack, lookups while it holds entries)
 *   seg_lock       rwlock around the x->segs pointer: lookups hold it shared while they probe,
 *                  publishers hold it exclusively only to swap the pointer. A segment dropped
 *                  from the array is unmapped after the swap, when no lookup can still use it.
 * A flush holds pending_mutex while it writes, so "located entries move from the table to a new
 * segment" is atomic for claims and lookups.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "buf.h"
#include "endian.h"
#include "fileio.h"
#include "hash.h"
#include "hex.h"
#include "index-internal.h"
#include "macro.h"
#include "random.h"
#include "timeutil.h"

static void segarray_sort(SegArray *a);

SegArray *segarray_new(size_t n)
{
        SegArray *a = calloc(1, sizeof(SegArray) + n * sizeof(Segment *));

        if (a)
                a->n = n;
        return a;
}

static bool segarray_contains(const SegArray *a, const Segment *s)
{
        for (size_t i = 0; a && i < a->n; i++)
                if (a->s[i] == s)
                        return true;
        return false;
}

/* Frees old and the segments of old that next no longer holds. */
static void segarray_release(SegArray *old, const SegArray *next)
{
        if (!old)
                return;
        for (size_t i = 0; i < old->n; i++)
                if (!segarray_contains(next, old->s[i]))
                        segment_free(old->s[i]);
        free(old);
}

static int seg_generation_cmp(const void *a, const void *b)
{
        const Segment *x = *(Segment *const *)a, *y = *(Segment *const *)b;

        if (x->generation != y->generation)
                return x->generation > y->generation ? -1 : 1;
        return -strcmp(x->name, y->name);
}

static void segarray_sort(SegArray *a)
{
        qsort(a->s, a->n, sizeof(a->s[0]), seg_generation_cmp);
}

/* Makes next the published array and releases the previous one. Caller holds update_mutex. */
void index_publish(BvIndex *x, SegArray *next)
{
        SegArray *old;

        pthread_rwlock_wrlock(&x->seg_lock);
        old = x->segs;
        x->segs = next;
        pthread_rwlock_unlock(&x->seg_lock);
        for (size_t i = 0; i < next->n; i++)
                x->max_generation = MAX(x->max_generation, next->s[i]->generation);
        segarray_release(old, next);
}

static int pack_cmp(const void *a, const void *b)
{
        return memcmp(a, b, IDX_PACK_SIZE);
}

static bool pack_missing(const BvIndex *x, const uint8_t pack_id[IDX_PACK_SIZE])
{
        return x->n_missing > 0 && bsearch(pack_id, x->missing, x->n_missing, IDX_PACK_SIZE, pack_cmp);
}

static int segs_find(BvIndex *x, const uint8_t id[BV_ID_SIZE], bool via_pread, BvLocation *ret)
{
        int r = -ENOENT;

        pthread_rwlock_rdlock(&x->seg_lock);
        for (size_t i = 0; i < x->segs->n && r == -ENOENT; i++) {
                r = segment_find(x->segs->s[i], id, via_pread, ret, NULL);
                if (r == 0 && pack_missing(x, ret->pack_id))
                        r = -ENOENT; /* an older segment may locate it elsewhere */
        }
        pthread_rwlock_unlock(&x->seg_lock);
        return r;
}

void bv_index_advise(BvIndex *x, uint64_t max_bytes)
{
        uint64_t total = 0;

        pthread_rwlock_rdlock(&x->seg_lock);
        for (size_t i = 0; i < x->segs->n; i++)
                total += x->segs->s[i]->size;
        for (size_t i = 0; i < x->segs->n && total <= max_bytes; i++)
                (void)madvise((void *)x->segs->s[i]->map, x->segs->s[i]->size, MADV_WILLNEED);
        pthread_rwlock_unlock(&x->seg_lock);
}

/* ---- open, free, refresh -------------------------------------------------------------------- */

/* Lists the segment files of the directory into a new array, reusing the segments of known
 * ones. *ret_vanished tells whether a segment of known disappeared (another process compacted:
 * scan again to be sure to see its output). */
static int damaged_add(BvIndexDamage **list, size_t *n, const char *name, int error)
{
        BvIndexDamage *p = reallocarray(*list, *n + 1, sizeof(**list));

        if (!p)
                return -ENOMEM;
        *list = p;
        p[*n] = (BvIndexDamage){ .error = error };
        snprintf(p[*n].name, sizeof(p[*n].name), "%.31s", name); /* names are checked: 20 bytes */
        (*n)++;
        return 0;
}

/* The segment names of index/, as met (names that are not a segment's are skipped). */
typedef struct SegNames {
        char (*v)[IDX_NAME_LEN + 1];
        size_t n, cap;
} SegNames;

static int seg_names_add(SegNames *l, const char *name)
{
        if (!bv_index_name_valid(name))
                return 0;
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 16;
                void *v = reallocarray(l->v, cap, sizeof(*l->v));

                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        snprintf(l->v[l->n++], IDX_NAME_LEN + 1, "%.20s", name); /* checked: 20 bytes */
        return 0;
}

static int seg_names_entry(const BvObjEntry *e, void *userdata)
{
        return seg_names_add(userdata, e->name);
}

/* Lists index/: through the backend, or the directory of an index opened on one. */
static int seg_names_list(BvIndex *x, SegNames *l)
{
        struct dirent *de;
        DIR *d;
        int r;

        if (x->backend) {
                r = bv_backend_list(x->backend, BV_KIND_INDEX, seg_names_entry, l);
                return r < 0 ? r : 0;
        }
        r = bv_opendir_beneath(x->dirfd, ".", &d);
        if (r < 0)
                return r;
        while ((errno = 0, de = readdir(d)) && r >= 0)
                r = seg_names_add(l, de->d_name);
        if (r >= 0 && errno != 0)
                r = negative_errno();
        closedir(d);
        return r;
}

/* Whether a segment that fails to open is that segment's damage (left out), rather than a
 * failure of the process (out of memory or descriptors) or, for a remote backend, of the
 * transport or the credentials, that must fail the scan. */
static bool segment_error_is_damage(const BvIndex *x, int r)
{
        if (x->backend && !bv_backend_is_local(x->backend))
                return r == -EBADMSG || r == -EPROTONOSUPPORT;
        return r != -ENOMEM && r != -EMFILE && r != -ENFILE && r != -EINTR;
}

static int segment_open_named(BvIndex *x, const char *name, Segment **ret)
{
        return x->backend ? segment_open_backend(x->backend, BV_KIND_INDEX, name, ret) : segment_open(x->dirfd, name, ret);
}

static int index_scan(BvIndex *x, const SegArray *known, SegArray **ret, bool *ret_vanished)
{
        _cleanup_free_ BvIndexDamage *damaged = NULL;
        size_t n_damaged = 0;
        _cleanup_free_ SegArray *a = NULL;
        SegNames names = {};
        size_t cap = 16, found = 0;
        int r;

        r = seg_names_list(x, &names);
        a = r < 0 ? NULL : segarray_new(cap);
        if (r >= 0 && !a)
                r = -ENOMEM;
        if (r < 0) {
                free(names.v);
                return r;
        }
        a->n = 0;
        for (size_t i = 0; i < names.n; i++) {
                const char *name = names.v[i];
                Segment *s = NULL;

                for (size_t k = 0; known && k < known->n && !s; k++)
                        if (strcmp(known->s[k]->name, name) == 0)
                                s = known->s[k];
                if (s)
                        found++;
                else {
                        r = segment_open_named(x, name, &s);
                        if (r == -ENOENT) {
                                r = 0; /* removed by a compaction meanwhile */
                                continue;
                        }
                        if (r < 0 && segment_error_is_damage(x, r)) {
                                r = damaged_add(&damaged, &n_damaged, name, r);
                                if (r < 0)
                                        break;
                                continue;
                        }
                        if (r < 0)
                                break;
                }
                if (a->n == cap) {
                        SegArray *b = realloc(a, sizeof(SegArray) + 2 * cap * sizeof(Segment *));
                        if (!b) {
                                if (!segarray_contains(known, s))
                                        segment_free(s);
                                r = -ENOMEM;
                                break;
                        }
                        a = b;
                        cap *= 2;
                }
                a->s[a->n++] = s;
        }
        free(names.v);
        if (r < 0) {
                for (size_t i = 0; i < a->n; i++)
                        if (!segarray_contains(known, a->s[i]))
                                segment_free(a->s[i]);
                return r;
        }
        segarray_sort(a);
        free(x->damaged);
        x->damaged = TAKE_PTR(damaged);
        x->n_damaged = n_damaged;
        *ret_vanished = known && found < known->n;
        *ret = TAKE_PTR(a);
        return 0;
}

/* Scans (twice if a known segment vanished) and publishes. Caller holds update_mutex. */
static int index_rescan(BvIndex *x)
{
        SegArray *a = NULL;
        bool vanished = false;
        int r;

        r = index_scan(x, x->segs, &a, &vanished);
        if (r >= 0 && vanished) {
                SegArray *b = NULL;
                /* The second scan reuses the segments the first one opened. */
                r = index_scan(x, a, &b, &vanished);
                if (r >= 0) {
                        for (size_t i = 0; i < a->n; i++)
                                if (!segarray_contains(b, a->s[i]) && !segarray_contains(x->segs, a->s[i]))
                                        segment_free(a->s[i]);
                        free(a);
                        a = b;
                } else
                        segarray_release(a, x->segs);
        }
        if (r < 0)
                return r;
        index_publish(x, a);
        return 0;
}

void bv_index_free(BvIndex *x)
{
        if (!x)
                return;
        segarray_release(x->segs, NULL);
        pending_release(x->pending.slots, x->pending.cap);
        free(x->pending.packs);
        free(x->damaged);
        free(x->missing);
        pthread_rwlock_destroy(&x->seg_lock);
        pthread_mutex_destroy(&x->pending_mutex);
        pthread_mutex_destroy(&x->update_mutex);
        safe_close(x->dirfd);
        free(x);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvIndex, bv_index_free);

static int index_new(BvBackend *b, int index_dirfd, BvIndex **ret)
{
        _cleanup_(bv_index_freep) BvIndex *x = NULL;
        pthread_rwlockattr_t attr;
        int r;

        if ((!b && index_dirfd < 0) || !ret)
                return -EINVAL;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->backend = b;
        x->dirfd = -EBADF;
        if (index_dirfd >= 0) {
                x->dirfd = fcntl(index_dirfd, F_DUPFD_CLOEXEC, 3);
                if (x->dirfd < 0)
                        return negative_errno();
        }
        pthread_mutex_init(&x->update_mutex, NULL);
        pthread_mutex_init(&x->pending_mutex, NULL);
        /* Publishers must not starve behind a steady stream of lookups. */
        pthread_rwlockattr_init(&attr);
        pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&x->seg_lock, &attr);
        pthread_rwlockattr_destroy(&attr);
        x->segs = segarray_new(0);
        if (!x->segs)
                return -ENOMEM;

        r = index_rescan(x);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

int bv_index_open(int index_dirfd, BvIndex **ret)
{
        return index_new(NULL, index_dirfd, ret);
}

int bv_index_open_backend(BvBackend *b, int index_dirfd, BvIndex **ret)
{
        return b ? index_new(b, index_dirfd, ret) : -EINVAL;
}

int bv_index_refresh(BvIndex *x)
{
        BV_LOCK_GUARD(&x->update_mutex);
        return index_rescan(x);
}

int bv_index_damaged(BvIndex *x, BvIndexDamage **ret, size_t *ret_count)
{
        BvIndexDamage *copy = NULL;

        BV_LOCK_GUARD(&x->update_mutex);
        if (x->n_damaged > 0) {
                copy = malloc(x->n_damaged * sizeof(*copy));
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, x->damaged, x->n_damaged * sizeof(*copy));
        }
        *ret = copy;
        *ret_count = x->n_damaged;
        return 0;
}

int bv_index_packs(BvIndex *x, int (*cb)(const uint8_t pack_id[BV_PACK_ID_SIZE], void *ud), void *userdata)
{
        BV_LOCK_GUARD(&x->update_mutex);
        for (size_t i = 0; i < x->segs->n; i++) {
                const Segment *s = x->segs->s[i];

                for (uint32_t j = 0; j < s->npacks; j++) {
                        int r = cb(s->packs + (size_t)j * IDX_PACK_SIZE, userdata);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int bv_index_set_missing_packs(BvIndex *x, const uint8_t (*ids)[BV_PACK_ID_SIZE], size_t n)
{
        uint8_t(*copy)[IDX_PACK_SIZE] = NULL;

        if (n > 0) {
                copy = malloc(n * IDX_PACK_SIZE);
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, ids, n * IDX_PACK_SIZE);
                qsort(copy, n, IDX_PACK_SIZE, pack_cmp);
        }
        free(x->missing);
        x->missing = copy;
        x->n_missing = n;
        return 0;
}

/* ---- lookups and claims ------------------------------------------------------------------ */

int bv_index_lookup(BvIndex *x, const uint8_t id[BV_ID_SIZE], BvLocation *ret)
{
        BvLocation loc;
        int r;

        /* Pending first: a flush publishes its segment before the entries leave the table. */
        if (__atomic_load_n(&x->pending.located, __ATOMIC_ACQUIRE) > 0) {
                BV_LOCK_GUARD(&x->pending_mutex);
                const PendingSlot *sl = pending_find(&x->pending, id);

                if (sl && sl->pack != PENDING_CLAIMED) {
                        memcpy(loc.pack_id, x->pending.packs[sl->pack], IDX_PACK_SIZE);
                        loc.offset = sl->offset;
                        loc.length = sl->length;
                        loc.type = sl->type;
                        loc.member = sl->member;
                        *ret = loc;
                        return 0;
                }
        }
        r = segs_find(x, id, false, &loc);
        if (r < 0)
                return r;
        *ret = loc;
        return 0;
}

int bv_index_claim(BvIndex *x, const uint8_t id[BV_ID_SIZE])
{
        BvLocation loc;
        int r;

        BV_LOCK_GUARD(&x->pending_mutex);
        if (pending_find(&x->pending, id))
                return 0;
        r = segs_find(x, id, true, &loc);
        if (r == 0)
                return 0;
        if (r != -ENOENT)
                return r;
        if (!pending_insert(&x->pending, id))
                return -ENOMEM;
        return 1;
}

void bv_index_unclaim(BvIndex *x, const uint8_t id[BV_ID_SIZE])
{
        PendingSlot *sl;

        BV_LOCK_GUARD(&x->pending_mutex);
        sl = pending_find(&x->pending, id);
        if (sl && sl->pack == PENDING_CLAIMED)
                pending_remove(&x->pending, sl);
}

int bv_index_add_pack(BvIndex *x, const uint8_t pack_id[BV_PACK_ID_SIZE], const BvPackEntry *entries, size_t n)
{
        Pending *t = &x->pending;
        size_t located;
        uint32_t pos;

        if (n == 0)
                return 0;
        if (!pack_id || !entries)
                return -EINVAL;

        BV_LOCK_GUARD(&x->pending_mutex);
        if (t->npacks >= UINT32_MAX - 1)
                return -E2BIG;
        if (BV_ARRAY_RESERVE(t->packs, t->packs_cap, t->npacks + 1, 64) < 0)
                return -ENOMEM;
        /* Reserve room for every entry first, so that a failure leaves the table unchanged. */
        while ((t->used + n) * 4 > t->cap * 3)
                if (pending_rebuild(t, pending_grown(t->cap)) < 0)
                        return -ENOMEM;

        pos = (uint32_t)t->npacks;
        memcpy(t->packs[t->npacks++], pack_id, IDX_PACK_SIZE);
        located = t->located;
        for (size_t i = 0; i < n; i++) {
                PendingSlot *sl = pending_find(t, entries[i].id);

                if (!sl)
                        sl = pending_insert(t, entries[i].id); /* cannot fail: room reserved */
                if (sl->pack == PENDING_CLAIMED)
                        located++;
                sl->pack = pos;
                sl->offset = entries[i].offset;
                sl->length = entries[i].length;
                sl->type = entries[i].type;
                sl->member = entries[i].member;
        }
        /* Written atomically: lookups read it without the lock. */
        pending_set_located(t, located);
        return 0;
}

size_t bv_index_pending(const BvIndex *x)
{
        return __atomic_load_n(&x->pending.located, __ATOMIC_ACQUIRE);
}

static uint64_t index_next_generation(BvIndex *x)
{
        /* Later than every segment seen (saturating: a forged generation must not wrap). */
        return MAX(bv_now_realtime_ns(), x->max_generation + (x->max_generation < UINT64_MAX));
}

/* A new array holding the segments of x->segs and add. */
static SegArray *segarray_with(const SegArray *old, Segment *add)
{
        SegArray *a = segarray_new(old->n + 1);

        if (!a)
                return NULL;
        memcpy(a->s, old->s, old->n * sizeof(Segment *));
        a->s[old->n] = add;
        segarray_sort(a);
        return a;
}

static int slot_cmp(const void *a, const void *b, void *userdata)
{
        const PendingSlot *slots = userdata;

        return id_cmp(slots[*(const uint32_t *)a].id, slots[*(const uint32_t *)b].id);
}

int index_seg_dest(const BvIndex *x, SegDest *ret)
{
        if (x->write_backend)
                *ret = (SegDest){ .dirfd = -EBADF, .backend = x->write_backend, .kind = BV_KIND_INDEX };
        else if (x->dirfd >= 0)
                *ret = (SegDest){ .dirfd = x->dirfd, .kind = BV_KIND_INDEX };
        else
                return -EROFS; /* opened to be read only */
        return 0;
}

int bv_index_write_through(BvIndex *x)
{
        if (!x->backend || x->dirfd >= 0)
                return -EINVAL;
        x->write_backend = x->backend;
        return 0;
}

/* Writes the located entries of the pending table as a segment. Caller holds both mutexes. */
static int index_flush_locked(BvIndex *x)
{
        Pending *t = &x->pending;
        _cleanup_free_ uint32_t *order = NULL;
        SegWriter w;
        Segment *s = NULL;
        SegArray *a;
        size_t n = 0;
        int r;

        if (t->located == 0)
                return 0;
        SegDest dest;
        r = index_seg_dest(x, &dest);
        if (r < 0)
                return r;
        order = malloc(t->located * sizeof(uint32_t));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < t->cap; i++)
                if (t->slots[i].used && t->slots[i].pack != PENDING_CLAIMED)
                        order[n++] = (uint32_t)i;
        qsort_r(order, n, sizeof(uint32_t), slot_cmp, t->slots);

        r = seg_writer_begin(&w, dest, n, (const uint8_t(*)[IDX_PACK_SIZE])t->packs, (uint32_t)t->npacks);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++) {
                const PendingSlot *sl = &t->slots[order[i]];
                r = seg_writer_add(&w, sl->id, sl->pack, sl->offset, sl->length, sl->type, sl->member);
        }
        if (r < 0) {
                seg_writer_abort(&w);
                return r;
        }
        r = seg_writer_finish(&w, index_next_generation(x), &s);
        if (r < 0)
                return r;

        a = segarray_with(x->segs, s);
        if (!a) {
                segment_free(s); /* the file stays: the next open picks it up */
                return -ENOMEM;
        }
        index_publish(x, a);

        /* The entries are durable and visible in the segment: keep only the open claims. */
        pending_drop_located(t);
        return 0;
}

int bv_index_flush(BvIndex *x)
{
        BV_LOCK_GUARD(&x->update_mutex);
        BV_LOCK_GUARD(&x->pending_mutex);
        return index_flush_locked(x);
}

/* ---- stats and check -------------------------------------------------------------------- */

int bv_index_stats(BvIndex *x, BvIndexStats *ret)
{
        BvIndexStats st = {};

        pthread_rwlock_rdlock(&x->seg_lock);
        for (size_t i = 0; i < x->segs->n; i++) {
                const Segment *s = x->segs->s[i];
                st.entries += s->count;
                st.bytes += s->size;
                st.filter_bytes += s->bloom_len;
        }
        st.segments = x->segs->n;
        pthread_rwlock_unlock(&x->seg_lock);
        *ret = st;
        return 0;
}

int bv_index_check(BvIndex *x, int (*cb)(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud),
                   void *userdata)
{
        int r;

        /* Holding update_mutex keeps the array alive without blocking lookups. */
        BV_LOCK_GUARD(&x->update_mutex);
        for (size_t i = 0; i < x->segs->n; i++) {
                r = segment_check(x->segs->s[i], cb, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}
