/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * NBD exports behind the source ops table, read with libnbd over one connection with up to
 * queue_depth reads in flight (qemu-nbd serves one connection unless told otherwise, and
 * in-flight commands keep the storage as busy as several connections would).
 *
 * A planner walks the export in order, asking the server's block status a window at a time for
 * "base:allocation" (ranges that read as zeroes are delivered as holes and never read) and, with a
 * dirty bitmap, for "qemu:dirty-bitmap:NAME" (bit 0: dirty). Clean ranges are delivered as
 * UNCHANGED: the backup takes them from the parent snapshot. In a whole read (the parent cannot
 * be paired with the bitmap) everything is read, and the clean ranges are only remembered, so
 * that the backup can check the bitmap against what it read.
 *
 * Block status answers at most 4 GiB per request (a 32-bit length, before NBD's extended
 * headers), so walking an export costs one request per 4 GiB of it whatever it holds: an export
 * larger than BV_SOURCE_NBD_SIZE_MAX is refused at open instead of being walked for hours (a
 * server claiming 1 EiB needs 2^28 requests).
 */
#include <errno.h>
#include <libnbd.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "macro.h"
#include "source.h"

#define NBD_READ_SIZE_MAX (32u * 1024u * 1024u) /* qemu-nbd's largest request */
#define STATUS_WINDOW (1024ull * 1024 * 1024) /* bytes of block status asked at once */
#define ALLOCATION_CONTEXT "base:allocation"
#define DIRTY_PREFIX "qemu:dirty-bitmap:"
#define STATE_ZERO 2u  /* base:allocation: the range reads as zeroes */
#define STATE_DIRTY 1u /* qemu:dirty-bitmap */

/* One context's block status: extents as their absolute end and flags. */
typedef struct Status {
        struct {
                uint64_t end;
                uint32_t flags;
        } *v;
        size_t n, cap, at; /* at: the extent the planner is in */
        bool wanted;       /* the server offers this context */
} Status;

typedef struct NbdSlot {
        void *buf;
        BvExtentKind kind;
        uint64_t offset, length;
        int64_t cookie; /* of the read in flight, 0 when none */
} NbdSlot;

typedef struct NbdSource {
        struct nbd_handle *nbd;
        char *map_name; /* "qemu:dirty-bitmap:NAME", or NULL */
        uint64_t size;
        size_t read_size;
        Status alloc, dirty;
        uint64_t status_end; /* block status is known up to here */
        BvWholeRead wr;      /* unchanged: what the bitmap calls clean, noted in a whole read */
        BvByteRange *changed; /* what the bitmap calls dirty, asked once (nbd_changed_ranges) */
        size_t n_changed, cap_changed;
        bool changed_known;

        NbdSlot *slots;
        unsigned nslots, head, count;
        bool held;
        uint64_t plan_pos, run_end; /* the run plan_pos is in ends at run_end */
        BvExtentKind run_kind;
        int error;
} NbdSource;

static int nbd_errno(void)
{
        int e = nbd_get_errno();

        return e > 0 ? -e : -EIO;
}

static void nbd_source_free(NbdSource *s)
{
        if (!s)
                return;
        if (s->nbd)
                nbd_close(s->nbd); /* drops the reads in flight: nothing writes the buffers after */
        for (unsigned i = 0; s->slots && i < s->nslots; i++)
                free(s->slots[i].buf);
        free(s->slots);
        free(s->alloc.v);
        free(s->dirty.v);
        free(s->wr.unchanged);
        free(s->changed);
        free(s->map_name);
        free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(NbdSource, nbd_source_free);

static int status_add(Status *st, uint64_t end, uint32_t flags)
{
        if (BV_ARRAY_RESERVE(st->v, st->cap, st->n + 1, 64) < 0)
                return -ENOMEM;
        st->v[st->n].end = end;
        st->v[st->n].flags = flags;
        st->n++;
        return 0;
}

static int status_cb(void *userdata, const char *context, uint64_t offset, uint32_t *entries, size_t n, int *error)
{
        NbdSource *s = userdata;
        Status *st = strcmp(context, ALLOCATION_CONTEXT) == 0                  ? &s->alloc
                     : s->map_name && strcmp(context, s->map_name) == 0 ? &s->dirty
                                                                            : NULL;
        uint64_t pos = offset;

        if (!st || st->n > 0)
                return 0; /* another context, or a second reply for this one: the first is enough */
        for (size_t i = 0; i + 1 < n; i += 2) {
                if (entries[i] == 0) {
                        *error = EPROTO;
                        return -1;
                }
                pos = MIN(pos + entries[i], s->size);
                if (status_add(st, pos, entries[i + 1]) < 0) {
                        *error = ENOMEM;
                        return -1;
                }
                if (pos == s->size)
                        break;
        }
        return 0;
}

/* Asks block status from offset on; sets status_end to where both contexts are known. */
static int status_fetch(NbdSource *s, uint64_t offset)
{
        s->alloc.n = s->alloc.at = 0;
        s->dirty.n = s->dirty.at = 0;
        if (!s->alloc.wanted && !s->dirty.wanted) {
                s->status_end = s->size;
                return 0;
        }
        uint64_t count = MIN(STATUS_WINDOW, s->size - offset);
        if (nbd_block_status(s->nbd, count, offset, (nbd_extent_callback){ .callback = status_cb, .user_data = s },
                             0) < 0)
                return nbd_errno();
        uint64_t end = s->size;
        for (Status *st = &s->alloc; st; st = st == &s->alloc ? &s->dirty : NULL) {
                if (!st->wanted)
                        continue;
                if (st->n == 0)
                        return -EPROTO; /* the server left out a context it offered */
                end = MIN(end, st->v[st->n - 1].end);
        }
        if (end <= offset)
                return -EPROTO;
        s->status_end = end;
        return 0;
}

/* The flags of st at pos (known), and where they end. */
static uint32_t status_at(Status *st, uint64_t pos, uint64_t *end)
{
        while (st->v[st->at].end <= pos)
                st->at++;
        *end = MIN(*end, st->v[st->at].end);
        return st->v[st->at].flags;
}

/* What [pos, *end) is: UNCHANGED (clean in the bitmap), HOLE (reads as zeroes) or DATA. */
static BvExtentKind segment(NbdSource *s, uint64_t pos, uint64_t *end, bool *clean)
{
        uint32_t alloc = 0, dirty = STATE_DIRTY;

        *end = s->status_end;
        if (s->dirty.wanted)
                dirty = status_at(&s->dirty, pos, end);
        if (s->alloc.wanted)
                alloc = status_at(&s->alloc, pos, end);
        *clean = !(dirty & STATE_DIRTY);
        if (*clean && !s->wr.whole)
                return BV_EXTENT_UNCHANGED;
        return alloc & STATE_ZERO ? BV_EXTENT_HOLE : BV_EXTENT_DATA;
}

/* In a whole read, notes a range the bitmap calls clean. */
static int clean_note(NbdSource *s, bool clean, uint64_t from, uint64_t to)
{
        BvWholeRead *w = &s->wr;

        return clean && w->whole ? bv_range_append(&w->unchanged, &w->n_unchanged, &w->cap_unchanged, from, to - from)
                                 : 0;
}

/* Starts the run at plan_pos: the longest stretch of one kind the known status gives. */
static int run_start(NbdSource *s)
{
        uint64_t end;
        bool clean;
        int r;

        if (s->plan_pos >= s->status_end) {
                r = status_fetch(s, s->plan_pos);
                if (r < 0)
                        return r;
        }
        s->run_kind = segment(s, s->plan_pos, &end, &clean);
        if ((r = clean_note(s, clean, s->plan_pos, end)) < 0)
                return r;
        while (end < s->status_end) {
                uint64_t next_end;
                if (segment(s, end, &next_end, &clean) != s->run_kind)
                        break;
                if ((r = clean_note(s, clean, end, next_end)) < 0)
                        return r;
                end = next_end;
        }
        s->run_end = end;
        return 0;
}

/* Plans the next item into sl: 1, or 0 at the end. */
static int plan_next(NbdSource *s, NbdSlot *sl)
{
        int r;

        if (s->plan_pos >= s->size)
                return 0;
        if (s->plan_pos >= s->run_end && (r = run_start(s)) < 0)
                return r;
        uint64_t len = s->run_end - s->plan_pos;
        if (s->run_kind == BV_EXTENT_DATA)
                len = MIN(len, (uint64_t)s->read_size);
        *sl = (NbdSlot){ .buf = sl->buf, .kind = s->run_kind, .offset = s->plan_pos, .length = len };
        s->plan_pos += len;
        return 1;
}

static int fill_queue(NbdSource *s)
{
        while (s->count < s->nslots) {
                NbdSlot *sl = &s->slots[(s->head + s->count) % s->nslots];
                int r = plan_next(s, sl);
                if (r <= 0)
                        return r;
                s->count++;
                if (sl->kind != BV_EXTENT_DATA)
                        continue;
                sl->cookie = nbd_aio_pread(s->nbd, sl->buf, sl->length, sl->offset, NBD_NULL_COMPLETION, 0);
                if (sl->cookie < 0)
                        return nbd_errno();
        }
        return 0;
}

static int complete_slot(NbdSource *s, NbdSlot *sl)
{
        int r;

        while ((r = nbd_aio_command_completed(s->nbd, sl->cookie)) == 0)
                if (nbd_poll(s->nbd, -1) < 0)
                        return nbd_errno();
        sl->cookie = 0;
        return r < 0 ? nbd_errno() : 0;
}

static int nbd_next(void *impl, BvExtent *ret)
{
        NbdSource *s = impl;
        int r;

        if (s->error < 0)
                return s->error;
        if (s->held) {
                s->head = (s->head + 1) % s->nslots;
                s->count--;
                s->held = false;
        }
        r = fill_queue(s);
        if (r >= 0 && s->count == 0)
                return 0;
        NbdSlot *sl = &s->slots[s->head];
        if (r >= 0 && sl->kind == BV_EXTENT_DATA)
                r = complete_slot(s, sl);
        if (r < 0) {
                s->error = r;
                return r;
        }
        *ret = (BvExtent){ .kind = sl->kind, .offset = sl->offset, .length = sl->length,
                           .data = sl->kind == BV_EXTENT_DATA ? sl->buf : NULL };
        s->held = true;
        return 1;
}

static int nbd_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        NbdSource *s = impl;

        if (offset > s->size || len > s->size - offset)
                return -ENODATA;
        return nbd_pread(s->nbd, buf, len, offset, 0) < 0 ? nbd_errno() : 0;
}

/* One block status reply's dirty extents, appended to s->changed; at says how far it went. */
typedef struct ChangedFetch {
        NbdSource *s;
        uint64_t at;
        bool seen;
} ChangedFetch;

static int changed_cb(void *userdata, const char *context, uint64_t offset, uint32_t *entries, size_t n, int *error)
{
        ChangedFetch *f = userdata;
        NbdSource *s = f->s;
        uint64_t pos = offset;

        if (strcmp(context, s->map_name) != 0 || f->seen)
                return 0; /* another context, or a second reply for this one (as status_cb) */
        f->seen = true;
        for (size_t i = 0; i + 1 < n && pos < s->size; i += 2) {
                uint64_t end = MIN(pos + entries[i], s->size);
                if (entries[i] == 0) {
                        *error = EPROTO;
                        return -1;
                }
                if ((entries[i + 1] & STATE_DIRTY) &&
                    bv_range_append(&s->changed, &s->n_changed, &s->cap_changed, pos, end - pos) < 0) {
                        *error = ENOMEM;
                        return -1;
                }
                pos = end;
        }
        f->at = pos;
        return 0;
}

/* The dirty ranges of the whole export: the bitmap's block status, a window at a time, asked
 * once (the planner asks again as it goes: this is for prefetching, before the reads). */
static int nbd_changed_ranges(void *impl, const BvByteRange **ret, size_t *ret_count)
{
        NbdSource *s = impl;

        if (!s->dirty.wanted)
                return -EOPNOTSUPP;
        for (uint64_t pos = 0; !s->changed_known && pos < s->size;) {
                ChangedFetch f = { .s = s, .at = pos };
                uint64_t count = MIN(STATUS_WINDOW, s->size - pos);
                if (pos == 0)
                        s->n_changed = 0; /* a failed try before */
                if (nbd_block_status(s->nbd, count, pos, (nbd_extent_callback){ .callback = changed_cb, .user_data = &f },
                                     0) < 0)
                        return nbd_errno();
                if (f.at <= pos)
                        return -EPROTO; /* the server left out the bitmap, or answered nothing */
                pos = f.at;
        }
        s->changed_known = true;
        *ret = s->changed;
        *ret_count = s->n_changed;
        return 0;
}

static uint64_t nbd_size(void *impl)
{
        return ((NbdSource *)impl)->size;
}

static const char *nbd_changed_map(void *impl)
{
        return ((NbdSource *)impl)->map_name;
}

static BvWholeRead *nbd_whole_read(void *impl)
{
        return &((NbdSource *)impl)->wr;
}

static void nbd_free_op(void *impl)
{
        nbd_source_free(impl);
}

static const BvSourceOps nbd_ops = {
        .next = nbd_next, .read_at = nbd_read_at, .size = nbd_size, .changed_map = nbd_changed_map,
        .whole_read = nbd_whole_read, .changed_ranges = nbd_changed_ranges, .free = nbd_free_op,
};

/* Connects to uri, or else over the connected socket *fd (libnbd's once handed over: then *fd is
 * set to -EBADF), asking for the contexts; checks that the dirty bitmap is offered. */
static int nbd_source_connect(NbdSource *s, const char *uri, int *fd)
{
        int64_t size;
        int r;

        s->nbd = nbd_create();
        if (!s->nbd)
                return nbd_errno();
        if (nbd_add_meta_context(s->nbd, ALLOCATION_CONTEXT) < 0 ||
            (s->map_name && nbd_add_meta_context(s->nbd, s->map_name) < 0))
                return nbd_errno();
        if (uri ? nbd_connect_uri(s->nbd, uri) < 0 : nbd_connect_socket(s->nbd, TAKE_FD(*fd)) < 0)
                return nbd_errno();
        size = nbd_get_size(s->nbd);
        if (size < 0)
                return nbd_errno();
        s->size = (uint64_t)size;
        if (s->size > BV_SOURCE_NBD_SIZE_MAX)
                return -EFBIG;
        s->alloc.wanted = nbd_can_meta_context(s->nbd, ALLOCATION_CONTEXT) == 1;
        if (s->map_name) {
                r = nbd_can_meta_context(s->nbd, s->map_name);
                if (r < 0)
                        return nbd_errno();
                if (r == 0)
                        return -ENOMSG;
                s->dirty.wanted = true;
        }
        return 0;
}

/* The export at uri, or over the socket fd (closed in any case) named name. */
static int nbd_open(const char *uri, int fd, const char *name, const BvSourceOptions *opts, BvSource **ret)
{
        _cleanup_close_ int fd_owned = fd;
        BvSourceOptions o = opts ? *opts : (BvSourceOptions){};
        int r;

        o.read_size = o.read_size ?: BV_SOURCE_READ_SIZE;
        o.queue_depth = o.queue_depth ?: BV_SOURCE_QUEUE_DEPTH;
        if (o.read_size > NBD_READ_SIZE_MAX || o.queue_depth > BV_SOURCE_QUEUE_DEPTH_MAX ||
            (o.dirty_bitmap && (!o.dirty_bitmap[0] || strlen(o.dirty_bitmap) > 1023)))
                return -EINVAL;

        _cleanup_(nbd_source_freep) NbdSource *s = calloc(1, sizeof(NbdSource));
        if (!s)
                return -ENOMEM;
        s->read_size = o.read_size;
        if (o.dirty_bitmap && asprintf(&s->map_name, DIRTY_PREFIX "%s", o.dirty_bitmap) < 0) {
                s->map_name = NULL;
                return -ENOMEM;
        }
        r = nbd_source_connect(s, uri, &fd_owned);
        if (r < 0)
                return r;
        s->slots = calloc(o.queue_depth, sizeof(NbdSlot));
        if (!s->slots)
                return -ENOMEM;
        s->nslots = o.queue_depth;
        for (unsigned i = 0; i < s->nslots; i++)
                if (!(s->slots[i].buf = malloc(s->read_size)))
                        return -ENOMEM;
        r = bv_source_new(&nbd_ops, s, BV_SOURCE_NBD, name, ret);
        if (r >= 0)
                TAKE_PTR(s);
        return r;
}

int bv_source_open_nbd(const char *uri, const BvSourceOptions *opts, BvSource **ret)
{
        if (!uri || !ret || !bv_source_is_nbd_uri(uri))
                return -EINVAL;
        return nbd_open(uri, -EBADF, uri, opts, ret);
}

int bv_source_open_nbd_socket(int fd, const char *name, const BvSourceOptions *opts, BvSource **ret)
{
        if (fd < 0 || !name || !ret) {
                safe_close(fd);
                return -EINVAL;
        }
        return nbd_open(NULL, fd, name, opts, ret);
}
