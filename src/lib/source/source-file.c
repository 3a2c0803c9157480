/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files, block devices and streams behind the source ops table. A planner walks the image in order and cuts it into items: HOLE items
 * (regular files only, found incrementally with SEEK_DATA / SEEK_HOLE) and DATA items of at
 * most read_size bytes. Items sit in a ring of slots, each with its own 4096-aligned buffer;
 * DATA items are submitted to io_uring as soon as they are planned, so up to queue_depth reads
 * are in flight, and they are handed out strictly in order. The slot handed out last is only
 * reused on the next call. Without io_uring there is one slot, read with pread when delivered.
 * A hole rides in the slot of the data after it (handed out first), so that holes never take
 * the place of reads: an installed system's image is some 900 data regions, most under 1 MiB,
 * between holes of ~50 KiB, and a hole per slot halved the reads in flight. Only a hole to the
 * end of the file has a slot of its own.
 * Streams ("-", pipes) bypass all of this: a plain read() loop into one buffer.
 *
 * Each DATA item is read where it is fastest: if the page cache holds most of it (cachestat(2),
 * or mincore where the kernel lacks it) it is read through the page cache from a second,
 * buffered descriptor, else with O_DIRECT. Pages the user had cached are never dropped; with
 * --no-direct only the pages of items that were not cached are dropped behind the reader.
 */
#include <fcntl.h>
#include <liburing.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "source.h"

#define CACHE_LOOKAHEAD 64u /* cells probed ahead of the planner (64 MiB at the default size) */
#define CACHE_WINDOW (2 * CACHE_LOOKAHEAD)

typedef struct Slot {
        void *buf;
        BvExtentKind kind;
        uint64_t offset;
        uint64_t length;
        uint64_t hole; /* a hole just before offset, handed out before the DATA item */
        bool cached;  /* the page cache holds most of it: read through the page cache */
        int64_t res;  /* bytes read, or -errno; valid once !pending */
        bool pending; /* submitted to the ring, completion not yet reaped */
} Slot;

typedef struct FileSource {
        BvSourceKind kind;
        char *path;
        int fd;
        int fd_buffered; /* the same file without O_DIRECT, when fd has it; else -EBADF */
        bool probe_cache; /* ask the kernel what is cached (cachestat, or mincore) */
        bool no_cachestat; /* cachestat(2) is not in this kernel: mincore */
        /* Whether the read_size cells of the image ahead of the planner were cached when probed:
         * a window of CACHE_WINDOW bits, cell c at bit c % CACHE_WINDOW, holding the cells from
         * the planner's up to cells_probed. Probed CACHE_LOOKAHEAD cells ahead of the planner, so
         * that our own readahead never looks like the user's; never across a hole (memory and
         * time follow the data, not the apparent size). */
        uint8_t cache_bits[CACHE_WINDOW / 8];
        uint64_t cells, cells_probed;
        BvSourceIdentity identity;
        BvSourceReadStats read_stats;
        uint64_t size; /* UINT64_MAX for a stream until its end */
        uint64_t work; /* bytes to read: bv_source_work */
        size_t read_size;
        bool direct;
        bool direct_verified; /* a direct read succeeded: EINVAL is a real error now */
        bool uring;
        unsigned nfixed; /* slots 0..nfixed-1 have their buffers registered with the ring: read_fixed */
        bool seek_data; /* SEEK_DATA / SEEK_HOLE usable */
        struct io_uring ring;
        unsigned inflight;

        Slot *slots;
        unsigned nslots, head, count;
        unsigned data_queued; /* DATA items planned and not yet given back (in flight or read) */
        bool held; /* slots[head] was handed out by the last call */

        uint64_t plan_pos;   /* next offset to plan */
        uint64_t region_end; /* end of the data region plan_pos is in */
        uint64_t stream_pos; /* bytes of a stream delivered so far */
        int error;           /* sticky: once failed, always failed */
        bool skip_unreadable;
        BvByteRange *unreadable;
        size_t n_unreadable, cap_unreadable;
} FileSource;


/* Reaps one completion into its slot. */
static int reap_one(FileSource *s)
{
        struct io_uring_cqe *cqe;
        int r;

        do
                r = io_uring_wait_cqe(&s->ring, &cqe);
        while (r == -EINTR);
        if (r < 0)
                return r;
        Slot *sl = &s->slots[io_uring_cqe_get_data64(cqe)];
        sl->res = cqe->res;
        sl->pending = false;
        s->inflight--;
        io_uring_cqe_seen(&s->ring, cqe);
        return 0;
}

static int drain(FileSource *s)
{
        while (s->inflight > 0) {
                int r = reap_one(s);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void file_free(FileSource *s)
{
        if (!s)
                return;
        if (s->uring) {
                /* the kernel may still write into the buffers: wait before freeing them */
                (void)drain(s);
                io_uring_queue_exit(&s->ring);
        }
        for (unsigned i = 0; s->slots && i < s->nslots; i++)
                free(s->slots[i].buf);
        free(s->slots);
        free(s->unreadable);
        safe_close(s->fd);
        safe_close(s->fd_buffered);
        free(s->path);
        free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(FileSource, file_free);

/* Whether this slot is read with O_DIRECT (else through the page cache). */
static bool slot_direct(const FileSource *s, const Slot *sl)
{
        return s->direct && !(sl->cached && s->fd_buffered >= 0);
}

static int slot_fd(const FileSource *s, const Slot *sl)
{
        return s->direct && !slot_direct(s, sl) ? s->fd_buffered : s->fd;
}

/* How many bytes a read of this slot asks for: O_DIRECT wants whole 4 KiB blocks. */
static size_t slot_read_len(const FileSource *s, const Slot *sl)
{
        return slot_direct(s, sl) ? ALIGN_UP((size_t)sl->length, (size_t)BV_BLOCK_SIZE) : (size_t)sl->length;
}

#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct bv_cachestat_range {
        uint64_t off, len;
};

struct bv_cachestat {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Pages of [offset, offset+len) in the page cache, with mincore on a mapping: -errno on failure. */
static int64_t cached_pages_mincore(int fd, uint64_t offset, uint64_t len)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (size_t)DIV_ROUND_UP(len, (uint64_t)page);
        _cleanup_free_ unsigned char *vec = malloc(n);
        int64_t count = 0;

        if (!vec)
                return -ENOMEM;
        void *m = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, (off_t)offset);
        if (m == MAP_FAILED)
                return negative_errno();
        int r = mincore(m, (size_t)len, vec);
        int err = errno;
        (void)munmap(m, (size_t)len);
        if (r < 0)
                return -err;
        for (size_t i = 0; i < n; i++)
                count += vec[i] & 1;
        return count;
}

/* Whether the page cache holds at least half of [offset, offset+len). A kernel or filesystem
 * that cannot tell makes every later region uncached. */
static bool probe_cached(FileSource *s, uint64_t offset, uint64_t len)
{
        int fd = s->fd_buffered >= 0 ? s->fd_buffered : s->fd;
        int64_t pages = -ENOSYS;

        if (!s->probe_cache || len == 0)
                return false;
        if (!s->no_cachestat) {
                struct bv_cachestat_range range = { .off = offset, .len = len };
                struct bv_cachestat cs = {};
                if (syscall(__NR_cachestat, fd, &range, &cs, 0) == 0)
                        pages = (int64_t)cs.nr_cache;
                else if (errno == ENOSYS)
                        s->no_cachestat = true;
        }
        if (s->no_cachestat)
                pages = cached_pages_mincore(fd, offset, len);
        if (pages < 0) {
                s->probe_cache = false;
                return false;
        }
        return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE) * 2 >= len;
}

/* Whether the cell of offset was cached when probed, probing ahead as the planner advances (the
 * planner only moves forward). Past a hole probing starts again at the planner's cell. */
static bool region_cached(FileSource *s, uint64_t offset)
{
        uint64_t cell = offset / s->read_size;

        if (cell >= s->cells)
                return false;
        s->cells_probed = MAX(s->cells_probed, cell);
        uint64_t want = MIN(cell + CACHE_WINDOW, s->cells);
        if (s->cells_probed < cell + CACHE_LOOKAHEAD && s->cells_probed < want)
                for (; s->cells_probed < want; s->cells_probed++) {
                        uint64_t off = s->cells_probed * s->read_size;
                        unsigned bit = (unsigned)(s->cells_probed % CACHE_WINDOW);
                        s->cache_bits[bit / 8] &= (uint8_t)~(1u << (bit % 8));
                        if (probe_cached(s, off, MIN((uint64_t)s->read_size, s->size - off)))
                                s->cache_bits[bit / 8] |= (uint8_t)(1u << (bit % 8));
                }
        unsigned bit = (unsigned)(cell % CACHE_WINDOW);
        return s->cache_bits[bit / 8] & (1u << (bit % 8));
}

static int submit_slot(FileSource *s, unsigned idx)
{
        Slot *sl = &s->slots[idx];
        struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
        if (!sqe)
                return -EBUSY; /* cannot happen: the ring has a slot per buffer */
        if (idx < s->nfixed)
                io_uring_prep_read_fixed(sqe, slot_fd(s, sl), sl->buf, (unsigned)slot_read_len(s, sl), sl->offset,
                                         (int)idx);
        else
                io_uring_prep_read(sqe, slot_fd(s, sl), sl->buf, (unsigned)slot_read_len(s, sl), sl->offset);
        io_uring_sqe_set_data64(sqe, idx);
        sl->pending = true;
        s->inflight++;
        return 0;
}

/* Finds the data region at or after plan_pos. Region bounds are rounded out to 4 KiB so every
 * DATA read is block aligned; a partly allocated block is read as data. */
static int find_region(FileSource *s, uint64_t *ret_start)
{
        if (!s->seek_data) {
                s->region_end = s->size;
                *ret_start = s->plan_pos;
                return 0;
        }

        off_t d = lseek(s->fd, (off_t)s->plan_pos, SEEK_DATA);
        if (d < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
                s->seek_data = false;
                return find_region(s, ret_start);
        }
        if (d < 0 && errno != ENXIO)
                return negative_errno();
        if (d < 0 || (uint64_t)d >= s->size) {
                /* only a hole up to the end: make sure the file did not shrink under us */
                struct stat st;
                if (fstat(s->fd, &st) < 0)
                        return negative_errno();
                if ((uint64_t)st.st_size < s->size)
                        return -ENODATA;
                s->region_end = s->size;
                *ret_start = s->size;
                return 0;
        }

        uint64_t start = MAX(ALIGN_DOWN((uint64_t)d, (uint64_t)BV_BLOCK_SIZE), s->plan_pos);
        off_t h = lseek(s->fd, (off_t)start, SEEK_HOLE);
        if (h < 0)
                return errno == ENXIO ? -ENODATA : negative_errno();
        s->region_end = MIN(ALIGN_UP((uint64_t)h, (uint64_t)BV_BLOCK_SIZE), s->size);
        *ret_start = start;
        return 0;
}

/* Plans the next item into sl. Returns 1, or 0 when the whole image is planned. */
static int plan_next(FileSource *s, Slot *sl)
{
        uint64_t hole = 0;

        if (s->plan_pos >= s->size)
                return 0;

        if (s->plan_pos >= s->region_end) {
                uint64_t start;
                int r = find_region(s, &start);
                if (r < 0)
                        return r;
                if (start >= s->size) {
                        *sl = (Slot){ .buf = sl->buf, .kind = BV_EXTENT_HOLE, .offset = s->plan_pos,
                                      .length = start - s->plan_pos };
                        s->plan_pos = start;
                        return 1;
                }
                hole = start - s->plan_pos;
                s->plan_pos = start;
        }

        *sl = (Slot){ .buf = sl->buf, .kind = BV_EXTENT_DATA, .offset = s->plan_pos,
                      .length = MIN((uint64_t)s->read_size, s->region_end - s->plan_pos), .hole = hole,
                      .res = -1 };
        sl->cached = region_cached(s, sl->offset);
        s->plan_pos += sl->length;
        return 1;
}

/* Gives the slot handed out last back to the ring, telling the kernel its pages may go. */
static void release_held(FileSource *s)
{
        if (!s->held)
                return;
        Slot *sl = &s->slots[s->head];
        if (sl->kind == BV_EXTENT_DATA && !s->direct && !sl->cached)
                (void)posix_fadvise(s->fd, (off_t)sl->offset, (off_t)sl->length, POSIX_FADV_DONTNEED);
        if (sl->kind == BV_EXTENT_DATA)
                s->data_queued--;
        s->head = (s->head + 1) % s->nslots;
        s->count--;
        s->held = false;
}

/* Plans into every free slot and submits the new reads in one go. */
static int fill_queue(FileSource *s)
{
        bool submitted = false;

        while (s->count < s->nslots) {
                unsigned idx = (s->head + s->count) % s->nslots;
                int r = plan_next(s, &s->slots[idx]);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                s->count++;
                if (s->slots[idx].kind == BV_EXTENT_DATA) {
                        s->data_queued++;
                        s->read_stats.reads_ahead_max = MAX(s->read_stats.reads_ahead_max, s->data_queued);
                }
                if (s->uring && s->slots[idx].kind == BV_EXTENT_DATA) {
                        r = submit_slot(s, idx);
                        if (r < 0)
                                return r;
                        submitted = true;
                }
        }
        if (submitted) {
                int r = io_uring_submit(&s->ring);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The first O_DIRECT read was refused: drop O_DIRECT and read every queued slot again. */
static int fall_back_buffered(FileSource *s)
{
        int r = drain(s);
        if (r < 0)
                return r;

        int flags = fcntl(s->fd, F_GETFL);
        if (flags < 0 || fcntl(s->fd, F_SETFL, flags & ~O_DIRECT) < 0)
                return negative_errno();
        s->direct = false;
        (void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);

        if (!s->uring)
                return 0;
        for (unsigned i = 0; i < s->count; i++) {
                unsigned idx = (s->head + i) % s->nslots;
                if (s->slots[idx].kind != BV_EXTENT_DATA)
                        continue;
                r = submit_slot(s, idx);
                if (r < 0)
                        return r;
        }
        r = io_uring_submit(&s->ring);
        return r < 0 ? r : 0;
}

/* Waits for (or, without io_uring, does) the read of sl and checks that it is complete. A read
 * that ends before the size known at open means the source shrank: -ENODATA. */
static int complete_slot(FileSource *s, Slot *sl)
{
        for (;;) {
                if (s->uring) {
                        while (sl->pending) {
                                int r = reap_one(s);
                                if (r < 0)
                                        return r;
                        }
                } else
                        sl->res = bv_pread_all(slot_fd(s, sl), sl->buf, slot_read_len(s, sl), sl->offset);

                if (sl->res == -EINVAL && slot_direct(s, sl) && !s->direct_verified) {
                        int r = fall_back_buffered(s);
                        if (r < 0)
                                return r;
                        continue;
                }
                break;
        }
        if (sl->res < 0)
                return (int)sl->res;
        if (slot_direct(s, sl)) {
                s->direct_verified = true;
                s->read_stats.bytes_direct += sl->length;
        } else
                s->read_stats.bytes_cached += sl->length;

        if ((uint64_t)sl->res < sl->length) {
                /* a short read from the ring: finish it synchronously */
                return bv_source_pread(slot_fd(s, sl), (uint8_t *)sl->buf + sl->res, sl->length - (uint64_t)sl->res,
                                       sl->offset + (uint64_t)sl->res);
        }
        return 0;
}

static int stream_next(FileSource *s, BvExtent *ret)
{
        ssize_t n = bv_read_all(s->fd, s->slots[0].buf, s->read_size);
        if (n < 0)
                return (int)n;
        if (n == 0) {
                s->size = s->stream_pos;
                return 0;
        }
        *ret = (BvExtent){ .kind = BV_EXTENT_DATA, .offset = s->stream_pos, .length = (uint64_t)n,
                           .data = s->slots[0].buf };
        s->stream_pos += (uint64_t)n;
        return 1;
}

/* A read of sl failed with error: read it again block by block, to name the first block that
 * does not read (error_offset) or, with skip_unreadable, to deliver such blocks as zeroes. */
static int salvage_slot(FileSource *s, Slot *sl, int error)
{
        int fd = s->fd_buffered >= 0 ? s->fd_buffered : s->fd; /* a short tail reads without O_DIRECT */

        for (uint64_t pos = 0; pos < sl->length; pos += BV_BLOCK_SIZE) {
                size_t n = (size_t)MIN((uint64_t)BV_BLOCK_SIZE, sl->length - pos);
                ssize_t got = bv_pread_all(fd, (uint8_t *)sl->buf + pos, n, sl->offset + pos);
                if (got == (ssize_t)n)
                        continue;
                if (got >= 0)
                        return -ENODATA; /* it shrank under us */
                if (got == -ENOMEM || !s->skip_unreadable) {
                        s->read_stats.error_offset = sl->offset + pos;
                        return (int)got;
                }
                memset((uint8_t *)sl->buf + pos, 0, n);
                int r = bv_range_append(&s->unreadable, &s->n_unreadable, &s->cap_unreadable, sl->offset + pos,
                                        n);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int source_next_queued(FileSource *s, BvExtent *ret)
{
        release_held(s);
        int r = fill_queue(s);
        if (r < 0)
                return r;
        if (s->count == 0)
                return 0;

        Slot *sl = &s->slots[s->head];
        if (sl->hole > 0) {
                /* the hole before the head's data, while its read is in flight; the slot stays */
                *ret = (BvExtent){ .kind = BV_EXTENT_HOLE, .offset = sl->offset - sl->hole, .length = sl->hole };
                sl->hole = 0;
                return 1;
        }
        if (sl->kind == BV_EXTENT_DATA) {
                r = complete_slot(s, sl);
                if (r < 0 && r != -ENOMEM && r != -ENODATA) {
                        s->read_stats.error_offset = sl->offset;
                        r = salvage_slot(s, sl, r);
                }
                if (r < 0)
                        return r;
        }
        *ret = (BvExtent){ .kind = sl->kind, .offset = sl->offset, .length = sl->length,
                           .data = sl->kind == BV_EXTENT_DATA ? sl->buf : NULL };
        s->held = true;
        return 1;
}

static int file_next(FileSource *s, BvExtent *ret)
{
        if (s->error < 0)
                return s->error;
        if (s->kind == BV_SOURCE_STREAM && s->size != UINT64_MAX)
                return 0;

        int r = s->kind == BV_SOURCE_STREAM ? stream_next(s, ret) : source_next_queued(s, ret);
        if (r < 0)
                s->error = r;
        return r;
}

/* ---- the ops tables ---- */

static int file_next_op(void *impl, BvExtent *ret)
{
        return file_next(impl, ret);
}

static int file_read_at(void *impl, void *buf, size_t len, uint64_t offset)
{
        FileSource *s = impl;

        /* buf need not be aligned for O_DIRECT: read through the page cache when we can */
        return bv_source_pread(s->fd_buffered >= 0 ? s->fd_buffered : s->fd, buf, len, offset);
}

static uint64_t file_size(void *impl)
{
        return ((FileSource *)impl)->size;
}

static uint64_t file_work(void *impl)
{
        return ((FileSource *)impl)->work;
}

static bool file_uses_uring(void *impl)
{
        return ((FileSource *)impl)->uring;
}

static bool file_uses_direct(void *impl)
{
        return ((FileSource *)impl)->direct;
}

static int file_identity(void *impl, BvSourceIdentity *ret)
{
        FileSource *s = impl;

        if (s->kind != BV_SOURCE_FILE)
                return -EOPNOTSUPP;
        *ret = s->identity;
        return 0;
}

static void file_read_stats(void *impl, BvSourceReadStats *ret)
{
        FileSource *s = impl;
        *ret = s->read_stats;
        ret->unreadable = s->unreadable;
        ret->n_unreadable = s->n_unreadable;
}

static void file_free_op(void *impl)
{
        file_free(impl);
}

/* A regular file (holes found with SEEK_DATA and never read) and a block device share the
 * io_uring reader; a stream is read in order and cannot be read at an offset. */
static const BvSourceOps file_ops = {
        .next = file_next_op, .read_at = file_read_at, .size = file_size,
        .uses_uring = file_uses_uring, .uses_direct = file_uses_direct, .identity = file_identity,
        .read_stats = file_read_stats, .work = file_work, .free = file_free_op,
};
static const BvSourceOps blockdev_ops = {
        .next = file_next_op, .read_at = file_read_at, .size = file_size,
        .uses_uring = file_uses_uring, .uses_direct = file_uses_direct, .identity = file_identity,
        .read_stats = file_read_stats, .work = file_work, .free = file_free_op,
};
static const BvSourceOps stream_ops = {
        .next = file_next_op, .size = file_size, .free = file_free_op,
};

static int source_wrap(FileSource **s, BvSource **ret)
{
        const BvSourceOps *ops = (*s)->kind == BV_SOURCE_FILE     ? &file_ops
                                 : (*s)->kind == BV_SOURCE_BLOCKDEV ? &blockdev_ops
                                                                    : &stream_ops;
        int r = bv_source_new(ops, *s, (*s)->kind, (*s)->path, ret);

        if (r >= 0)
                *s = NULL;
        return r;
}

/* Opens path for reading and classifies it. Directories and character devices are refused
 * before they are opened (opening some character devices has side effects). */
static int open_path(const char *path, bool want_direct, int *ret_fd, BvSourceKind *ret_kind,
                     bool *ret_direct, struct stat *ret_st)
{
        struct stat st, st2;
        BvSourceKind kind;

        if (strcmp(path, "-") == 0) {
                int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return negative_errno();
                *ret_fd = fd;
                *ret_kind = BV_SOURCE_STREAM;
                *ret_direct = false;
                return 0;
        }

        if (stat(path, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (S_ISREG(st.st_mode))
                kind = BV_SOURCE_FILE;
        else if (S_ISBLK(st.st_mode))
                kind = BV_SOURCE_BLOCKDEV;
        else if (S_ISFIFO(st.st_mode))
                kind = BV_SOURCE_STREAM;
        else
                return -ENODEV; /* character device, socket */

        bool direct = want_direct && kind != BV_SOURCE_STREAM;
        int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
        _cleanup_close_ int fd = open(path, flags | (direct ? O_DIRECT : 0));
        if (fd < 0 && direct && errno == EINVAL) {
                direct = false;
                fd = open(path, flags);
        }
        if (fd < 0)
                return negative_errno();

        /* the path may have been replaced between stat and open */
        if (fstat(fd, &st2) < 0)
                return negative_errno();
        if ((st.st_mode & S_IFMT) != (st2.st_mode & S_IFMT))
                return -ESTALE;

        *ret_fd = TAKE_FD(fd);
        *ret_kind = kind;
        *ret_direct = direct;
        *ret_st = st2;
        return 0;
}

/* The identity at open, a buffered descriptor next to an O_DIRECT one (for cached regions and
 * read_at), and whether the page cache can be asked. */
static int setup_cache_reads(FileSource *s, const struct stat *st)
{
        bv_source_identity_from_stat(st, &s->identity);
        s->probe_cache = true;
        s->cells = DIV_ROUND_UP(s->size, (uint64_t)s->read_size);
        if (!s->direct)
                return 0;
        _cleanup_close_ int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st2;
        if (fd < 0 || fstat(fd, &st2) < 0)
                return negative_errno();
        if (st2.st_dev != st->st_dev || st2.st_ino != st->st_ino || st2.st_rdev != st->st_rdev)
                return -ESTALE; /* replaced between the two opens */
        s->fd_buffered = TAKE_FD(fd);
        return 0;
}

static int alloc_slots(FileSource *s, unsigned n)
{
        s->slots = calloc(n, sizeof(Slot));
        if (!s->slots)
                return -ENOMEM;
        s->nslots = n;
        for (unsigned i = 0; i < n; i++)
                if (posix_memalign(&s->slots[i].buf, BV_BLOCK_SIZE, s->read_size) != 0)
                        return -ENOMEM;
        return 0;
}

/* Registers the slots' buffers with the ring, so that a read does not look up and pin the pages
 * of its buffer each time (an O_DIRECT read of a cold image spent ~1.3% of a backup's CPU in
 * gup_fast_fallback). Where the kernel refuses all of them (RLIMIT_MEMLOCK: 8 MiB by default for
 * a user without CAP_IPC_LOCK), as many of the first slots as it takes; the rest read plainly. */
static void register_slots(FileSource *s)
{
        _cleanup_free_ struct iovec *iov = calloc(s->nslots, sizeof(*iov));

        if (!iov)
                return;
        for (unsigned i = 0; i < s->nslots; i++)
                iov[i] = (struct iovec){ .iov_base = s->slots[i].buf, .iov_len = s->read_size };
        for (unsigned n = s->nslots; n > 0 && s->nfixed == 0; n /= 2)
                if (io_uring_register_buffers(&s->ring, iov, n) == 0)
                        s->nfixed = n;
}

int bv_source_open_path(const char *path, const BvSourceOptions *opts, BvSource **ret)
{
        BvSourceOptions o = opts ? *opts : (BvSourceOptions){};
        int r;

        if (!path || !ret)
                return -EINVAL;
        if (o.dirty_bitmap)
                return -EINVAL; /* only an NBD export has one */
        if (o.compare_with && o.thin_delta)
                return -EINVAL;
        if (o.compare_with)
                return bv_source_open_compare(path, o.compare_with, &o, ret);
        if (o.thin_delta)
                return bv_source_open_thin_delta(path, o.thin_delta, &o, ret);
        if (o.read_size == 0)
                o.read_size = BV_SOURCE_READ_SIZE;
        if (o.queue_depth == 0)
                o.queue_depth = BV_SOURCE_FILE_QUEUE_DEPTH;
        if (!IS_ALIGNED(o.read_size, (size_t)BV_BLOCK_SIZE) || o.read_size > BV_SOURCE_READ_SIZE_MAX ||
            o.queue_depth > BV_SOURCE_QUEUE_DEPTH_MAX)
                return -EINVAL;

        _cleanup_(file_freep) FileSource *s = calloc(1, sizeof(FileSource));
        if (!s)
                return -ENOMEM;
        s->fd = -EBADF;
        s->fd_buffered = -EBADF;
        s->read_size = o.read_size;
        s->path = strdup(path);
        if (!s->path)
                return -ENOMEM;

        struct stat st;
        r = open_path(path, !o.no_direct, &s->fd, &s->kind, &s->direct, &st);
        if (r < 0)
                return r;

        if (s->kind == BV_SOURCE_STREAM) {
                s->size = UINT64_MAX;
                r = alloc_slots(s, 1);
                if (r < 0)
                        return r;
                return source_wrap(&s, ret);
        }

        r = bv_fd_size(s->fd, &s->size);
        /* a file's holes are never read: its allocated blocks are what there is to read */
        s->work = s->kind == BV_SOURCE_FILE ? MIN(s->size, (uint64_t)st.st_blocks * 512) : s->size;
        if (r >= 0)
                r = setup_cache_reads(s, &st);
        if (r < 0)
                return r;
        s->seek_data = s->kind == BV_SOURCE_FILE;
        if (!s->direct)
                (void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);

        s->skip_unreadable = o.skip_unreadable;
        if (!o.no_uring && io_uring_queue_init(o.queue_depth, &s->ring, 0) == 0)
                s->uring = true;
        r = alloc_slots(s, s->uring ? o.queue_depth : 1);
        if (r < 0)
                return r;
        if (s->uring)
                register_slots(s);
        return source_wrap(&s, ret);
}
