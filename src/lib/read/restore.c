/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Restore: the calling thread walks the snapshot's extents in order and hands runs of
 * adjacent data extents (up to 1 MiB) to worker threads through a bounded queue; each worker
 * reads its run through the image read path (fetch, authenticate, decompress, re-hash) and
 * writes it at its offset. A new file is written sparse (holes where the image holds zeros or
 * holes) as an anonymous file in DEST's directory (O_TMPFILE; where the filesystem lacks it, a
 * file named .blkvault-restore-<16 hex>), and linked as DEST only once complete and fsynced, so
 * that DEST never holds a partial image; on failure or cancellation it is removed. A block
 * device gets the zero ranges zeroed. Cancellation (opts->cancel) is checked between jobs.
 * Writeback of a file or device starts behind the workers (sys/writeback.h): with the kernel's
 * own starting only at a tenth of the memory dirty, the whole image used to go to the disk in
 * the final fsync, after the decoding instead of alongside it.
 */
#include <fcntl.h>
#include <libnbd.h>
#include <linux/fs.h>
#include <libgen.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "buf.h"
#include "fileio.h"
#include "image.h"
#include "macro.h"
#include "queue.h"
#include "restore.h"
#include "source.h"
#include "timeutil.h"
#include "writeback.h"

#define QUEUE_LEN 64u
#define MAX_THREADS 64u
#define JOB_MAX (4u * 1024 * 1024)
#define JOB_GATHER (1024u * 1024) /* adjacent data extents are gathered into jobs this large */
#define PROGRESS_NS (250u * 1000 * 1000)
#define RESTORE_CACHE (32u * 1024 * 1024)
#define ZERO_BUF (1024u * 1024)
#define RESTORE_TMP_PREFIX ".blkvault-restore-"
#define NBD_ZERO_MAX (1u << 30) /* bytes zeroed by one NBD request */

typedef struct Job {
        uint64_t offset, length;
} Job;

typedef struct Restore {
        BvImage *img;
        int fd;
        bool is_blk;
        struct nbd_handle *nbd; /* a disk image, written through qemu-nbd (pid nbd_pid) */
        pid_t nbd_pid;
        int nbd_err;            /* the read end of its stderr */
        BvWriteback *wb;        /* a file or device: writeback started behind the workers */
        uint64_t dest_size;     /* the image's virtual size */
        int dirfd;         /* a file: DEST's directory, */
        char *name;        /* DEST's name in it */
        char tmpname[64];  /* and the temporary name ("" for an O_TMPFILE) */
        const BvRestoreOptions *opts;
        uint64_t size, start_ns, last_progress_ns;
        uint64_t work_total; /* the snapshot's data bytes (UINT64_MAX if its record has none) */

        BvQueue queue;       /* of Job */
        pthread_mutex_t lock; /* error, bad_offset, bytes_written */
        int error;
        uint64_t bad_offset;
        uint64_t bytes_written, bytes_zero;
        uint64_t walked; /* end of the last extent the walk delivered (walking thread only) */
        Job gather;      /* adjacent data extents not queued yet (walking thread only) */
        bool stopped_with_queued; /* jobs were dropped when the restore stopped: */
        uint64_t queued_from;     /* the lowest of them, below which everything was written */
        BvRestoreDamage *damaged; /* skip_damaged: the ranges written as zeroes (under lock) */
        size_t n_damaged;
        bool map_failed; /* the walk stopped at a map node that does not read */
} Restore;

/* An error that names damage of the repository (a chunk or the map that does not read). */
static bool is_damage(int error)
{
        return error == -EBADMSG || error == -EUCLEAN;
}

/* Keeps the first error, and for damage the lowest image offset seen. */
static void restore_fail(Restore *rs, int error, uint64_t bad_offset)
{
        BV_LOCK_GUARD(&rs->lock);
        bool damage = is_damage(error);

        if (rs->error == 0 || (damage && rs->error == error && bad_offset < rs->bad_offset)) {
                rs->error = error;
                rs->bad_offset = damage ? bad_offset : 0;
        }
        Job first;
        if (bv_queue_peek(&rs->queue, &first) && (!rs->stopped_with_queued || first.offset < rs->queued_from)) {
                rs->stopped_with_queued = true;
                rs->queued_from = first.offset;
        }
        bv_queue_cancel(&rs->queue);
}

/* A job taken from the queue that will not be written: the image is whole only below the
 * lowest such offset (jobs are queued in order; a job being written is finished). */
static void restore_dropped(Restore *rs, uint64_t offset)
{
        BV_LOCK_GUARD(&rs->lock);

        if (!rs->stopped_with_queued || offset < rs->queued_from) {
                rs->stopped_with_queued = true;
                rs->queued_from = offset;
        }
}

static bool cancelled(const Restore *rs)
{
        return rs->opts && rs->opts->cancel && *rs->opts->cancel != 0;
}

static int record_damage(Restore *rs, uint64_t offset, uint64_t length, int error, bool map)
{
        BV_LOCK_GUARD(&rs->lock);
        BvRestoreDamage *d = reallocarray(rs->damaged, rs->n_damaged + 1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        rs->damaged = d;
        d[rs->n_damaged++] = (BvRestoreDamage){ .offset = offset, .length = length, .error = error, .map = map };
        return 0;
}

/* A job's buffer, salvaged one extent (one chunk) at a time: what does not read is zeroes. */
typedef struct Salvage {
        Restore *rs;
        const Job *job;
        uint8_t *buf;
} Salvage;

static int salvage_extent(BvExtentKind kind, uint64_t off, uint64_t len, void *userdata)
{
        Salvage *sv = userdata;
        uint8_t *at = sv->buf + (off - sv->job->offset);
        uint64_t bad;

        int r = kind == BV_EXTENT_DATA ? bv_image_pread(sv->rs->img, at, len, off, &bad) : (memset(at, 0, len), 0);
        if (!is_damage(r))
                return r;
        memset(at, 0, len);
        return record_damage(sv->rs, off, len, r, false);
}

/* libnbd's errno for its last error on this thread (-EIO when it has none). */
static int nbd_error(void)
{
        int e = nbd_get_errno();
        return e > 0 ? -e : -EIO;
}

static int nbd_write(Restore *rs, const void *buf, size_t len, uint64_t offset)
{
        return nbd_pwrite(rs->nbd, buf, len, offset, 0) < 0 ? nbd_error() : 0;
}

/* Zeroes a range of a disk image (qcow2 keeps it as zero clusters, raw as a hole or zeroes). */
static int nbd_zero_range(Restore *rs, uint64_t offset, uint64_t length)
{
        while (length > 0) {
                uint64_t n = MIN(length, (uint64_t)NBD_ZERO_MAX);
                if (nbd_zero(rs->nbd, n, offset, 0) < 0)
                        return nbd_error();
                offset += n;
                length -= n;
        }
        return 0;
}

static int job_run(Restore *rs, const Job *j, uint8_t **buf, size_t *cap, uint64_t *ret_bad)
{
        int r;

        r = bv_buf_reserve(buf, cap, j->length);
        if (r < 0)
                return r;
        r = bv_image_pread(rs->img, *buf, j->length, j->offset, ret_bad);
        if (is_damage(r) && rs->opts && rs->opts->skip_damaged) {
                Salvage sv = { .rs = rs, .job = j, .buf = *buf };
                r = bv_image_extents(rs->img, j->offset, j->length, salvage_extent, &sv);
                if (is_damage(r)) { /* the map of this range no longer reads: all of it */
                        memset(*buf, 0, j->length);
                        r = record_damage(rs, j->offset, j->length, r, true);
                }
        }
        if (r < 0)
                return r;
        r = rs->nbd ? nbd_write(rs, *buf, j->length, j->offset) : bv_pwrite_all(rs->fd, *buf, j->length, j->offset);
        if (r < 0)
                return r;
        bv_writeback_add(rs->wb, j->length);
        BV_LOCK_GUARD(&rs->lock);
        rs->bytes_written += j->length;
        return 0;
}

static void *worker(void *userdata)
{
        Restore *rs = userdata;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t cap = 0;

        Job j;

        while (bv_queue_pop(&rs->queue, &j) > 0) {
                uint64_t bad = 0;
                if (cancelled(rs)) {
                        restore_dropped(rs, j.offset);
                        restore_fail(rs, -ECANCELED, 0);
                        return NULL;
                }
                int r = job_run(rs, &j, &buf, &cap, &bad);
                if (r < 0) {
                        restore_fail(rs, r, bad);
                        break;
                }
        }
        return NULL;
}

static int queue_push(Restore *rs, uint64_t offset, uint64_t length)
{
        if (bv_queue_push(&rs->queue, &(Job){ .offset = offset, .length = length }) < 0) {
                BV_LOCK_GUARD(&rs->lock);
                return rs->error;
        }
        return 0;
}

/* Queues the gathered data extents, in jobs of at most JOB_MAX. */
static int gather_flush(Restore *rs)
{
        Job *g = &rs->gather;
        int r;

        while (g->length > 0) {
                uint64_t n = MIN(g->length, (uint64_t)JOB_MAX);
                r = queue_push(rs, g->offset, n);
                if (r < 0)
                        return r;
                g->offset += n;
                g->length -= n;
        }
        return 0;
}

/* Zeroes a range of a block device: BLKZEROOUT, or plain writes where the device refuses. */
static int zero_range(int fd, uint64_t offset, uint64_t length)
{
        uint64_t range[2] = { offset, length };
        _cleanup_free_ uint8_t *zeros = NULL;

        if (IS_ALIGNED(offset, 512) && IS_ALIGNED(length, 512) && ioctl(fd, BLKZEROOUT, range) == 0)
                return 0;
        zeros = calloc(1, ZERO_BUF);
        if (!zeros)
                return -ENOMEM;
        while (length > 0) {
                size_t n = (size_t)MIN(length, (uint64_t)ZERO_BUF);
                int r = bv_pwrite_all(fd, zeros, n, offset);
                if (r < 0)
                        return r;
                offset += n;
                length -= n;
        }
        return 0;
}

static void progress(Restore *rs, uint64_t done, bool force)
{
        uint64_t now = bv_now_monotonic_ns();

        if (!rs->opts || !rs->opts->progress || (!force && now - rs->last_progress_ns < PROGRESS_NS))
                return;
        rs->last_progress_ns = now;
        /* work: the data written (holes and zero runs are skipped or trimmed); in all, the
         * snapshot's data bytes */
        uint64_t written, work_total = rs->work_total;
        pthread_mutex_lock(&rs->lock);
        written = rs->bytes_written;
        pthread_mutex_unlock(&rs->lock);
        if (force)
                work_total = written;
        rs->opts->progress(&(BvProgress){ .done = done, .total = rs->size, .work_done = written,
                                          .work_total = work_total, .elapsed_ns = now - rs->start_ns },
                           rs->opts->progress_userdata);
}

static int on_extent(BvExtentKind kind, uint64_t off, uint64_t len, void *userdata)
{
        Restore *rs = userdata;
        int r;

        if (cancelled(rs))
                return -ECANCELED;
        rs->walked = off + len;
        progress(rs, off, false);
        if (kind != BV_EXTENT_DATA) {
                if (rs->is_blk) {
                        r = rs->nbd ? nbd_zero_range(rs, off, len) : zero_range(rs->fd, off, len);
                        if (r < 0)
                                return r;
                }
                BV_LOCK_GUARD(&rs->lock);
                rs->bytes_zero += len;
                return rs->error;
        }
        /* One worker takes a run of adjacent chunks: chunks stored in one compression group
         * then go to the worker that decodes it, instead of one waiting for the other. */
        if (rs->gather.length > 0 && rs->gather.offset + rs->gather.length == off &&
            rs->gather.length + len <= JOB_GATHER) {
                rs->gather.length += len;
                return 0;
        }
        r = gather_flush(rs);
        if (r < 0)
                return r;
        rs->gather = (Job){ .offset = off, .length = len };
        return 0;
}

/* After the workers stopped: the offset below which every data extent was written (jobs are
 * queued in order, and a worker finishes the job it took before it stops). */
static uint64_t written_below(const Restore *rs)
{
        if (rs->stopped_with_queued)
                return rs->queued_from;
        if (rs->gather.length > 0)
                return rs->gather.offset;
        return rs->walked;
}

/* skip_damaged, and the map's walk stopped at damage: the rest of the image is zeroes. */
static int skip_unwalked(Restore *rs, int error)
{
        uint64_t from = rs->walked;
        if (from >= rs->size)
                return 0;
        uint64_t n = rs->size - from;
        int r = !rs->is_blk ? 0 : rs->nbd ? nbd_zero_range(rs, from, n) : zero_range(rs->fd, from, n);
        return r < 0 ? r : record_damage(rs, from, rs->size - from, error, true);
}

static int damage_cmp(const void *a, const void *b)
{
        const BvRestoreDamage *x = a, *y = b;
        return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sorts the damaged ranges and merges adjacent ones of one kind; their total in *ret_bytes. */
static size_t damage_merge(BvRestoreDamage *d, size_t n, uint64_t *ret_bytes)
{
        size_t k = 0;
        *ret_bytes = 0;
        if (n > 0)
                qsort(d, n, sizeof(*d), damage_cmp);
        for (size_t i = 0; i < n; i++) {
                *ret_bytes += d[i].length;
                if (k > 0 && d[k - 1].offset + d[k - 1].length == d[i].offset && d[k - 1].error == d[i].error &&
                    d[k - 1].map == d[i].map)
                        d[k - 1].length += d[i].length;
                else
                        d[k++] = d[i];
        }
        return k;
}

/* Runs the workers over the image; returns the first error. */
static int restore_run(Restore *rs, unsigned threads)
{
        pthread_t tids[MAX_THREADS];
        unsigned started = 0;
        int r;

        for (; started < threads; started++)
                if (pthread_create(&tids[started], NULL, worker, rs) != 0)
                        break;
        if (started == 0)
                return -EAGAIN;
        /* the disk writes while the workers decode, instead of all in the final fsync; without
         * the thread, the fsync writes it all */
        if (!rs->nbd)
                (void)bv_writeback_start(rs->fd, 0, &rs->wb);

        r = bv_image_extents(rs->img, 0, rs->size, on_extent, rs);
        if (is_damage(r) && rs->opts && rs->opts->skip_damaged) /* the rest of the image cannot be walked */
                r = skip_unwalked(rs, r);
        if (r >= 0)
                r = gather_flush(rs);
        if (r < 0) { /* a damaged map: the damage is where the walk stopped */
                rs->map_failed = is_damage(r);
                restore_fail(rs, r, rs->walked);
        }
        bv_queue_close(&rs->queue);
        for (unsigned i = 0; i < started; i++)
                pthread_join(tids[i], NULL);
        bv_writeback_free(TAKE_PTR(rs->wb));
        return rs->error;
}

/* An existing block device (large enough), opened exclusively. */
static int open_device(Restore *rs, const char *dest)
{
        _cleanup_close_ int fd = -EBADF;
        uint64_t dev_size;
        int r;

        /* O_EXCL on a block device: fails (-EBUSY) while it is mounted or in use */
        fd = open(dest, O_WRONLY | O_EXCL | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        r = bv_fd_size(fd, &dev_size);
        if (r < 0)
                return r;
        if (dev_size < rs->size)
                return -ENOSPC;
        rs->is_blk = true;
        rs->fd = TAKE_FD(fd);
        return 0;
}

/* A new file: -EEXIST if dest exists; otherwise a temporary file of the image's size in its
 * directory, which finish_dest links as dest. */
static int open_file(Restore *rs, const char *dest)
{
        _cleanup_free_ char *dir = strdup(dest), *base = strdup(dest);
        struct stat st;
        int r;

        if (!dir || !base)
                return -ENOMEM;
        rs->name = strdup(basename(base));
        if (!rs->name)
                return -ENOMEM;
        rs->dirfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rs->dirfd < 0)
                return negative_errno();
        if (fstatat(rs->dirfd, rs->name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return -EEXIST;
        if (errno != ENOENT)
                return negative_errno();
        r = bv_tmpfile_open_prefix(rs->dirfd, RESTORE_TMP_PREFIX, &rs->fd, rs->tmpname);
        if (r < 0)
                return r;
        /* on failure finish_dest removes the temporary file */
        return ftruncate(rs->fd, (off_t)rs->size) < 0 ? negative_errno() : 0;
}

/* The disk image at path, of format, served writable by qemu-nbd and connected: its virtual size
 * must be the snapshot's (-EMSGSIZE, the size in rs->dest_size). */
static int open_image(Restore *rs, const char *path, const char *format, char *detail, size_t size)
{
        int client = -EBADF, r;

        r = bv_qemu_nbd_start(path, format, NULL, true, &client, &rs->nbd_err);
        if (r < 0)
                return r;
        rs->nbd_pid = r;
        rs->is_blk = true; /* written in place: zero ranges are zeroed */
        rs->nbd = nbd_create();
        if (!rs->nbd) {
                safe_close(client);
                return -ENOMEM;
        }
        if (nbd_connect_socket(rs->nbd, client) < 0) {
                r = bv_qemu_nbd_failed(rs->nbd_pid, rs->nbd_err, nbd_error(), detail, size);
                rs->nbd_pid = 0;
                return r;
        }
        int64_t n = nbd_get_size(rs->nbd);
        if (n < 0)
                return nbd_error();
        rs->dest_size = (uint64_t)n;
        if (nbd_is_read_only(rs->nbd) == 1)
                return -EROFS;
        return rs->dest_size != rs->size ? -EMSGSIZE : 0;
}

/* Flushes the image (when all went well), says goodbye and waits for qemu-nbd to close it. */
static int finish_image(Restore *rs, int ret)
{
        if (!rs->nbd)
                return ret;
        if (ret >= 0 && nbd_aio_is_ready(rs->nbd) && nbd_flush(rs->nbd, 0) < 0)
                ret = nbd_error();
        if (nbd_aio_is_ready(rs->nbd))
                (void)nbd_shutdown(rs->nbd, 0);
        nbd_close(rs->nbd);
        rs->nbd = NULL;
        (void)bv_qemu_nbd_stop(rs->nbd_pid);
        rs->nbd_pid = 0;
        return ret;
}

static int open_dest(Restore *rs, const char *dest)
{
        struct stat st;

        if (stat(dest, &st) == 0 && S_ISBLK(st.st_mode))
                return open_device(rs, dest);
        return open_file(rs, dest);
}

/* Makes what was restored durable: a device is fsynced; a complete file is fsynced and linked as
 * DEST (failing with -EEXIST if DEST appeared meanwhile), an incomplete one removed. */
static int finish_dest(Restore *rs, int ret)
{
        if (rs->nbd || rs->nbd_pid > 0)
                return finish_image(rs, ret);
        if (rs->fd < 0)
                return ret;
        if (rs->is_blk)
                return ret >= 0 && fsync(rs->fd) < 0 ? negative_errno() : ret;
        if (ret < 0) {
                bv_tmpfile_discard(rs->dirfd, rs->tmpname);
                return ret;
        }
        return bv_tmpfile_link(rs->dirfd, rs->fd, rs->tmpname, rs->name, false);
}

static unsigned thread_count(const BvRestoreOptions *opts)
{
        long n = opts && opts->threads ? (long)opts->threads : sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
                return 1;
        return (unsigned)MIN(n, (long)MAX_THREADS);
}

/* Where a restore writes: a path (a new file or a device), or a disk image in place. */
typedef struct Dest {
        const char *path;
        const char *format; /* an image's: written through qemu-nbd */
        char *detail;
        size_t detail_size;
} Dest;

static int restore_to(BvRepo *r, const BvSnapshot *snap, const Dest *dest, const BvRestoreOptions *opts,
                      BvRestoreStats *ret_stats)
{
        BvImageOptions io = { .cache_bytes = RESTORE_CACHE, .readahead = 0, .map_stream = true };
        Restore rs = { .opts = opts, .fd = -EBADF, .dirfd = -EBADF, .nbd_err = -EBADF };
        BvImage *img = NULL;
        int ret;

        ret = bv_image_open(r, snap, &io, &img);
        if (ret < 0)
                return ret;
        rs.img = img;
        rs.size = snap->size;
        rs.work_total = snap->stats.bytes_data <= snap->size ? snap->stats.bytes_data : UINT64_MAX;
        rs.start_ns = rs.last_progress_ns = bv_now_monotonic_ns();
        ret = bv_queue_init(&rs.queue, sizeof(Job), QUEUE_LEN);
        if (ret < 0) {
                bv_image_free(img);
                return ret;
        }
        pthread_mutex_init(&rs.lock, NULL);

        ret = dest->format ? open_image(&rs, dest->path, dest->format, dest->detail, dest->detail_size)
                           : open_dest(&rs, dest->path);
        if (ret >= 0)
                ret = restore_run(&rs, thread_count(opts));
        ret = finish_dest(&rs, ret);
        if (ret >= 0)
                progress(&rs, rs.size, true);
        uint8_t bad_node[BV_ID_SIZE];
        bool bad_map = is_damage(ret) && rs.map_failed && bv_image_bad_map_node(img, bad_node) > 0;
        BvImageStats ist;
        bv_image_stats(img, &ist);
        safe_close(rs.fd);
        safe_close(rs.dirfd);
        safe_close(rs.nbd_err);
        free(rs.name);
        bv_image_free(img);
        pthread_mutex_destroy(&rs.lock);
        bv_queue_done(&rs.queue);

        uint64_t damaged_bytes;
        size_t n_damaged = damage_merge(rs.damaged, rs.n_damaged, &damaged_bytes);
        if (ret_stats && ret == -EMSGSIZE)
                *ret_stats = (BvRestoreStats){ .size = rs.size, .dest_size = rs.dest_size };
        if (ret_stats && (ret >= 0 || is_damage(ret) || ret == -ECANCELED)) {
                *ret_stats = (BvRestoreStats){
                        .size = rs.size,
                        .bytes_written = rs.bytes_written,
                        .bytes_zero = rs.bytes_zero,
                        .seconds = (double)(bv_now_monotonic_ns() - rs.start_ns) / 1e9,
                        .bad_offset = ret < 0 ? rs.bad_offset : 0,
                        .written_below = ret == -ECANCELED ? written_below(&rs) : rs.size,
                        .device = rs.is_blk,
                        .damaged = TAKE_PTR(rs.damaged),
                        .n_damaged = n_damaged,
                        .bytes_damaged = damaged_bytes,
                        .dest_size = rs.dest_size,
                        .map_prefetched = ist.map_prefetched,
                        .map_in_flight_max = ist.map_in_flight_max,
                        .bad_map = bad_map,
                };
                if (bad_map)
                        memcpy(ret_stats->bad_map_node, bad_node, BV_ID_SIZE);
        }
        free(rs.damaged);
        return ret < 0 ? ret : 0;
}

int bv_restore(BvRepo *r, const BvSnapshot *snap, const char *dest, const BvRestoreOptions *opts,
               BvRestoreStats *ret_stats)
{
        if (!r || !snap || !dest)
                return -EINVAL;
        return restore_to(r, snap, &(Dest){ .path = dest }, opts, ret_stats);
}

int bv_restore_image(BvRepo *r, const BvSnapshot *snap, const char *path, const char *format,
                     const BvRestoreOptions *opts, BvRestoreStats *ret_stats, char *detail, size_t detail_size)
{
        if (!r || !snap || !path || !format)
                return -EINVAL;
        if (detail && detail_size)
                detail[0] = '\0';
        return restore_to(r, snap, &(Dest){ .path = path, .format = format, .detail = detail,
                                            .detail_size = detail_size }, opts, ret_stats);
}
