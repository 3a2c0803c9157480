/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Index segment files (docs/FORMAT.md, "Index"): the Bloom filter, parsing and searching a
 * mapped segment, writing a new one, and checking one entry by entry.
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
#include "index-internal.h"
#include "macro.h"
#include "random.h"
#include "timeutil.h"

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

int id_cmp(const uint8_t *a, const uint8_t *b)
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

bool bv_index_name_valid(const char *name)
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

void segment_free(Segment *s)
{
        if (!s)
                return;
        if (s->map)
                (void)munmap((void *)s->map, s->size);
        safe_close(s->fd);
        free(s);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Segment, segment_free);

/* Maps the segment file fd (taken, closed on failure) read as name. */
static int segment_map(int fd, const char *name, Segment **ret)
{
        _cleanup_(segment_freep) Segment *s = NULL;
        _cleanup_close_ int owned = fd;
        struct stat st;
        void *map;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd = TAKE_FD(owned);
        if (fstat(s->fd, &st) < 0)
                return negative_errno();
        if (st.st_size < IDX_HEADER_SIZE)
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

int segment_open(int dirfd, const char *name, Segment **ret)
{
        int fd = bv_open_file_beneath(dirfd, name, O_RDONLY);

        return fd < 0 ? fd : segment_map(fd, name, ret);
}

int segment_open_backend(BvBackend *b, BvObjKind kind, const char *name, Segment **ret)
{
        BvObjReader *rd;
        int fd, r;

        r = bv_obj_reader_open(b, kind, name, &rd);
        if (r < 0)
                return r;
        /* The whole segment in a file: the local one itself, S3's copy in the local cache. */
        fd = bv_obj_reader_fd(rd);
        if (fd >= 0) {
                fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        fd = negative_errno();
        }
        bv_obj_reader_close(rd);
        return fd < 0 ? fd : segment_map(fd, name, ret);
}

void segment_entry_location(const Segment *s, const uint8_t *e, BvLocation *ret)
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
int segment_find(const Segment *s, const uint8_t id[BV_ID_SIZE], bool via_pread, BvLocation *ret,
                 uint64_t *ret_entry)
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
        segment_entry_location(s, e, ret);
        if (ret_entry)
                *ret_entry = lo + (uint64_t)i;
        return 0;
}

/* ---- writing segments ---------------------------------------------------------------------- */

void seg_writer_abort(SegWriter *w)
{
        if (w->map)
                (void)munmap(w->map, w->map_size);
        w->map = NULL;
        free(w->buf);
        w->buf = NULL;
        if (w->ow) {
                bv_obj_writer_abort(w->ow); /* it owns the fd */
                w->ow = NULL;
                w->fd = -EBADF;
        }
        if (w->fd >= 0)
                bv_tmpfile_discard(w->dirfd, w->tmpname);
        w->fd = safe_close(w->fd);
}

/* Lays out a segment for at most max_count entries (the fan-out and the filter are sized for
 * it; entries come last so the file is cut to the final count). The sections before the
 * entries are mapped and filled in place; entries stream out through a buffer, so writing
 * even a compacted segment of a 10 TB repository keeps little in memory. */
int seg_writer_begin(SegWriter *w, SegDest dest, uint64_t max_count, const uint8_t (*packs)[IDX_PACK_SIZE],
                            uint32_t npacks)
{
        uint64_t size;
        void *map;
        int r;

        *w = (SegWriter){ .dirfd = dest.backend ? -EBADF : dest.dirfd, .backend = dest.backend, .kind = dest.kind,
                          .fd = -EBADF, .max_count = max_count, .npacks = npacks };
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
        if (w->backend) {
                r = bv_obj_writer_open(w->backend, w->kind, &w->ow);
                if (r >= 0)
                        w->fd = bv_obj_writer_fd(w->ow);
        } else
                r = bv_tmpfile_open(w->dirfd, &w->fd, w->tmpname);
        if (r < 0) {
                w->fd = -EBADF;
                seg_writer_abort(w);
                return r;
        }
        r = w->backend ? 0 : bv_share_file(w->dirfd, w->fd); /* a spool file is this process's */
        if (r < 0) {
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
int seg_writer_add(SegWriter *w, const uint8_t id[BV_ID_SIZE], uint32_t pack, uint32_t offset,
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

/* Puts the finished spool file as the object name (create-only: the name is random), then maps
 * the spool file itself, which the backend drops from its folder (no GET of what was just put). */
static int seg_writer_commit(SegWriter *w, const char *name, Segment **ret)
{
        int fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 3), r;

        if (fd < 0) {
                r = negative_errno();
                seg_writer_abort(w);
                return r;
        }
        r = bv_obj_writer_commit(TAKE_PTR(w->ow), name, BV_PUT_CREATE);
        w->fd = -EBADF; /* the writer owned it */
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        return segment_map(fd, name, ret);
}

/* Completes the fan-out and the header, cuts the file to size, links it durably under a new
 * random name and opens it. */
int seg_writer_finish(SegWriter *w, uint64_t generation, Segment **ret)
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
        if (w->ow)
                return seg_writer_commit(w, name, ret);
        r = bv_tmpfile_link(w->dirfd, w->fd, w->tmpname, name, false);
        w->fd = safe_close(w->fd);
        if (r < 0)
                return r;
        return segment_open(w->dirfd, name, ret);
}

/* Moves to the next entry, reading the file in batches (the mapping is left alone, so a merge
 * does not fill this process's memory with pages it reads once). */
int cursor_advance(Cursor *c)
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

int segment_check(const Segment *s, int (*cb)(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud),
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
                segment_entry_location(s, c.cur, &loc);
                if (cb)
                        r = cb(c.cur, &loc, userdata);
        }
        /* Drop the fan-out and filter pages this pass mapped: they stay in the page cache. */
        (void)madvise((void *)s->map, s->size, MADV_DONTNEED);
        return r < 0 ? r : 0;
}
