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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "endian.h"
#include "fileio.h"
#include "hash.h"
#include "hex.h"
#include "index.h"
#include "macro.h"
#include "random.h"
#include "timeutil.h"

#define IDX_MAGIC "BLKVIDX1"
#define IDX_VERSION 1
#define IDX_HEADER_SIZE 128
#define IDX_ENTRY_SIZE 48
#define IDX_PACK_SIZE BV_PACK_ID_SIZE
#define IDX_BLOOM_BLOCK 64
#define IDX_BLOOM_BITS_PER_ENTRY 12
#define IDX_BLOOM_PROBES 8
#define IDX_BLOOM_MAX_PROBES 14
#define IDX_FANOUT_MAX_BITS 28
#define IDX_BUCKET_TARGET 32
#define IDX_NAME_LEN 20 /* 16 hex digits + ".idx" */
#define IDX_MERGE_BATCH 1024
#define IDX_WRITE_BATCH 21845 /* entries: just under 1 MiB */
#define IDX_HASH_BLOCK (1024 * 1024)
#define IDX_PREAD_BUCKET 128 /* entries; buckets average 16-32 */

/* Header fields (byte offsets). */
enum {
        H_MAGIC = 0,
        H_VERSION = 8,
        H_FLAGS = 12,
        H_COUNT = 16,
        H_GENERATION = 24,
        H_PACK_COUNT = 32,
        H_FANOUT_BITS = 36,
        H_BLOOM_PROBES = 37,
        H_PACKS_OFF = 40,
        H_FANOUT_OFF = 48,
        H_BLOOM_OFF = 56,
        H_BLOOM_LEN = 64,
        H_ENTRIES_OFF = 72,
        H_FILE_SIZE = 80,
        H_BODY_SHA = 88,
        H_CHECKSUM = 120,
};

/* Entry fields. */
enum {
        E_ID = 0,
        E_PACK = 32,
        E_OFFSET = 36,
        E_LENGTH = 40,
        E_TYPE = 44,
        E_MEMBER = 45,
};

typedef struct Segment {
        char name[IDX_NAME_LEN + 1];
        int fd;
        const uint8_t *map;
        size_t size;
        uint64_t count;
        uint64_t generation;
        uint32_t npacks;
        unsigned fanout_bits;
        unsigned probes;
        const uint8_t *packs;
        const uint8_t *fanout;
        const uint8_t *bloom;
        uint64_t bloom_len;
        const uint8_t *entries;
        uint64_t entries_off;
} Segment;

typedef struct SegArray {
        size_t n;
        Segment *s[]; /* newest first */
} SegArray;

#define PENDING_CLAIMED UINT32_MAX

typedef struct PendingSlot {
        uint8_t id[BV_ID_SIZE];
        uint32_t pack; /* position in Pending.packs, or PENDING_CLAIMED */
        uint32_t offset;
        uint32_t length;
        uint8_t type;
        uint8_t member;
        uint8_t used;
} PendingSlot;

typedef struct Pending {
        PendingSlot *slots;
        size_t cap; /* a power of two, or 0 */
        size_t used;
        size_t located; /* read without the lock by bv_index_pending() and lookups */
        uint8_t (*packs)[IDX_PACK_SIZE];
        size_t npacks;
        size_t packs_cap;
} Pending;

struct BvIndex {
        int dirfd;
        pthread_mutex_t update_mutex;
        pthread_mutex_t pending_mutex;
        pthread_rwlock_t seg_lock;
        SegArray *segs;
        uint64_t max_generation;
        Pending pending;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static bool range_ok(uint64_t off, uint64_t len, uint64_t size)
{
        return off <= size && len <= size - off;
}

static uint64_t get_be64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = (v << 8) | p[i];
        return v;
}

static int id_cmp(const uint8_t *a, const uint8_t *b)
{
        return memcmp(a, b, BV_ID_SIZE);
}

static uint64_t bucket_of(const uint8_t id[BV_ID_SIZE], unsigned bits)
{
        return bits ? get_be64(id) >> (64 - bits) : 0;
}

static void header_checksum(const uint8_t *hdr, uint8_t out[8])
{
        uint8_t sha[BV_HASH_SIZE];

        bv_sha256(hdr, H_CHECKSUM, sha);
        memcpy(out, sha, 8);
}

static bool segment_name_valid(const char *name)
{
        char hex[17];
        uint8_t raw[8];

        if (strlen(name) != IDX_NAME_LEN || strcmp(name + 16, ".idx") != 0)
                return false;
        memcpy(hex, name, 16);
        hex[16] = '\0';
        return bv_hex_decode(hex, raw, sizeof(raw)) == 0;
}

/* ---- Bloom filter: 64-byte blocks, probes taken from id bytes 8..31 ------------------------ */

static uint64_t bloom_block(const uint8_t id[BV_ID_SIZE], uint64_t nblocks)
{
        return (uint64_t)(((unsigned __int128)get_le64(id + 8) * nblocks) >> 64);
}

/* Probe i is the 9-bit little-endian field starting at bit 9*i of id[16..31]. */
static unsigned bloom_bit(const uint8_t id[BV_ID_SIZE], unsigned i)
{
        unsigned bit = 9 * i, byte = 16 + bit / 8;
        unsigned v = id[byte] | ((unsigned)id[byte + 1] << 8);

        return (v >> (bit % 8)) & 511;
}

static bool bloom_test(const uint8_t *bloom, uint64_t len, unsigned probes, const uint8_t id[BV_ID_SIZE])
{
        const uint8_t *b = bloom + IDX_BLOOM_BLOCK * bloom_block(id, len / IDX_BLOOM_BLOCK);

        for (unsigned i = 0; i < probes; i++) {
                unsigned bit = bloom_bit(id, i);
                if (!(b[bit / 8] & (1u << (bit % 8))))
                        return false;
        }
        return true;
}

static void bloom_set(uint8_t *bloom, uint64_t len, unsigned probes, const uint8_t id[BV_ID_SIZE])
{
        uint8_t *b = bloom + IDX_BLOOM_BLOCK * bloom_block(id, len / IDX_BLOOM_BLOCK);

        for (unsigned i = 0; i < probes; i++) {
                unsigned bit = bloom_bit(id, i);
                b[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
}

/* ---- reading segments --------------------------------------------------------------------- */

/* Validates the header of a mapped segment and fills the section pointers of s. */
static int segment_parse(const uint8_t *p, uint64_t size, Segment *s)
{
        uint8_t sum[8];
        uint64_t count, packs_off, fanout_off, bloom_off, bloom_len, entries_off, nbuckets;
        uint32_t npacks;
        unsigned bits, probes;

        if (size < IDX_HEADER_SIZE || memcmp(p + H_MAGIC, IDX_MAGIC, 8) != 0)
                return -EBADMSG;
        if (get_le32(p + H_VERSION) != IDX_VERSION)
                return -EPROTONOSUPPORT;
        header_checksum(p, sum);
        if (memcmp(sum, p + H_CHECKSUM, sizeof(sum)) != 0)
                return -EBADMSG;
        if (get_le32(p + H_FLAGS) != 0)
                return -EPROTONOSUPPORT;

        count = get_le64(p + H_COUNT);
        npacks = get_le32(p + H_PACK_COUNT);
        bits = p[H_FANOUT_BITS];
        probes = p[H_BLOOM_PROBES];
        packs_off = get_le64(p + H_PACKS_OFF);
        fanout_off = get_le64(p + H_FANOUT_OFF);
        bloom_off = get_le64(p + H_BLOOM_OFF);
        bloom_len = get_le64(p + H_BLOOM_LEN);
        entries_off = get_le64(p + H_ENTRIES_OFF);
        if (count > UINT32_MAX || bits > IDX_FANOUT_MAX_BITS || probes < 1 || probes > IDX_BLOOM_MAX_PROBES)
                return -EBADMSG;
        if (get_le64(p + H_FILE_SIZE) != size)
                return -EBADMSG;
        nbuckets = UINT64_C(1) << bits;

        /* Sections in order, each inside the file, none overlapping the header or another. */
        if (packs_off < IDX_HEADER_SIZE || !range_ok(packs_off, (uint64_t)npacks * IDX_PACK_SIZE, size))
                return -EBADMSG;
        if (fanout_off < packs_off + (uint64_t)npacks * IDX_PACK_SIZE || !range_ok(fanout_off, 4 * nbuckets, size))
                return -EBADMSG;
        if (bloom_off < fanout_off + 4 * nbuckets || !range_ok(bloom_off, bloom_len, size) ||
            bloom_len % IDX_BLOOM_BLOCK != 0 || (count > 0 && bloom_len == 0))
                return -EBADMSG;
        if (entries_off < bloom_off + bloom_len || !range_ok(entries_off, count * IDX_ENTRY_SIZE, size))
                return -EBADMSG;
        if (get_le32(p + fanout_off + 4 * (nbuckets - 1)) != count)
                return -EBADMSG;

        s->map = p;
        s->size = size;
        s->count = count;
        s->generation = get_le64(p + H_GENERATION);
        s->npacks = npacks;
        s->fanout_bits = bits;
        s->probes = probes;
        s->packs = p + packs_off;
        s->fanout = p + fanout_off;
        s->bloom = p + bloom_off;
        s->bloom_len = bloom_len;
        s->entries = p + entries_off;
        s->entries_off = entries_off;
        return 0;
}

static void segment_free(Segment *s)
{
        if (!s)
                return;
        if (s->map)
                (void)munmap((void *)s->map, s->size);
        safe_close(s->fd);
        free(s);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Segment, segment_free);

static int segment_open(int dirfd, const char *name, Segment **ret)
{
        _cleanup_(segment_freep) Segment *s = NULL;
        struct stat st;
        void *map;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (s->fd < 0)
                return negative_errno();
        if (fstat(s->fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size < IDX_HEADER_SIZE)
                return -EBADMSG;
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, s->fd, 0);
        if (map == MAP_FAILED)
                return negative_errno();
        s->map = map;
        s->size = (size_t)st.st_size;
        r = segment_parse(map, (uint64_t)st.st_size, s);
        if (r < 0)
                return r;
        /* Lookups touch a cache line or two here and there: no readahead. */
        (void)madvise(map, s->size, MADV_RANDOM);
        snprintf(s->name, sizeof(s->name), "%s", name);
        *ret = TAKE_PTR(s);
        return 0;
}

static void entry_location(const Segment *s, const uint8_t *e, BvLocation *ret)
{
        uint32_t pack = get_le32(e + E_PACK);

        memcpy(ret->pack_id, s->packs + (size_t)pack * IDX_PACK_SIZE, IDX_PACK_SIZE);
        ret->offset = get_le32(e + E_OFFSET);
        ret->length = get_le32(e + E_LENGTH);
        ret->type = e[E_TYPE];
        ret->member = e[E_MEMBER];
}

/* Position of id among the n sorted entries at base, probing position first first, or -1. */
static int64_t entries_search(const uint8_t *base, uint64_t n, uint64_t first, const uint8_t id[BV_ID_SIZE])
{
        uint64_t lo = 0, hi = n, mid = first;

        while (lo < hi) {
                int c = id_cmp(base + mid * IDX_ENTRY_SIZE, id);

                if (c == 0)
                        return (int64_t)mid;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
                mid = lo + (hi - lo) / 2;
        }
        return -1;
}

/* The filter, the fan-out bucket, one interpolation probe (ids are uniform), then binary
 * search. With via_pread the bucket is read with pread instead of through the mapping: a
 * writer probing millions of new ids then maps only filters and fan-out tables, instead of
 * every entry page a false positive's fault (and the kernel's fault-around) touches. */
static int segment_find(const Segment *s, const uint8_t id[BV_ID_SIZE], bool via_pread, BvLocation *ret)
{
        uint8_t buf[IDX_PREAD_BUCKET * IDX_ENTRY_SIZE];
        const uint8_t *base, *e;
        uint64_t b, lo, hi, frac;
        int64_t i;

        if (s->count == 0 || !bloom_test(s->bloom, s->bloom_len, s->probes, id))
                return -ENOENT;

        b = bucket_of(id, s->fanout_bits);
        lo = b > 0 ? get_le32(s->fanout + 4 * (b - 1)) : 0;
        hi = get_le32(s->fanout + 4 * b);
        if (lo > hi || hi > s->count)
                return -EBADMSG;
        frac = (get_be64(id) << s->fanout_bits) >> 32;

        base = s->entries + lo * IDX_ENTRY_SIZE;
        if (via_pread && hi - lo <= IDX_PREAD_BUCKET) {
                size_t len = (size_t)(hi - lo) * IDX_ENTRY_SIZE;
                ssize_t k = bv_pread_all(s->fd, buf, len, s->entries_off + lo * IDX_ENTRY_SIZE);

                if (k < 0)
                        return (int)k;
                if ((size_t)k != len)
                        return -EBADMSG;
                base = buf;
        }
        i = entries_search(base, hi - lo, ((hi - lo) * frac) >> 32, id);
        if (i < 0)
                return -ENOENT;
        e = base + i * IDX_ENTRY_SIZE;
        if (get_le32(e + E_PACK) >= s->npacks)
                return -EBADMSG;
        entry_location(s, e, ret);
        return 0;
}

static void segarray_sort(SegArray *a);

static SegArray *segarray_new(size_t n)
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
static void index_publish(BvIndex *x, SegArray *next)
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

static int segs_find(BvIndex *x, const uint8_t id[BV_ID_SIZE], bool via_pread, BvLocation *ret)
{
        int r = -ENOENT;

        pthread_rwlock_rdlock(&x->seg_lock);
        for (size_t i = 0; i < x->segs->n && r == -ENOENT; i++)
                r = segment_find(x->segs->s[i], id, via_pread, ret);
        pthread_rwlock_unlock(&x->seg_lock);
        return r;
}

/* ---- the pending table: open addressing, linear probing, backward-shift deletion ---------- */

static size_t pending_home(const Pending *t, const uint8_t id[BV_ID_SIZE])
{
        return (size_t)(((unsigned __int128)get_le64(id) * t->cap) >> 64);
}

static size_t pending_next(const Pending *t, size_t i)
{
        return i + 1 == t->cap ? 0 : i + 1;
}

/* Grows by half: between 64 and 96 bytes per entry at a load of 1/2 to 3/4. */
static size_t pending_grown(size_t cap)
{
        return cap < 1024 ? 1024 : cap + cap / 2;
}

/* Slots come straight from mmap: a flushed batch's table goes back to the system at once. */
static PendingSlot *pending_alloc(size_t cap)
{
        void *p = mmap(NULL, cap * sizeof(PendingSlot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        return p == MAP_FAILED ? NULL : p;
}

static void pending_release(PendingSlot *slots, size_t cap)
{
        if (slots)
                (void)munmap(slots, cap * sizeof(PendingSlot));
}

static PendingSlot *pending_find(const Pending *t, const uint8_t id[BV_ID_SIZE])
{
        if (t->cap == 0)
                return NULL;
        for (size_t i = pending_home(t, id);; i = pending_next(t, i)) {
                PendingSlot *sl = &t->slots[i];
                if (!sl->used)
                        return NULL;
                if (id_cmp(sl->id, id) == 0)
                        return sl;
        }
}

static void pending_put(Pending *t, const PendingSlot *src)
{
        size_t i = pending_home(t, src->id);

        while (t->slots[i].used)
                i = pending_next(t, i);
        t->slots[i] = *src;
        t->slots[i].used = 1;
        t->used++;
}

/* Rehashes the table into capacity cap (above its size). */
static int pending_rebuild(Pending *t, size_t cap)
{
        PendingSlot *old = t->slots;
        size_t old_cap = t->cap;

        t->slots = pending_alloc(cap);
        if (!t->slots) {
                t->slots = old;
                return -ENOMEM;
        }
        t->cap = cap;
        t->used = 0;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i].used)
                        pending_put(t, &old[i]);
        pending_release(old, old_cap);
        return 0;
}

static PendingSlot *pending_insert(Pending *t, const uint8_t id[BV_ID_SIZE])
{
        PendingSlot sl = { .pack = PENDING_CLAIMED };

        if ((t->used + 1) * 4 > t->cap * 3 && pending_rebuild(t, pending_grown(t->cap)) < 0)
                return NULL;
        memcpy(sl.id, id, BV_ID_SIZE);
        pending_put(t, &sl);
        return pending_find(t, id);
}

static void pending_remove(Pending *t, PendingSlot *sl)
{
        size_t i = (size_t)(sl - t->slots), j = i;

        t->slots[i].used = 0;
        for (;;) {
                size_t k;

                j = pending_next(t, j);
                if (!t->slots[j].used)
                        break;
                k = pending_home(t, t->slots[j].id);
                /* The slot at j may move to the hole at i unless its home lies in (i, j]. */
                if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
                        t->slots[i] = t->slots[j];
                        t->slots[j].used = 0;
                        i = j;
                }
        }
        t->used--;
}

static void pending_set_located(Pending *t, size_t n)
{
        __atomic_store_n(&t->located, n, __ATOMIC_RELEASE);
}

/* Forgets every located entry (they were flushed) and the pack list; claims stay. */
static void pending_drop_located(Pending *t)
{
        size_t want = 1024;

        /* A removal may shift a later slot into i: look at i again before moving on. */
        for (size_t i = 0; i < t->cap;)
                if (t->slots[i].used && t->slots[i].pack != PENDING_CLAIMED)
                        pending_remove(t, &t->slots[i]);
                else
                        i++;
        while ((t->used + 1) * 4 > want * 3)
                want = pending_grown(want);
        if (t->cap > want)
                (void)pending_rebuild(t, want); /* only shrinks: keeping the big table is fine */
        t->npacks = 0;
        pending_set_located(t, 0);
}

/* ---- open, free, refresh -------------------------------------------------------------------- */

/* Lists the segment files of the directory into a new array, reusing the segments of known
 * ones. *ret_vanished tells whether a segment of known disappeared (another process compacted:
 * scan again to be sure to see its output). */
static int index_scan(BvIndex *x, const SegArray *known, SegArray **ret, bool *ret_vanished)
{
        _cleanup_free_ SegArray *a = NULL;
        size_t cap = 16, found = 0;
        struct dirent *de;
        DIR *d;
        int r;

        r = bv_opendir_at(x->dirfd, ".", &d);
        if (r < 0)
                return r;
        a = segarray_new(cap);
        if (!a) {
                closedir(d);
                return -ENOMEM;
        }
        a->n = 0;
        while ((errno = 0, de = readdir(d))) {
                Segment *s = NULL;

                if (!segment_name_valid(de->d_name))
                        continue;
                for (size_t i = 0; known && i < known->n && !s; i++)
                        if (strcmp(known->s[i]->name, de->d_name) == 0)
                                s = known->s[i];
                if (s)
                        found++;
                else {
                        r = segment_open(x->dirfd, de->d_name, &s);
                        if (r == -ENOENT) {
                                r = 0; /* removed by a compaction meanwhile */
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
        if (r == 0 && errno != 0)
                r = negative_errno();
        closedir(d);
        if (r < 0) {
                for (size_t i = 0; i < a->n; i++)
                        if (!segarray_contains(known, a->s[i]))
                                segment_free(a->s[i]);
                return r;
        }
        segarray_sort(a);
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
        pthread_rwlock_destroy(&x->seg_lock);
        pthread_mutex_destroy(&x->pending_mutex);
        pthread_mutex_destroy(&x->update_mutex);
        safe_close(x->dirfd);
        free(x);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvIndex, bv_index_free);

int bv_index_open(int index_dirfd, BvIndex **ret)
{
        _cleanup_(bv_index_freep) BvIndex *x = NULL;
        pthread_rwlockattr_t attr;
        int r;

        if (index_dirfd < 0 || !ret)
                return -EINVAL;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->dirfd = fcntl(index_dirfd, F_DUPFD_CLOEXEC, 3);
        if (x->dirfd < 0)
                return negative_errno();
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

int bv_index_refresh(BvIndex *x)
{
        BV_LOCK_GUARD(&x->update_mutex);
        return index_rescan(x);
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
        if (t->npacks == t->packs_cap) {
                size_t cap = t->packs_cap ? t->packs_cap * 2 : 64;
                void *p = realloc(t->packs, cap * IDX_PACK_SIZE);
                if (!p)
                        return -ENOMEM;
                t->packs = p;
                t->packs_cap = cap;
        }
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

/* ---- writing segments ---------------------------------------------------------------------- */

typedef struct SegWriter {
        int dirfd;
        int fd;
        char tmpname[64];
        uint8_t *map; /* header, pack table, fan-out and filter: [0, entries_off) */
        size_t map_size;
        uint8_t *buf; /* entries waiting to be written */
        size_t nbuf;
        uint64_t max_count;
        uint64_t count;
        uint32_t npacks;
        unsigned fanout_bits;
        uint64_t fanout_off;
        uint64_t bloom_off;
        uint64_t bloom_len;
        uint64_t entries_off;
} SegWriter;

static void seg_writer_abort(SegWriter *w)
{
        if (w->map)
                (void)munmap(w->map, w->map_size);
        w->map = NULL;
        free(w->buf);
        w->buf = NULL;
        if (w->fd >= 0)
                bv_tmpfile_discard(w->dirfd, w->tmpname);
        w->fd = safe_close(w->fd);
}

/* Lays out a segment for at most max_count entries (the fan-out and the filter are sized for
 * it; entries come last so the file is cut to the final count). The sections before the
 * entries are mapped and filled in place; entries stream out through a buffer, so writing
 * even a compacted segment of a 10 TB repository keeps little in memory. */
static int seg_writer_begin(SegWriter *w, int dirfd, uint64_t max_count, const uint8_t (*packs)[IDX_PACK_SIZE],
                            uint32_t npacks)
{
        uint64_t size;
        void *map;
        int r;

        *w = (SegWriter){ .dirfd = dirfd, .fd = -EBADF, .max_count = max_count, .npacks = npacks };
        if (max_count > UINT32_MAX)
                return -E2BIG;
        while (w->fanout_bits < IDX_FANOUT_MAX_BITS && (max_count >> w->fanout_bits) > IDX_BUCKET_TARGET)
                w->fanout_bits++;
        w->fanout_off = IDX_HEADER_SIZE + (uint64_t)npacks * IDX_PACK_SIZE;
        w->bloom_off = ALIGN_UP(w->fanout_off + (UINT64_C(4) << w->fanout_bits), (uint64_t)IDX_BLOOM_BLOCK);
        w->bloom_len = DIV_ROUND_UP(max_count * IDX_BLOOM_BITS_PER_ENTRY, 8 * IDX_BLOOM_BLOCK) * IDX_BLOOM_BLOCK;
        w->entries_off = w->bloom_off + w->bloom_len;
        size = w->entries_off + max_count * IDX_ENTRY_SIZE;

        w->buf = malloc(IDX_WRITE_BATCH * IDX_ENTRY_SIZE);
        if (!w->buf)
                return -ENOMEM;
        r = bv_tmpfile_open(dirfd, &w->fd, w->tmpname);
        if (r < 0) {
                w->fd = -EBADF;
                seg_writer_abort(w);
                return r;
        }
        /* Allocate every block now: a full disk is -ENOSPC here, not SIGBUS in the mapping. */
        r = posix_fallocate(w->fd, 0, (off_t)size);
        if (r != 0) {
                seg_writer_abort(w);
                return -r;
        }
        map = mmap(NULL, w->entries_off, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
        if (map == MAP_FAILED) {
                r = negative_errno();
                seg_writer_abort(w);
                return r;
        }
        w->map = map;
        w->map_size = w->entries_off;
        if (npacks > 0)
                memcpy(w->map + IDX_HEADER_SIZE, packs, (size_t)npacks * IDX_PACK_SIZE);
        return 0;
}

static int seg_writer_drain(SegWriter *w)
{
        uint64_t first = w->count - w->nbuf;
        int r;

        if (w->nbuf == 0)
                return 0;
        r = bv_pwrite_all(w->fd, w->buf, w->nbuf * IDX_ENTRY_SIZE, w->entries_off + first * IDX_ENTRY_SIZE);
        w->nbuf = 0;
        return r;
}

/* Appends one entry; ids must come in strictly increasing order. */
static int seg_writer_add(SegWriter *w, const uint8_t id[BV_ID_SIZE], uint32_t pack, uint32_t offset,
                          uint32_t length, uint8_t type, uint8_t member)
{
        uint8_t *e = w->buf + w->nbuf * IDX_ENTRY_SIZE;
        uint8_t *f = w->map + w->fanout_off + 4 * bucket_of(id, w->fanout_bits);

        memset(e, 0, IDX_ENTRY_SIZE);
        memcpy(e + E_ID, id, BV_ID_SIZE);
        put_le32(e + E_PACK, pack);
        put_le32(e + E_OFFSET, offset);
        put_le32(e + E_LENGTH, length);
        e[E_TYPE] = type;
        e[E_MEMBER] = member;
        put_le32(f, get_le32(f) + 1);
        bloom_set(w->map + w->bloom_off, w->bloom_len, IDX_BLOOM_PROBES, id);
        w->count++;
        if (++w->nbuf == IDX_WRITE_BATCH)
                return seg_writer_drain(w);
        return 0;
}

/* The body checksum: SHA-256 over the SHA-256 digests of consecutive 1 MiB blocks of the
 * file after the header (docs/FORMAT.md). Read back with pread: nothing stays mapped. */
static int segment_body_sha(int fd, uint64_t size, uint8_t out[BV_HASH_SIZE])
{
        uint64_t body = size - IDX_HEADER_SIZE, nblocks = DIV_ROUND_UP(body, (uint64_t)IDX_HASH_BLOCK);
        _cleanup_free_ uint8_t *buf = malloc(IDX_HASH_BLOCK);
        _cleanup_free_ uint8_t *digests = malloc(MAX(nblocks, (uint64_t)1) * BV_HASH_SIZE);

        if (!buf || !digests)
                return -ENOMEM;
        for (uint64_t i = 0; i < nblocks; i++) {
                size_t len = (size_t)MIN(body - i * IDX_HASH_BLOCK, (uint64_t)IDX_HASH_BLOCK);
                ssize_t k = bv_pread_all(fd, buf, len, IDX_HEADER_SIZE + i * IDX_HASH_BLOCK);

                if (k < 0)
                        return (int)k;
                if ((size_t)k != len)
                        return -EBADMSG;
                bv_sha256(buf, len, digests + i * BV_HASH_SIZE);
        }
        bv_sha256(digests, nblocks * BV_HASH_SIZE, out);
        return 0;
}

/* Completes the fan-out and the header, cuts the file to size, links it durably under a new
 * random name and opens it. */
static int seg_writer_finish(SegWriter *w, uint64_t generation, Segment **ret)
{
        uint8_t *h = w->map, raw[8];
        uint64_t size = w->entries_off + w->count * IDX_ENTRY_SIZE, sum = 0;
        char name[IDX_NAME_LEN + 1];
        int r;

        r = seg_writer_drain(w);
        if (r >= 0 && w->count < w->max_count && ftruncate(w->fd, (off_t)size) < 0)
                r = negative_errno();
        if (r < 0) {
                seg_writer_abort(w);
                return r;
        }
        for (uint64_t b = 0; b < (UINT64_C(1) << w->fanout_bits); b++) {
                uint8_t *f = w->map + w->fanout_off + 4 * b;
                sum += get_le32(f);
                put_le32(f, (uint32_t)sum);
        }
        memcpy(h + H_MAGIC, IDX_MAGIC, 8);
        put_le32(h + H_VERSION, IDX_VERSION);
        put_le32(h + H_FLAGS, 0);
        put_le64(h + H_COUNT, w->count);
        put_le64(h + H_GENERATION, generation);
        put_le32(h + H_PACK_COUNT, w->npacks);
        h[H_FANOUT_BITS] = (uint8_t)w->fanout_bits;
        h[H_BLOOM_PROBES] = IDX_BLOOM_PROBES;
        put_le64(h + H_PACKS_OFF, IDX_HEADER_SIZE);
        put_le64(h + H_FANOUT_OFF, w->fanout_off);
        put_le64(h + H_BLOOM_OFF, w->bloom_off);
        put_le64(h + H_BLOOM_LEN, w->bloom_len);
        put_le64(h + H_ENTRIES_OFF, w->entries_off);
        put_le64(h + H_FILE_SIZE, size);
        r = segment_body_sha(w->fd, size, h + H_BODY_SHA);
        if (r < 0) {
                seg_writer_abort(w);
                return r;
        }
        header_checksum(h, h + H_CHECKSUM);
        (void)munmap(w->map, w->map_size);
        w->map = NULL;
        free(w->buf);
        w->buf = NULL;

        r = bv_random_bytes(raw, sizeof(raw));
        if (r < 0) {
                seg_writer_abort(w);
                return r;
        }
        bv_hex_encode(raw, sizeof(raw), name);
        strcpy(name + 16, ".idx");
        r = bv_tmpfile_link(w->dirfd, w->fd, w->tmpname, name, false);
        w->fd = safe_close(w->fd);
        if (r < 0)
                return r;
        return segment_open(w->dirfd, name, ret);
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
        order = malloc(t->located * sizeof(uint32_t));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < t->cap; i++)
                if (t->slots[i].used && t->slots[i].pack != PENDING_CLAIMED)
                        order[n++] = (uint32_t)i;
        qsort_r(order, n, sizeof(uint32_t), slot_cmp, t->slots);

        r = seg_writer_begin(&w, x->dirfd, n, (const uint8_t(*)[IDX_PACK_SIZE])t->packs, (uint32_t)t->npacks);
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

/* ---- compaction: a streaming k-way merge --------------------------------------------------- */

typedef struct Cursor {
        const Segment *seg;
        unsigned rank; /* 0 = newest: wins among equal ids */
        uint32_t *remap; /* the segment's pack positions → merged pack positions */
        uint8_t *buf;
        size_t nbuf, pos;
        uint64_t next; /* next entry to read from the file */
        const uint8_t *cur; /* current entry, NULL at the end */
} Cursor;

/* Moves to the next entry, reading the file in batches (the mapping is left alone, so a merge
 * does not fill this process's memory with pages it reads once). */
static int cursor_advance(Cursor *c)
{
        const uint8_t *prev = c->cur;

        if (c->pos + 1 < c->nbuf) {
                c->cur = c->buf + ++c->pos * IDX_ENTRY_SIZE;
        } else if (c->next < c->seg->count) {
                size_t n = (size_t)MIN(c->seg->count - c->next, (uint64_t)IDX_MERGE_BATCH);
                uint8_t last[BV_ID_SIZE];
                ssize_t k;

                if (prev)
                        memcpy(last, prev, BV_ID_SIZE);
                k = bv_pread_all(c->seg->fd, c->buf, n * IDX_ENTRY_SIZE,
                                 c->seg->entries_off + c->next * IDX_ENTRY_SIZE);
                if (k < 0)
                        return (int)k;
                if ((size_t)k != n * IDX_ENTRY_SIZE)
                        return -EBADMSG;
                c->next += n;
                c->nbuf = n;
                c->pos = 0;
                c->cur = c->buf;
                if (prev && id_cmp(last, c->cur) >= 0)
                        return -EBADMSG;
                prev = NULL;
        } else {
                c->cur = NULL;
                return 0;
        }
        if (prev && id_cmp(prev, c->cur) >= 0)
                return -EBADMSG;
        if (get_le32(c->cur + E_PACK) >= c->seg->npacks)
                return -EBADMSG;
        return 0;
}

static bool cursor_less(const Cursor *a, const Cursor *b)
{
        int c = id_cmp(a->cur, b->cur);

        return c < 0 || (c == 0 && a->rank < b->rank);
}

static void heap_sift_down(Cursor **h, size_t n, size_t i)
{
        for (;;) {
                size_t l = 2 * i + 1, m = i;
                Cursor *tmp;

                if (l < n && cursor_less(h[l], h[m]))
                        m = l;
                if (l + 1 < n && cursor_less(h[l + 1], h[m]))
                        m = l + 1;
                if (m == i)
                        return;
                tmp = h[i];
                h[i] = h[m];
                h[m] = tmp;
                i = m;
        }
}

static int pack_cmp(const void *a, const void *b)
{
        return memcmp(a, b, IDX_PACK_SIZE);
}

/* The sorted union of the segments' pack tables, and each cursor's remapping into it. */
static int merge_packs(Cursor *cur, size_t k, uint8_t (**ret_packs)[IDX_PACK_SIZE], uint32_t *ret_n)
{
        _cleanup_free_ uint8_t(*packs)[IDX_PACK_SIZE] = NULL;
        uint64_t total = 0;
        size_t n = 0;

        for (size_t i = 0; i < k; i++)
                total += cur[i].seg->npacks;
        if (total >= UINT32_MAX)
                return -E2BIG;
        packs = malloc(MAX(total, (uint64_t)1) * IDX_PACK_SIZE);
        if (!packs)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                memcpy(packs[n], cur[i].seg->packs, (size_t)cur[i].seg->npacks * IDX_PACK_SIZE);
                n += cur[i].seg->npacks;
        }
        qsort(packs, n, IDX_PACK_SIZE, pack_cmp);
        total = n;
        n = 0;
        for (size_t i = 0; i < total; i++)
                if (n == 0 || memcmp(packs[n - 1], packs[i], IDX_PACK_SIZE) != 0)
                        memmove(packs[n++], packs[i], IDX_PACK_SIZE);

        for (size_t i = 0; i < k; i++) {
                const Segment *s = cur[i].seg;

                cur[i].remap = malloc(MAX(s->npacks, 1u) * sizeof(uint32_t));
                if (!cur[i].remap)
                        return -ENOMEM;
                for (uint32_t j = 0; j < s->npacks; j++) {
                        const uint8_t(*p)[IDX_PACK_SIZE] =
                                bsearch(s->packs + (size_t)j * IDX_PACK_SIZE, packs, n, IDX_PACK_SIZE, pack_cmp);
                        cur[i].remap[j] = (uint32_t)(p - packs);
                }
        }
        *ret_packs = TAKE_PTR(packs);
        *ret_n = (uint32_t)n;
        return 0;
}

static int merge_run(Cursor *cur, size_t k, SegWriter *w)
{
        _cleanup_free_ Cursor **heap = calloc(k, sizeof(Cursor *));
        uint8_t last[BV_ID_SIZE];
        bool have_last = false;
        size_t n = 0;
        int r;

        if (!heap)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                r = cursor_advance(&cur[i]);
                if (r < 0)
                        return r;
                if (cur[i].cur)
                        heap[n++] = &cur[i];
        }
        for (size_t i = n / 2; i-- > 0;)
                heap_sift_down(heap, n, i);

        while (n > 0) {
                Cursor *c = heap[0];
                const uint8_t *e = c->cur;

                /* Equal ids pop newest first: the first one is kept. */
                if (!have_last || id_cmp(last, e) != 0) {
                        r = seg_writer_add(w, e, c->remap[get_le32(e + E_PACK)], get_le32(e + E_OFFSET),
                                           get_le32(e + E_LENGTH), e[E_TYPE], e[E_MEMBER]);
                        if (r < 0)
                                return r;
                        memcpy(last, e, BV_ID_SIZE);
                        have_last = true;
                }
                r = cursor_advance(c);
                if (r < 0)
                        return r;
                if (!c->cur)
                        heap[0] = heap[--n];
                heap_sift_down(heap, n, 0);
        }
        return 0;
}

/* Merges every segment of x->segs into one new segment. Caller holds update_mutex. */
static int index_merge(BvIndex *x, Segment **ret)
{
        const SegArray *in = x->segs;
        _cleanup_free_ Cursor *cur = calloc(in->n, sizeof(Cursor));
        _cleanup_free_ uint8_t(*packs)[IDX_PACK_SIZE] = NULL;
        uint64_t total = 0, generation = 0;
        uint32_t npacks = 0;
        SegWriter w = { .fd = -EBADF };
        int r;

        if (!cur)
                return -ENOMEM;
        for (size_t i = 0; i < in->n; i++) {
                cur[i] = (Cursor){ .seg = in->s[i], .rank = (unsigned)i };
                total += in->s[i]->count;
                generation = MAX(generation, in->s[i]->generation);
                cur[i].buf = malloc(IDX_MERGE_BATCH * IDX_ENTRY_SIZE);
                if (!cur[i].buf) {
                        r = -ENOMEM;
                        goto free_cursors;
                }
        }
        r = merge_packs(cur, in->n, &packs, &npacks);
        if (r < 0)
                goto free_cursors;
        r = seg_writer_begin(&w, x->dirfd, total, (const uint8_t(*)[IDX_PACK_SIZE])packs, npacks);
        if (r < 0)
                goto free_cursors;
        r = merge_run(cur, in->n, &w);
        if (r < 0) {
                seg_writer_abort(&w);
                goto free_cursors;
        }
        /* The newest input's generation: the merged segment stands where its inputs stood. */
        r = seg_writer_finish(&w, generation, ret);

free_cursors:
        for (size_t i = 0; i < in->n; i++) {
                free(cur[i].buf);
                free(cur[i].remap);
        }
        return r;
}

int bv_index_compact(BvIndex *x, unsigned max_segments)
{
        Segment *merged = NULL;
        SegArray *a;
        int r;

        BV_LOCK_GUARD(&x->update_mutex);
        if (x->segs->n <= max_segments || x->segs->n < 2)
                return 0;
        r = index_merge(x, &merged);
        if (r < 0)
                return r;
        a = segarray_new(1);
        if (!a) {
                segment_free(merged); /* the file stays: duplicates are harmless */
                return -ENOMEM;
        }
        a->s[0] = merged;

        /* Unlink the inputs, then publish: the merged segment is durable already, and lookups
         * that still use the inputs keep valid mappings until the publish unmaps them. */
        for (size_t i = 0; i < x->segs->n; i++)
                if (unlinkat(x->dirfd, x->segs->s[i]->name, 0) < 0 && errno != ENOENT && r == 0)
                        r = negative_errno();
        index_publish(x, a);
        if (r < 0)
                return r;
        return bv_fsync_dir(x->dirfd);
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

/* Fan-out non-decreasing and ending at the count (the end was checked at open). */
static int segment_check_fanout(const Segment *s)
{
        uint32_t prev = 0;

        for (uint64_t b = 0; b < (UINT64_C(1) << s->fanout_bits); b++) {
                uint32_t v = get_le32(s->fanout + 4 * b);
                if (v < prev || v > s->count)
                        return -EBADMSG;
                prev = v;
        }
        return 0;
}

static int segment_check(const Segment *s, int (*cb)(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud),
                         void *userdata)
{
        _cleanup_free_ uint8_t *buf = malloc(IDX_MERGE_BATCH * IDX_ENTRY_SIZE);
        Cursor c = { .seg = s, .buf = buf };
        uint8_t sha[BV_HASH_SIZE];
        int r;

        if (!buf)
                return -ENOMEM;
        r = segment_body_sha(s->fd, s->size, sha);
        if (r < 0)
                return r;
        if (memcmp(sha, s->map + H_BODY_SHA, sizeof(sha)) != 0)
                return -EBADMSG;
        r = segment_check_fanout(s);

        /* Entries are read with pread (the cursor checks order and pack positions). */
        for (uint64_t i = 0; r >= 0; i++) {
                uint64_t b, lo, hi;
                BvLocation loc;

                r = cursor_advance(&c);
                if (r < 0 || !c.cur)
                        break;
                b = bucket_of(c.cur, s->fanout_bits);
                lo = b > 0 ? get_le32(s->fanout + 4 * (b - 1)) : 0;
                hi = get_le32(s->fanout + 4 * b);
                if (i < lo || i >= hi || !bloom_test(s->bloom, s->bloom_len, s->probes, c.cur)) {
                        r = -EBADMSG;
                        break;
                }
                entry_location(s, c.cur, &loc);
                if (cb)
                        r = cb(c.cur, &loc, userdata);
        }
        /* Drop the fan-out and filter pages this pass mapped: they stay in the page cache. */
        (void)madvise((void *)s->map, s->size, MADV_DONTNEED);
        return r < 0 ? r : 0;
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
