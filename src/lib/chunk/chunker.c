/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The splitter. Input is cut into "pieces": the intersection of a 4 KiB cell of the image
 * (offsets [4096n, 4096(n+1))) with a run of fed data. A piece is complete when its cell is
 * full or when a hole or the end cuts it short; only complete pieces are judged. An all-zero
 * piece extends a ZERO run; any other piece is appended to buf, where the kind's scanner
 * looks for cuts. buf holds
 *
 *   [start, scan)     the pending chunk, scanned, no cut inside
 *   [scan, printed)   hybrid only: blocks printed whose cut decision waits for the prints of
 *                     the blocks after them (at most `ahead` blocks: the look-ahead)
 *   [printed, fill)   bytes not scanned yet (cdc and fixed: only after a restart, when the
 *                     callback took a prefix; printed == scan for them)
 *
 * so that a restart only moves scan back; nothing is copied twice. A hybrid chunk may thus end
 * before the most recently fed bytes: buf then holds the start of the next chunk too.
 * docs/FORMAT.md, "Chunking", is the normative description of the cut rules implemented here.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockscan.h"
#include "chunker.h"
#include "endian.h"
#include "hash.h"
#include "macro.h"

/* Ring of block prints: > back + ahead + 1 = 2 * floor(avg/4K / 2) for every valid avg
 * (avg < max <= 4 MiB, so avg/4K <= 1023). A power of two keeps the index a mask. */
#define HYBRID_RING 1024u
_Static_assert(BV_CHUNK_MAX_LIMIT / BV_BLOCK_SIZE <= HYBRID_RING, "hybrid print ring too small");

/* Chunks gathered at most in one batch (bv_splitter_set_batch). */
#define BATCH_MAX BV_SPLITTER_BATCH_MAX

struct BvSplitter {
        BvChunkerKind kind;
        uint32_t min, avg, max; /* max == avg for fixed */
        uint8_t key[32];

        /* hybrid: cut after a block whose print is below those of the `back` blocks before it
         * and not above those of the `ahead` blocks after it, in the same run of full data
         * blocks, when that run holds at least back + ahead + 1 blocks. prints[c % HYBRID_RING] is the print of cell c for c in [run_first, run_next),
         * at least the last back + ahead + 1 of them. */
        unsigned back, ahead;
        bool in_run; /* false after a barrier: the next full data block starts a run */
        uint64_t run_first, run_next;
        uint64_t prints[HYBRID_RING];

        /* cdc: gear hash of the pending chunk, normalized masks */
        uint64_t gear[256];
        uint64_t mask_small, mask_large;
        uint32_t normal; /* where the looser mask takes over */
        uint64_t hash;

        uint64_t pos; /* where the next feed or hole must start */
        bool finished;
        int error; /* sticky: a failed callback leaves the splitter unusable */

        /* an incomplete piece carried between feeds: image bytes [pos - cell_len, pos) */
        uint8_t cell[BV_BLOCK_SIZE];
        size_t cell_len;

        uint8_t *buf;
        size_t cap, start, scan, printed, fill;
        uint64_t chunk_off; /* image offset of buf[start] */

        /* batches: the chunks cut in buf[keep, start) (at image offset keep_off), of lengths
         * batch_len[0 .. n_batch), wait to be handed to batch_cb together; keep == start when
         * batches are off */
        bv_batch_cb batch_cb;
        void *batch_userdata;
        size_t batch_bytes, keep, n_batch;
        uint64_t keep_off;
        size_t batch_len[BATCH_MAX];
        BvExtent batch_ext[BATCH_MAX];

        /* a pending ZERO or HOLE run (run_kind 0: none) */
        BvExtentKind run_kind;
        uint64_t run_off, run_len;
};

const char *bv_chunker_kind_name(BvChunkerKind k)
{
        switch (k) {
        case BV_CHUNKER_HYBRID:
                return "hybrid";
        case BV_CHUNKER_CDC:
                return "cdc";
        case BV_CHUNKER_FIXED:
                return "fixed";
        }
        return NULL;
}

int bv_chunker_kind_from_name(const char *s, BvChunkerKind *ret)
{
        static const BvChunkerKind kinds[] = { BV_CHUNKER_HYBRID, BV_CHUNKER_CDC, BV_CHUNKER_FIXED };

        if (!s || !ret)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (strcmp(s, bv_chunker_kind_name(kinds[i])) == 0) {
                        *ret = kinds[i];
                        return 0;
                }
        return -EINVAL;
}

int bv_chunker_params_check(const BvChunkerParams *p)
{
        if (!p)
                return -EINVAL;
        switch (p->kind) {
        case BV_CHUNKER_FIXED:
                if (p->avg < BV_BLOCK_SIZE || p->avg > BV_CHUNK_MAX_LIMIT || p->avg % BV_BLOCK_SIZE != 0)
                        return -EINVAL;
                return 0;
        case BV_CHUNKER_HYBRID:
                if (p->min % BV_BLOCK_SIZE != 0 || p->avg % BV_BLOCK_SIZE != 0 ||
                    p->max % BV_BLOCK_SIZE != 0)
                        return -EINVAL;
                /* content cuts are at least avg/2 apart, so min is honoured for them */
                if (p->avg < p->min + 2 * BV_BLOCK_SIZE || p->min > p->avg / 2)
                        return -EINVAL;
                __attribute__((__fallthrough__));
        case BV_CHUNKER_CDC:
                if (p->min < BV_BLOCK_SIZE || p->min >= p->avg || p->avg >= p->max ||
                    p->max > BV_CHUNK_MAX_LIMIT)
                        return -EINVAL;
                return 0;
        }
        return -EINVAL;
}

static int gear_init(BvSplitter *s)
{
        for (unsigned i = 0; i < 256; i++) {
                uint8_t msg[5] = { 'g', 'e', 'a', 'r', (uint8_t)i }, mac[BV_HASH_SIZE];
                int r = bv_hmac_sha256(s->key, sizeof(s->key), msg, sizeof(msg), mac);
                if (r < 0)
                        return r;
                s->gear[i] = get_le64(mac);
        }

        /* normalized chunking, level 2: log2(avg) + 2 bits before the normal point, log2(avg) - 2
         * after it. With the normal point at avg the mean would be ~14% above avg (FastCDC's
         * known bias); three quarters of the way from min to avg centres it (see FORMAT.md). */
        unsigned bits = 63u - (unsigned)__builtin_clzll(s->avg);
        s->normal = s->min + (s->avg - s->min) / 4 * 3;
        s->mask_small = ~0ull << (64 - (bits + 2));
        s->mask_large = ~0ull << (64 - (bits - 2));
        return 0;
}

int bv_splitter_new(const BvChunkerParams *p, BvSplitter **ret)
{
        int r;

        if (!ret)
                return -EINVAL;
        r = bv_chunker_params_check(p);
        if (r < 0)
                return r;

        _cleanup_free_ BvSplitter *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->kind = p->kind;
        s->min = p->min;
        s->avg = p->avg;
        s->max = p->kind == BV_CHUNKER_FIXED ? p->avg : p->max;
        memcpy(s->key, p->key, sizeof(s->key));

        if (s->kind == BV_CHUNKER_HYBRID) {
                unsigned w = s->avg / BV_BLOCK_SIZE; /* 3 .. 1023 */
                s->back = w / 2 - 1;
                s->ahead = w / 2;
        } else if (s->kind == BV_CHUNKER_CDC) {
                r = gear_init(s);
                if (r < 0) {
                        explicit_bzero(s->key, sizeof(s->key));
                        return r;
                }
        }

        /* room for a full pending chunk, the hybrid look-ahead (< avg) and one piece; about
         * twice that so compaction is rare */
        s->cap = 2 * (size_t)s->max + BV_BLOCK_SIZE;
        s->buf = malloc(s->cap);
        if (!s->buf) {
                explicit_bzero(s->key, sizeof(s->key));
                return -ENOMEM;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

int bv_splitter_set_batch(BvSplitter *s, size_t bytes, bv_batch_cb cb, void *userdata)
{
        if (!s || !cb || bytes == 0 || bytes > SIZE_MAX / 2 - 4 * (size_t)s->max || s->pos != 0)
                return -EINVAL;
        /* the batch (< bytes + max), a pending chunk with its look-ahead (< 2 max) and a piece,
         * with room to spare so that compaction is rare */
        size_t cap = bytes + 4 * (size_t)s->max;
        uint8_t *buf = realloc(s->buf, cap);
        if (!buf)
                return -ENOMEM;
        s->buf = buf;
        s->cap = cap;
        s->batch_bytes = bytes;
        s->batch_cb = cb;
        s->batch_userdata = userdata;
        return 0;
}

void bv_splitter_free(BvSplitter *s)
{
        if (!s)
                return;
        free(s->buf);
        explicit_bzero(s, sizeof(*s));
        free(s);
}

/* A restart or a barrier: the hybrid run ends and the gear hash starts over, as at a stream
 * start. Fixed cuts stay on the image's grid: they never depended on content. */
static void cutter_reset(BvSplitter *s)
{
        s->in_run = false;
        s->hash = 0;
}

static uint64_t buf_offset(const BvSplitter *s, size_t pos)
{
        return s->chunk_off + (pos - s->start);
}

/* Is cell c a content cut? Its print must be below every print of the run's cells
 * [c - back, c) and not above any of (c, last]. On random data the first compare fails half
 * the time, so this costs about two compares per block, not back + ahead. */
static bool hybrid_is_cut(const BvSplitter *s, uint64_t c, uint64_t last)
{
        const uint64_t *pr = s->prints;
        uint64_t p = pr[c % HYBRID_RING];
        uint64_t first = c - MIN((uint64_t)s->back, c - s->run_first);

        for (uint64_t j = c + 1; j <= last; j++)
                if (pr[j % HYBRID_RING] < p)
                        return false;
        for (uint64_t j = c; j > first; j--)
                if (pr[(j - 1) % HYBRID_RING] <= p)
                        return false;
        return true;
}

/* Prints the pieces of [printed, fill) one by one and decides the blocks of [scan, printed) as
 * soon as their look-ahead is printed or the run has ended: before a partial piece, or at fill
 * when `flush` says a barrier follows. Returns the length of a chunk ending at scan, or 0. */
static size_t hybrid_scan(BvSplitter *s, bool flush)
{
        for (;;) {
                size_t n = 0;
                if (s->printed < s->fill) {
                        uint64_t off = buf_offset(s, s->printed);
                        n = MIN((size_t)(BV_BLOCK_SIZE - off % BV_BLOCK_SIZE), s->fill - s->printed);
                }
                bool closed = n == 0 ? flush : n < BV_BLOCK_SIZE;

                while (s->scan < s->printed) {
                        uint64_t c = buf_offset(s, s->scan) / BV_BLOCK_SIZE;
                        size_t used = s->scan - s->start;

                        /* A run shorter than back + ahead + 1 blocks (the window) is never cut by
                         * content: to know, wait until the run is that long or has ended. */
                        uint64_t run_len = s->run_next - s->run_first;
                        if (!closed && (c + s->ahead >= s->run_next || run_len < s->back + s->ahead + 1u))
                                break; /* the look-ahead is not printed yet */
                        if (used + BV_BLOCK_SIZE > s->max)
                                return used; /* only after a partial piece at the chunk start */
                        bool cut = run_len >= s->back + s->ahead + 1u &&
                                   hybrid_is_cut(s, c, MIN(c + s->ahead, s->run_next - 1));
                        s->scan += BV_BLOCK_SIZE;
                        if (cut || used + BV_BLOCK_SIZE == s->max)
                                return used + BV_BLOCK_SIZE;
                }
                if (n == 0)
                        return 0;
                if (n < BV_BLOCK_SIZE) {
                        /* a partial piece (scan == printed): never a cut, and a barrier */
                        size_t used = s->scan - s->start;
                        if (used + n > s->max)
                                return used;
                        s->scan = s->printed += n;
                        s->in_run = false;
                        if (used + n == s->max)
                                return used + n;
                        continue;
                }
                uint64_t c = buf_offset(s, s->printed) / BV_BLOCK_SIZE;
                if (!s->in_run) {
                        s->in_run = true;
                        s->run_first = c;
                }
                s->prints[c % HYBRID_RING] = bv_block_print(s->key, s->buf + s->printed);
                s->run_next = c + 1;
                s->printed += BV_BLOCK_SIZE;
        }
}

/* Rolls the gear hash h over buf[*pos, end) and stops just past the first byte after which none
 * of mask's bits is set (a cut: true), or at end (false). */
static inline bool gear_scan(const BvSplitter *s, size_t *pos, size_t end, uint64_t mask, uint64_t *h)
{
        const uint8_t *b = s->buf;
        uint64_t x = *h;

        for (size_t i = *pos; i < end; i++) {
                x = (x << 1) + s->gear[b[i]];
                if (!(x & mask)) {
                        *pos = i + 1;
                        *h = x;
                        return true;
                }
        }
        if (*pos < end)
                *pos = end;
        *h = x;
        return false;
}

/* cdc and fixed: advance s->scan over [scan, fill); return true if a cut falls at s->scan. */

static bool cdc_scan(BvSplitter *s)
{
        size_t used = s->scan - s->start;

        if (used < s->min) { /* cut-point skipping: no hashing below min */
                size_t skip = MIN(s->min - used, s->fill - s->scan);
                s->scan += skip;
                if (used + skip < s->min)
                        return false;
        }

        size_t end = MIN(s->fill, s->start + (size_t)s->max);
        size_t normal = MIN(end, s->start + (size_t)s->normal);
        bool cut = gear_scan(s, &s->scan, normal, s->mask_small, &s->hash) ||
                   gear_scan(s, &s->scan, end, s->mask_large, &s->hash);

        return cut || s->scan - s->start == s->max;
}

static bool fixed_scan(BvSplitter *s)
{
        uint64_t next = (s->chunk_off / s->avg + 1) * s->avg;
        size_t limit = (size_t)(next - s->chunk_off);

        if (s->fill - s->start >= limit) {
                s->scan = s->start + limit;
                return true;
        }
        s->scan = s->fill;
        return false;
}

/* The callback took only the first r bytes of DATA extent e (in buf): cutting starts over
 * after them, and whatever was cut after e is cut again. */
static int splitter_restart(BvSplitter *s, const BvExtent *e, int r)
{
        if ((size_t)r >= e->length || (s->kind == BV_CHUNKER_HYBRID && r % BV_BLOCK_SIZE != 0))
                return -EINVAL;
        s->start = s->scan = s->printed = s->keep = (size_t)((const uint8_t *)e->data - s->buf) + (size_t)r;
        s->chunk_off = s->keep_off = e->offset + (uint64_t)r;
        s->n_batch = 0;
        cutter_reset(s);
        return 0;
}

/* Hands the batch to its callback and applies the answer. */
static int batch_flush(BvSplitter *s)
{
        size_t n = s->n_batch, taken = n, pos = s->keep;
        uint64_t off = s->keep_off;

        if (n == 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                s->batch_ext[i] = (BvExtent){ .kind = BV_EXTENT_DATA, .offset = off, .length = s->batch_len[i],
                                              .data = s->buf + pos };
                pos += s->batch_len[i];
                off += s->batch_len[i];
        }
        int r = s->batch_cb(s->batch_ext, n, &taken, s->batch_userdata);
        if (r < 0)
                return r;
        if (taken < n)
                return r > 0 ? splitter_restart(s, &s->batch_ext[taken], r) : -EINVAL;
        s->n_batch = 0;
        s->keep = s->start;
        s->keep_off = s->chunk_off;
        if (s->keep == s->fill)
                s->start = s->scan = s->printed = s->fill = s->keep = 0;
        return 0;
}

/* Adds the chunk buf[start, start + n) to the batch; a full batch is handed over. */
static int batch_add(BvSplitter *s, size_t n)
{
        s->batch_len[s->n_batch++] = n;
        s->start += n;
        s->chunk_off += n;
        s->hash = 0;
        if (s->n_batch == BATCH_MAX || s->start - s->keep >= s->batch_bytes)
                return batch_flush(s);
        return 0;
}

/* Emits buf[start, start + n) as a DATA extent and applies the callback's answer. */
static int splitter_emit(BvSplitter *s, size_t n, bv_extent_cb cb, void *userdata)
{
        BvExtent e = {
                .kind = BV_EXTENT_DATA,
                .offset = s->chunk_off,
                .length = n,
                .data = s->buf + s->start,
        };
        if (s->batch_cb)
                return batch_add(s, n);
        int r = cb(&e, userdata);
        if (r < 0)
                return r;
        if (r > 0)
                return splitter_restart(s, &e, r);

        s->start += n;
        s->chunk_off += n;
        s->hash = 0;
        if (s->start == s->fill)
                s->start = s->scan = s->printed = s->fill = 0;
        s->keep = s->start;
        return 0;
}

/* Emits the chunks that the scanner finds; `flush`: a barrier follows the pending bytes. */
static int splitter_scan(BvSplitter *s, bool flush, bv_extent_cb cb, void *userdata)
{
        for (;;) {
                size_t cut;
                if (s->kind == BV_CHUNKER_HYBRID)
                        cut = hybrid_scan(s, flush);
                else if (s->scan == s->fill)
                        cut = 0;
                else if (s->kind == BV_CHUNKER_CDC ? cdc_scan(s) : fixed_scan(s))
                        cut = s->scan - s->start;
                else
                        cut = 0;
                if (cut == 0)
                        return 0;
                int r = splitter_emit(s, cut, cb, userdata);
                if (r < 0)
                        return r;
        }
}

/* A forced cut: everything pending is emitted (re-scanning what restarts hand back), and the
 * hybrid run ends. */
static int splitter_flush_data(BvSplitter *s, bv_extent_cb cb, void *userdata)
{
        for (;;) {
                int r = splitter_scan(s, true, cb, userdata);
                if (r < 0)
                        return r;
                if (s->fill == s->start) {
                        r = batch_flush(s); /* may restart: then cut again */
                        if (r < 0)
                                return r;
                        if (s->fill != s->start)
                                continue;
                        cutter_reset(s);
                        return 0;
                }
                r = splitter_emit(s, s->fill - s->start, cb, userdata);
                if (r < 0)
                        return r;
        }
}

static int splitter_flush_run(BvSplitter *s, bv_extent_cb cb, void *userdata)
{
        if (s->run_kind == 0)
                return 0;

        BvExtent e = { .kind = s->run_kind, .offset = s->run_off, .length = s->run_len };
        s->run_kind = 0;
        int r = cb(&e, userdata);
        if (r < 0)
                return r;
        return r > 0 ? -EINVAL : 0; /* a prefix can only be taken of DATA */
}

static int splitter_run(BvSplitter *s, BvExtentKind kind, uint64_t off, uint64_t len, bv_extent_cb cb,
                        void *userdata)
{
        int r = splitter_flush_data(s, cb, userdata);
        if (r < 0)
                return r;
        if (s->run_kind == kind) {
                s->run_len += len; /* pending runs always end where the next one starts */
                return 0;
        }
        r = splitter_flush_run(s, cb, userdata);
        if (r < 0)
                return r;
        s->run_kind = kind;
        s->run_off = off;
        s->run_len = len;
        return 0;
}

/* A complete piece (a full cell, or the part of one bordering a hole or the end). */
static int splitter_piece(BvSplitter *s, uint64_t off, const uint8_t *p, size_t n, bv_extent_cb cb,
                          void *userdata)
{
        if (bv_is_zero(p, n))
                return splitter_run(s, BV_EXTENT_ZERO, off, n, cb, userdata);

        int r = splitter_flush_run(s, cb, userdata);
        if (r >= 0 && s->fill + n > s->cap)
                r = batch_flush(s); /* the batch goes before it would be moved */
        if (r < 0)
                return r;
        if (s->fill == s->keep) {
                s->start = s->scan = s->printed = s->fill = s->keep = 0;
                s->chunk_off = s->keep_off = off;
        } else if (s->fill + n > s->cap) {
                memmove(s->buf, s->buf + s->keep, s->fill - s->keep);
                s->start -= s->keep;
                s->scan -= s->keep;
                s->printed -= s->keep;
                s->fill -= s->keep;
                s->keep = 0;
        }
        memcpy(s->buf + s->fill, p, n);
        s->fill += n;
        if (s->kind != BV_CHUNKER_HYBRID)
                s->printed = s->fill; /* unused: keeps start <= scan <= printed <= fill */
        return splitter_scan(s, false, cb, userdata);
}

/* Judges the carried incomplete piece as complete: a hole or the end follows it. */
static int splitter_end_cell(BvSplitter *s, bv_extent_cb cb, void *userdata)
{
        size_t n = s->cell_len;

        if (n == 0)
                return 0;
        s->cell_len = 0;
        return splitter_piece(s, s->pos - n, s->cell, n, cb, userdata);
}

static int splitter_check(const BvSplitter *s, uint64_t offset, uint64_t len, bv_extent_cb cb)
{
        if (!s || !cb)
                return -EINVAL;
        if (s->error < 0)
                return s->error;
        if (s->finished || offset != s->pos || len > UINT64_MAX - offset)
                return -EINVAL;
        return 0;
}

static int splitter_feed_pieces(BvSplitter *s, const uint8_t *p, size_t len, bv_extent_cb cb,
                                void *userdata)
{
        uint64_t off = s->pos;
        int r;

        if (s->cell_len > 0 || off % BV_BLOCK_SIZE != 0) {
                size_t n = MIN((size_t)(BV_BLOCK_SIZE - off % BV_BLOCK_SIZE), len);
                memcpy(s->cell + s->cell_len, p, n);
                s->cell_len += n;
                p += n;
                len -= n;
                off += n;
                s->pos = off;
                if (off % BV_BLOCK_SIZE != 0)
                        return 0;
                r = splitter_end_cell(s, cb, userdata);
                if (r < 0)
                        return r;
        }
        for (; len >= BV_BLOCK_SIZE; p += BV_BLOCK_SIZE, len -= BV_BLOCK_SIZE, off += BV_BLOCK_SIZE) {
                s->pos = off + BV_BLOCK_SIZE;
                r = splitter_piece(s, off, p, BV_BLOCK_SIZE, cb, userdata);
                if (r < 0)
                        return r;
        }
        memcpy(s->cell, p, len);
        s->cell_len = len;
        s->pos = off + len;
        return 0;
}

int bv_splitter_feed(BvSplitter *s, uint64_t offset, const void *data, size_t len, bv_extent_cb cb,
                     void *userdata)
{
        int r = splitter_check(s, offset, len, cb);
        if (r < 0)
                return r;
        if (len == 0)
                return 0;
        if (!data)
                return -EINVAL;
        r = splitter_feed_pieces(s, data, len, cb, userdata);
        if (r < 0)
                s->error = r;
        return r;
}

int bv_splitter_hole(BvSplitter *s, uint64_t offset, uint64_t len, bv_extent_cb cb, void *userdata)
{
        int r = splitter_check(s, offset, len, cb);
        if (r < 0)
                return r;
        if (len == 0)
                return 0;
        r = splitter_end_cell(s, cb, userdata);
        if (r >= 0)
                r = splitter_run(s, BV_EXTENT_HOLE, offset, len, cb, userdata);
        if (r < 0) {
                s->error = r;
                return r;
        }
        s->pos = offset + len;
        return 0;
}

/* Emits everything pending: the incomplete cell, the data, the zero or hole run. */
static int splitter_flush_all(BvSplitter *s, uint64_t offset, uint64_t len, bv_extent_cb cb, void *userdata)
{
        int r = splitter_check(s, offset, len, cb);
        if (r < 0)
                return r; /* not sticky: the splitter is still usable */
        r = splitter_end_cell(s, cb, userdata);
        if (r >= 0)
                r = splitter_flush_data(s, cb, userdata);
        if (r >= 0)
                r = splitter_flush_run(s, cb, userdata);
        if (r < 0)
                s->error = r;
        return r;
}

int bv_splitter_skip(BvSplitter *s, uint64_t offset, uint64_t len, bv_extent_cb cb, void *userdata)
{
        int r = splitter_flush_all(s, offset, len, cb, userdata);
        if (r < 0)
                return r;
        cutter_reset(s);
        s->pos = offset + len;
        return 0;
}

int bv_splitter_finish(BvSplitter *s, bv_extent_cb cb, void *userdata)
{
        int r = splitter_flush_all(s, s ? s->pos : 0, 0, cb, userdata);
        if (r < 0)
                return r;
        s->finished = true;
        return 0;
}
