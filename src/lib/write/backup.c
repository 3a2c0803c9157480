/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The backup pipeline.
 *
 * The caller's thread reads the source and splits it into extents, chunks in batches whose ids
 * it hashes with a helper (backup-hash.h), decides with the index which chunks are new and
 * builds the snapshot's map in image order. New
 * chunks are gathered into compression groups (consecutive new chunks up to
 * BV_GROUP_TARGET_BYTES, store/group-write.h) and, like new map nodes, copied into jobs from a
 * bounded pool and queued to worker threads, which encode them (bv_group_encode: compress,
 * encrypt, pad; a group that does not compress is stored as single chunks) and append them to
 * the one pack writer (under a mutex). A full pack is committed durably and its entries are
 * recorded in the index; the index is flushed every ~1M entries. Only when every pack and index
 * segment is durable is the snapshot record written: it is the commit point.
 *
 * Boundary resync: when a new chunk has a proper 4 KiB-multiple prefix that is a chunk already
 * stored (an earlier image had a forced cut there: its end, a zero run), the prefix is taken
 * as that chunk and the splitter restarts cutting after it, so that cuts fall where they fell
 * in that image (concatenations, appended data). The rest of that batch is dropped: the
 * splitter cuts it again (chunker.h, bv_splitter_set_batch).
 */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adopt.h"
#include "backup.h"
#include "backup-hash.h"
#include "buf.h"
#include "changed.h"
#include "chunker.h"
#include "group-write.h"
#include "heal.h"
#include "hex.h"
#include "index.h"
#include "lock.h"
#include "macro.h"
#include "maptree.h"
#include "object.h"
#include "pack.h"
#include "parent-map.h"
#include "used-record.h"
#include "unchanged.h"
#include "queue.h"
#include "random.h"
#include "snapshot.h"
#include "timeutil.h"

#define JOBS_PER_THREAD 4
#define MAX_THREADS 256
#define INDEX_FLUSH_ENTRIES (1u << 20)
#define INDEX_MAX_SEGMENTS 16
#define PROGRESS_INTERVAL_NS (250ull * 1000 * 1000)
#define EDGE_READ (1024u * 1024) /* reads of UNCHANGED ranges whose parent chunks are lost */
#define BATCH_BYTES (1024u * 1024) /* chunks hashed together on two cores */

/* One object to store: a chunk or map node (one member), or a group. */
typedef BvGroupBuf Job;

typedef struct Backup {
        BvRepo *repo;
        const BvByteRange *unreadable; /* the source's, recorded in the snapshot */
        size_t n_unreadable;
        BvIndex *index;
        const BvKeyring *keyring;
        BvChunkerParams chunker;
        int zstd_level;
        bool zstd_auto; /* --compression=auto: data stored raw or compressed as bv_zstd_choose says */
        uint64_t pack_target;
        bool resync; /* the boundary-resync rule applies (not for fixed chunking) */

        /* Reading thread only. */
        BvMapBuilder *map;
        BvParentMap *parent; /* for UNCHANGED extents of a changed-block source */
        BvSnapshot *changed_parent; /* the newest snapshot of a changed-block source's name */
        BvSnapshotUsedOnly used_only; /* opts->used_only as the snapshot records it */
        uint8_t *edge_buf;   /* UNCHANGED ranges read from the source (their chunks are lost) */
        Job *group;    /* the compression group being gathered */
        bool grouping; /* only when compressing */
        BvBatchHasher *hasher;
        BvBackupStats stats;
        bool (*cancelled)(void); /* opts->cancelled */
        uint64_t start_realtime_ns; /* the backup's start, recorded with the snapshot */

        /* The job pool: free jobs wait in one queue, work for the workers in the other. */
        Job *jobs;         /* the pool's storage */
        size_t n_jobs;
        BvQueue free_jobs; /* of Job *; cancelled when the pipeline fails */
        BvQueue work;      /* of Job *; closed when the reading is done */
        pthread_mutex_t lock;
        int error;         /* first error (sticky) */

        /* The pack writer, shared by the workers. */
        pthread_mutex_t pack_lock;
        BvObjectCodec *pack_codec; /* seals pack indexes (and later the snapshot record) */
        BvPackWriter *writer;
        uint8_t (*pending_ids)[BV_ID_SIZE]; /* claimed ids in the uncommitted pack */
        size_t n_pending_ids, cap_pending_ids;
        uint64_t bytes_stored, packs, bytes_committed;
        bool pack_failed; /* the writer is unusable: the error is recorded */

        pthread_t threads[MAX_THREADS];
        unsigned n_threads;
} Backup;

static void backup_set_error(Backup *b, int r)
{
        {
                BV_LOCK_GUARD(&b->lock);
                if (b->error == 0)
                        b->error = r;
        }
        bv_queue_cancel(&b->free_jobs);
}

static int backup_get_error(Backup *b)
{
        BV_LOCK_GUARD(&b->lock);
        return b->error;
}

/* Takes a free job, waiting while the pool is empty; NULL once the pipeline has failed. */
static Job *job_take(Backup *b)
{
        Job *j;

        return bv_queue_pop(&b->free_jobs, &j) > 0 ? j : NULL;
}

static void job_release(Backup *b, Job *j)
{
        (void)bv_queue_push(&b->free_jobs, &j); /* never full; cancelled: the pool is done with */
}

static void job_queue(Backup *b, Job *j)
{
        (void)bv_queue_push(&b->work, &j); /* never full: it holds every job at most */
}

/* Next queued job for a worker; NULL when the queue is closed and empty. */
static Job *job_next(Backup *b)
{
        Job *j;

        return bv_queue_pop(&b->work, &j) > 0 ? j : NULL;
}

static void job_unclaim(Backup *b, const Job *j)
{
        for (size_t i = 0; i < j->n_members; i++)
                bv_index_unclaim(b->index, j->members[i].id);
}

/* Copies an object into a job and queues it for encoding. The id is claimed by the caller;
 * on failure it is unclaimed here. */
static int object_submit(Backup *b, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data, size_t len)
{
        Job *j;

        j = job_take(b);
        if (!j) {
                bv_index_unclaim(b->index, id);
                return backup_get_error(b);
        }
        if (bv_group_buf_set(j, type, id, data, len) < 0) {
                bv_index_unclaim(b->index, id);
                job_release(b, j);
                return -ENOMEM;
        }
        job_queue(b, j);
        return 0;
}

/* Queues the group being gathered (a single chunk goes as a CHUNK). */
static void group_submit(Backup *b)
{
        Job *j = TAKE_PTR(b->group);

        if (j)
                job_queue(b, j);
}

/* Adds a new (claimed) chunk to the group being gathered; on failure it is unclaimed. */
static int group_add(Backup *b, const uint8_t id[BV_ID_SIZE], const void *data, size_t len)
{
        Job *j = b->group;

        if (!b->grouping)
                return object_submit(b, BV_OBJ_CHUNK, id, data, len);
        if (j && !bv_group_buf_fits(j, len)) {
                group_submit(b);
                j = NULL;
        }
        if (!j) {
                j = job_take(b);
                if (!j) {
                        bv_index_unclaim(b->index, id);
                        return backup_get_error(b);
                }
                bv_group_buf_clear(j, BV_OBJ_CHUNK);
                b->group = j;
        }
        if (bv_group_buf_add(j, id, data, len) < 0) {
                bv_index_unclaim(b->index, id);
                return -ENOMEM;
        }
        return 0;
}

/* Drops the group being gathered after a failure. */
static void group_discard(Backup *b)
{
        Job *j = TAKE_PTR(b->group);

        if (!j)
                return;
        job_unclaim(b, j);
        job_release(b, j);
}

/* Commits the current pack and records its entries. Called with pack_lock held. */
static int pack_commit_locked(Backup *b)
{
        uint8_t pack_id[BV_PACK_ID_SIZE];
        _cleanup_free_ BvPackEntry *entries = NULL;
        size_t n;
        int r;

        if (bv_pack_writer_count(b->writer) == 0)
                return 0;
        uint64_t size = bv_pack_writer_size(b->writer);
        r = bv_pack_writer_commit(b->writer, pack_id, &entries, &n);
        if (r < 0)
                return r;
        /* The pack is durable: the ids in it are stored from now on, even if recording fails. */
        b->n_pending_ids = 0, b->packs++, b->bytes_committed += size;
        r = bv_index_add_pack(b->index, pack_id, entries, n);
        if (r < 0)
                return r;
        if (bv_index_pending(b->index) >= INDEX_FLUSH_ENTRIES)
                return bv_index_flush(b->index);
        return 0;
}

static int pending_ids_add(Backup *b, const uint8_t id[BV_ID_SIZE])
{
        if (BV_ARRAY_RESERVE(b->pending_ids, b->cap_pending_ids, b->n_pending_ids + 1, 1024) < 0)
                return -ENOMEM;
        memcpy(b->pending_ids[b->n_pending_ids++], id, BV_ID_SIZE);
        return 0;
}

/* Appends one encoded object: a chunk or map node (n = 1), or a group of n members. */
static int pack_append_locked(Backup *b, BvObjectType type, const BvGroupMember *m, size_t n, const void *encoded,
                              size_t len)
{
        int r;

        r = bv_group_append(b->writer, type, m, n, encoded, len);
        if (r == -EFBIG && bv_pack_writer_count(b->writer) > 0) {
                /* The pack is full before its target (index or offset limits). */
                r = pack_commit_locked(b);
                if (r < 0)
                        return r;
                r = bv_group_append(b->writer, type, m, n, encoded, len);
        }
        if (r < 0)
                return r; /* the caller unclaims the ids with the job */
        for (size_t i = 0; i < n; i++) {
                r = pending_ids_add(b, m[i].id);
                if (r < 0)
                        return r; /* the same: the pack is discarded */
        }
        b->bytes_stored += len;
        if (bv_pack_writer_size(b->writer) >= b->pack_target)
                return pack_commit_locked(b);
        return 0;
}

/* After a failure the writer is not touched again; the error is recorded before the lock is
 * released, so that the first error is the one reported. */
static int pack_append(Backup *b, BvObjectType type, const BvGroupMember *m, size_t n, const void *encoded,
                       size_t len)
{
        int r;

        BV_LOCK_GUARD(&b->pack_lock);
        if (b->pack_failed)
                return -ECANCELED;
        r = pack_append_locked(b, type, m, n, encoded, len);
        if (r < 0) {
                backup_set_error(b, r);
                b->pack_failed = true;
        }
        return r;
}

/* The encoder's sink: each encoded object into the pack. */
static int worker_sink(void *userdata, BvObjectType type, const BvGroupMember *m, size_t n, const void *encoded,
                       size_t len)
{
        return pack_append(userdata, type, m, n, encoded, len);
}

static void *worker_main(void *userdata)
{
        Backup *b = userdata;
        BvGroupEncoder *enc = NULL;
        Job *j = NULL;
        int r;

        r = bv_group_encoder_new(b->keyring, b->zstd_level, &enc);
        if (r < 0)
                backup_set_error(b, r);
        bv_group_encoder_set_auto(enc, b->zstd_auto);

        while ((j = job_next(b))) {
                if (backup_get_error(b) == 0) {
                        r = bv_group_encode(enc, j, worker_sink, b);
                        if (r < 0) {
                                job_unclaim(b, j);
                                backup_set_error(b, r);
                        }
                } else
                        job_unclaim(b, j);
                job_release(b, j);
        }

        bv_group_encoder_free(enc);
        return NULL;
}

static int workers_start(Backup *b, unsigned n)
{
        int r;

        for (b->n_threads = 0; b->n_threads < n; b->n_threads++) {
                r = -pthread_create(&b->threads[b->n_threads], NULL, worker_main, b);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Closes the queue and waits for the workers to drain it. */
static void workers_join(Backup *b)
{
        bv_queue_close(&b->work);
        for (unsigned i = 0; i < b->n_threads; i++)
                (void)pthread_join(b->threads[i], NULL);
        b->n_threads = 0;
}

static int pool_new(Backup *b, size_t n, size_t cap)
{
        int r;

        b->jobs = calloc(n, sizeof(Job));
        if (!b->jobs)
                return -ENOMEM;
        b->n_jobs = n;
        if ((r = bv_queue_init(&b->free_jobs, sizeof(Job *), n)) < 0 ||
            (r = bv_queue_init(&b->work, sizeof(Job *), n)) < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                Job *j = &b->jobs[i];
                j->data = malloc(cap);
                if (!j->data)
                        return -ENOMEM;
                j->cap = cap;
                (void)bv_queue_push(&b->free_jobs, &j);
        }
        return 0;
}

/* Map nodes: stored like chunks, with a MAP id. Called from the reading thread. */
static int map_store(void *userdata, const void *node, size_t len, uint8_t ret_id[BV_ID_SIZE])
{
        Backup *b = userdata;
        uint8_t id[BV_ID_SIZE];
        int r;

        bv_keyring_id(b->keyring, BV_ID_MAP, node, len, id);
        r = bv_index_claim(b->index, id);
        if (r < 0)
                return r;
        if (r > 0) {
                r = object_submit(b, BV_OBJ_MAP, id, node, len);
                if (r < 0)
                        return r;
        }
        memcpy(ret_id, id, BV_ID_SIZE);
        return 0;
}

/* The boundary-resync rule: the longest proper 4 KiB-multiple prefix already stored, or 0. */
static size_t resync_prefix(Backup *b, uint8_t (*prefix_ids)[BV_ID_SIZE], size_t n_ids, size_t len)
{
        BvLocation loc;

        if (!b->resync)
                return 0;
        for (size_t j = n_ids - 1; j > 0; j--) {
                size_t l = j * BV_BLOCK_SIZE;
                if (l >= len)
                        continue;
                if (bv_index_lookup(b->index, prefix_ids[j - 1], &loc) == 0 &&
                    (loc.type == BV_OBJ_CHUNK || loc.type == BV_OBJ_GROUP))
                        return l;
        }
        return 0;
}

/* A DATA extent whose prefix ids (the last the chunk's id) are known. */
static int on_data(Backup *b, const BvExtent *e, uint8_t (*prefix_ids)[BV_ID_SIZE])
{
        size_t len = (size_t)e->length, n_ids = DIV_ROUND_UP(len, BV_BLOCK_SIZE), l;
        const uint8_t *id = prefix_ids[n_ids - 1];
        int r;

        r = bv_index_claim(b->index, id);
        if (r < 0)
                return r;
        if (r > 0) {
                l = resync_prefix(b, prefix_ids, n_ids, len);
                if (l > 0) {
                        bv_index_unclaim(b->index, id);
                        r = bv_map_builder_add(b->map, BV_EXTENT_DATA, l, prefix_ids[l / BV_BLOCK_SIZE - 1]);
                        if (r < 0)
                                return r;
                        b->stats.counts.chunks++;
                        b->stats.counts.bytes_data += l;
                        return (int)l;
                }
                r = group_add(b, id, e->data, len);
                if (r < 0)
                        return r;
                b->stats.counts.chunks_new++;
                b->stats.counts.bytes_new += len;
        }
        r = bv_map_builder_add(b->map, BV_EXTENT_DATA, len, id);
        if (r < 0)
                return r;
        b->stats.counts.chunks++;
        b->stats.counts.bytes_data += len;
        return 0;
}

/* A batch of DATA extents: hashed on two cores, then taken in order up to a restart. */
static int on_batch(const BvExtent *e, size_t n, size_t *ret_taken, void *userdata)
{
        Backup *b = userdata;

        bv_batch_hasher_run(b->hasher, e, n);
        for (size_t i = 0; i < n; i++) {
                int r = on_data(b, &e[i], bv_batch_hasher_ids(b->hasher, i));
                if (r != 0) {
                        *ret_taken = i;
                        return r;
                }
        }
        *ret_taken = n;
        return 0;
}

/* ZERO and HOLE extents (DATA comes in batches). */
static int on_extent(const BvExtent *e, void *userdata)
{
        Backup *b = userdata;

        switch (e->kind) {
        case BV_EXTENT_ZERO:
                b->stats.counts.bytes_zero += e->length;
                break;
        case BV_EXTENT_HOLE:
                b->stats.counts.bytes_hole += e->length;
                break;
        default:
                return -EINVAL;
        }
        return bv_map_builder_add(b->map, e->kind, e->length, NULL);
}

/* Work is what was read from the source; holes and what the parent's map gives are not. */
static void progress_report(const BvBackupOptions *opts, const Backup *b, uint64_t done, uint64_t total,
                            uint64_t work_total, uint64_t start_ns, uint64_t now_ns)
{
        BvProgress p = { .done = done, .total = total, .work_done = b->stats.counts.bytes_read,
                         .work_total = work_total, .elapsed_ns = now_ns - start_ns };

        opts->progress(&p, opts->progress_userdata);
}

static int backup_cancelled(const Backup *b)
{
        return b->cancelled && b->cancelled() ? -ECANCELED : 0;
}

/* Reads [offset, offset+len) with the source's read_at and feeds it to the splitter. */
static int feed_read_at(Backup *b, BvSource *src, BvSplitter *sp, uint64_t offset, uint64_t len)
{
        if (!b->edge_buf) {
                b->edge_buf = malloc(EDGE_READ);
                if (!b->edge_buf)
                        return -ENOMEM;
        }
        while (len > 0) {
                size_t n = (size_t)MIN(len, (uint64_t)EDGE_READ);
                int r = backup_cancelled(b);
                if (r >= 0)
                        r = bv_source_read_at(src, b->edge_buf, n, offset);
                if (r >= 0)
                        r = bv_splitter_feed(sp, offset, b->edge_buf, n, on_extent, b);
                if (r < 0)
                        return r;
                b->stats.counts.bytes_read += n;
                offset += n;
                len -= n;
        }
        return 0;
}

/* [pos, pos+n) of the parent's data chunk pe (stored at loc) into the splitter, taken from the
 * chunk as the repository holds it: a changed range cut into pe, and its clean rest is what pe
 * holds there. The source is read instead when the chunk does not read back whole. */
static int feed_parent(Backup *b, BvSource *src, BvSplitter *sp, const BvMapExtent *pe, const BvLocation *loc,
                       uint64_t pos, uint64_t n)
{
        const uint8_t *data;
        int r = bv_parent_map_chunk(b->parent, pe, loc, &data);

        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return feed_read_at(b, src, sp, pos, n);
        r = bv_splitter_feed(sp, pos, data + (pos - pe->offset), (size_t)n, on_extent, b);
        if (r >= 0)
                b->stats.bytes_parent += n;
        return r;
}

/* [offset, offset+len) holds what the parent holds there: its zero and hole runs and the data
 * chunks that lie wholly inside are taken from its map and never read; the part of a data chunk
 * that sticks out of the range (a changed range next to it cut into the chunk) is taken from the
 * parent's stored chunk, so that the source is read only where it changed. */
static int backup_unchanged(Backup *b, BvSource *src, BvSplitter *sp, uint64_t offset, uint64_t len)
{
        uint64_t pos = offset, end = offset + len;
        int r;

        if (!b->parent)
                return -EINVAL; /* an UNCHANGED extent without a parent snapshot */
        while (pos < end) {
                BvMapExtent pe;
                r = bv_parent_map_lookup(b->parent, pos, &pe);
                if (r < 0)
                        return r == -ERANGE ? -EINVAL : r;
                uint64_t n = MIN(pe.offset + pe.length, end) - pos;
                BvLocation loc;
                bool stored = pe.kind == BV_EXTENT_DATA && bv_index_lookup(b->index, pe.id, &loc) >= 0;
                if (pe.kind == BV_EXTENT_DATA && !stored) {
                        r = feed_read_at(b, src, sp, pos, n); /* no longer stored */
                } else if (pe.kind == BV_EXTENT_DATA && (pe.offset != pos || pe.length != n)) {
                        r = feed_parent(b, src, sp, &pe, &loc, pos, n); /* sticks out */
                } else {
                        r = bv_splitter_skip(sp, pos, n, on_extent, b);
                        if (r >= 0 && pe.kind == BV_EXTENT_DATA) {
                                b->stats.counts.chunks++;
                                b->stats.counts.bytes_data += n;
                                r = bv_map_builder_add(b->map, BV_EXTENT_DATA, n, pe.id);
                        } else if (r >= 0)
                                r = on_extent(&(BvExtent){ .kind = pe.kind, .offset = pos, .length = n }, b);
                }
                if (r < 0)
                        return r;
                pos += n;
        }
        return 0;
}

/* One extent of the source into the splitter. */
static int backup_extent(Backup *b, BvSource *src, BvSplitter *sp, const BvExtent *e)
{
        switch (e->kind) {
        case BV_EXTENT_DATA:
                b->stats.counts.bytes_read += e->length;
                return bv_splitter_feed(sp, e->offset, e->data, (size_t)e->length, on_extent, b);
        case BV_EXTENT_HOLE:
                return bv_splitter_hole(sp, e->offset, e->length, on_extent, b);
        case BV_EXTENT_UNCHANGED:
                return backup_unchanged(b, src, sp, e->offset, e->length);
        case BV_EXTENT_ZERO:
                break;
        }
        return -EINVAL;
}

/* Reads the whole source through the splitter. */
static int backup_read(Backup *b, BvSource *src, BvSplitter *sp, const BvBackupOptions *opts, uint64_t start_ns)
{
        uint64_t last = start_ns;
        BvExtent e;
        int r;

        for (;;) {
                r = bv_source_next(src, &e);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                r = backup_extent(b, src, sp, &e);
                if (r < 0)
                        return r;
                r = backup_get_error(b);
                if (r >= 0)
                        r = backup_cancelled(b);
                if (r < 0)
                        return r;
                if (opts->progress) {
                        uint64_t now = bv_now_monotonic_ns();
                        if (now - last >= PROGRESS_INTERVAL_NS) {
                                progress_report(opts, b, e.offset + e.length, bv_source_size(src),
                                                bv_source_work(src), start_ns, now);
                                last = now;
                        }
                }
        }
        return bv_splitter_finish(sp, on_extent, b);
}

const char *bv_backup_default_name(const char *path)
{
        const char *slash;

        if (strcmp(path, "-") == 0)
                return "stdin";
        slash = strrchr(path, '/');
        if (slash && slash[1])
                return slash + 1;
        return path;
}

/* Writes the snapshot record: the commit point of the backup. Under locks/commit, so that no gc
 * condemns between the check of the map against the index (heal.h) and the record: a gc then
 * either ran before (and the check puts back what it dropped) or marks after (and sees it). */
static int snapshot_publish(Backup *b, BvSource *src, const char *name, uint64_t start_s,
                            const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size,
                            const BvSnapshot *reused)
{
        uint8_t raw_id[BV_SNAPSHOT_ID_SIZE];
        BvSnapshot s = {
                .name = (char *)name,
                .time = start_s,
                .time_ns = b->start_realtime_ns,
                .size = size,
                .height = height,
        };
        int r;

        r = bv_random_bytes(raw_id, sizeof(raw_id));
        if (r < 0)
                return r;
        bv_hex_encode(raw_id, sizeof(raw_id), s.id);
        memcpy(s.root, root, BV_ID_SIZE);
        s.source = (BvSnapshotSource){ .path = (char *)bv_source_path(src), .kind = bv_source_kind(src), .size = size,
                                       .changed_map = (char *)bv_source_changed_map(src),
                                       .image_format = (char *)bv_source_image_format(src) };
        const BvSourceLibvirt *lv = bv_source_libvirt(src);
        if (lv)
                s.source.libvirt = (BvSnapshotLibvirt){ .domain = (char *)lv->domain, .uuid = (char *)lv->uuid,
                                                        .disk = (char *)lv->disk, .disk_size = lv->disk_size,
                                                        .checkpoint = (char *)lv->checkpoint };
        bool local = s.source.kind == BV_SOURCE_FILE || s.source.kind == BV_SOURCE_BLOCKDEV;
        bool image = s.source.kind == BV_SOURCE_IMAGE; /* libblkid would probe the image file, not its disk */
        if (b->stats.changed_from[0]) {
                memcpy(s.source.changed_from, b->stats.changed_from, sizeof(s.source.changed_from));
                s.source.changed_backups = b->changed_parent->source.changed_backups + 1;
        }
        /* Where it came from, so that a restore can be matched to its machine and device. */
        char host[256] = "", abs[PATH_MAX], stable[PATH_MAX];
        (void)gethostname(host, sizeof(host) - 1);
        s.source.host = host[0] ? host : NULL;
        if ((local || image) && realpath(s.source.path, abs))
                s.source.abs_path = abs;
        if (local && bv_source_stable_name(s.source.path, stable, sizeof(stable)) == 0)
                s.source.stable_name = stable;
        s.source.has_identity = bv_source_identity(src, &s.source.identity) >= 0;
        if (reused) {
                memcpy(s.source.reused_from, reused->id, sizeof(s.source.reused_from));
                s.source.unread_backups = reused->source.unread_backups + 1;
        }
        /* Probe failures are ignored: the snapshot then has no probe. */
        if (local && bv_source_probe(s.source.path, &s.source.probe) >= 0)
                s.source.probed = true;
        s.stats = b->stats.counts;
        s.unreadable = (BvByteRange *)b->unreadable, s.n_unreadable = b->n_unreadable;
        s.used_only = b->used_only; /* equal to a reused parent's (unchanged.h) */
        s.chunker = (BvChunkerParams){ .kind = b->chunker.kind, .min = b->chunker.min, .avg = b->chunker.avg,
                                       .max = b->chunker.max }; /* not the key */
        _cleanup_close_ int gc_lock = bv_backend_lock(bv_repo_backend(b->repo), BV_LOCK_COMMIT, true);
        r = gc_lock < 0 ? gc_lock : bv_backup_heal(b->repo, b->pack_codec, root, height, size);
        if (r >= 0)
                r = bv_snapshot_save(bv_repo_backend(b->repo), b->pack_codec, &s);
        bv_probe_done(&s.source.probe);
        if (r < 0)
                return r;
        memcpy(b->stats.snapshot_id, s.id, sizeof(s.id));
        memcpy(b->stats.reused_from, s.source.reused_from, sizeof(s.source.reused_from));
        return 0;
}

static int backup_setup(Backup *b, BvRepo *r_, unsigned threads)
{
        const BvRepoConfig *cfg = bv_repo_config(r_);
        int r;

        b->repo = r_;
        b->index = bv_repo_index(r_);
        b->keyring = bv_repo_keyring(r_);
        bv_repo_chunker_params(r_, &b->chunker);
        b->zstd_level = cfg->zstd_level;
        b->zstd_auto = cfg->compress_mode == BV_COMPRESS_AUTO;
        b->pack_target = cfg->pack_target ? cfg->pack_target : BV_PACK_TARGET_DEFAULT;
        b->resync = b->chunker.kind != BV_CHUNKER_FIXED;
        b->grouping = b->zstd_level > 0;

        r = bv_batch_hasher_new(b->keyring, BATCH_BYTES, threads > 1, &b->hasher);
        if (r < 0)
                return r;
        r = bv_object_codec_new(b->keyring, b->zstd_level, &b->pack_codec);
        if (r < 0)
                return r;
        r = bv_repo_pack_writer_new(r_, b->pack_codec, &b->writer);
        if (r < 0)
                return r;
        r = bv_map_builder_new(map_store, b, &b->map);
        if (r < 0)
                return r;
        return pool_new(b, (size_t)JOBS_PER_THREAD * threads, MAX(b->chunker.max, BV_BLOCK_SIZE));
}

/* Stops the pipeline after a failure: nothing uncommitted survives, claims are released; what
 * was committed is indexed for the next backup to reuse (said in *ret_kept). */
static void backup_abort(Backup *b, int error, BvBackupKept *ret_kept)
{
        backup_set_error(b, error);
        group_discard(b);
        workers_join(b);
        for (size_t i = 0; i < b->n_pending_ids; i++)
                bv_index_unclaim(b->index, b->pending_ids[i]);
        b->n_pending_ids = 0;
        bv_pack_writer_free(TAKE_PTR(b->writer));
        int r = bv_index_flush(b->index); /* else the next backup adopts them (adopt.h) */
        if (ret_kept)
                *ret_kept = (BvBackupKept){ .packs = b->packs, .bytes = b->bytes_committed, .indexed = r >= 0 };
}

static void backup_done(Backup *b)
{
        bv_map_builder_free(b->map);
        bv_parent_map_free(b->parent);
        bv_snapshot_free(b->changed_parent);
        bv_snapshot_used_only_done(&b->used_only);
        free(b->edge_buf);
        bv_pack_writer_free(b->writer);
        bv_object_codec_free(b->pack_codec);
        for (size_t i = 0; i < b->n_jobs; i++)
                bv_group_buf_done(&b->jobs[i]);
        free(b->jobs);
        free(b->pending_ids);
        bv_batch_hasher_free(b->hasher);
        pthread_mutex_destroy(&b->lock);
        pthread_mutex_destroy(&b->pack_lock);
        bv_queue_done(&b->free_jobs);
        bv_queue_done(&b->work);
}

static unsigned threads_wanted(const BvBackupOptions *opts)
{
        long n = opts && opts->threads ? (long)opts->threads : sysconf(_SC_NPROCESSORS_ONLN);

        if (n < 1)
                n = 1;
        return (unsigned)MIN(n, (long)MAX_THREADS);
}

/* Compaction rewrites the index: never beside a gc (both take locks/gc). A gc running now
 * compacts anyway, so a busy lock skips it. */
static int backup_compact(Backup *b)
{
        _cleanup_close_ int fd = bv_backend_lock(bv_repo_backend(b->repo), BV_LOCK_COMPACT, false);
        if (fd == -EBUSY)
                return 0;
        if (fd < 0)
                return fd;
        return bv_index_compact(b->index, INDEX_MAX_SEGMENTS);
}

/* After the last extent: the map root, the last pack, the index, then the snapshot. */
static int backup_finish(Backup *b, BvSource *src, const char *name, uint64_t start_s, uint64_t start_ns)
{
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        uint64_t size;
        int r;

        group_submit(b);
        r = bv_map_builder_finish(b->map, root, &height, &size);
        if (r < 0)
                return r;
        workers_join(b);
        r = backup_get_error(b);
        if (r < 0)
                return r;
        r = pack_commit_locked(b); /* the workers are gone: no lock needed */
        if (r < 0)
                return r;
        r = bv_index_flush(b->index);
        if (r < 0)
                return r;
        r = backup_compact(b);
        if (r >= 0 && b->changed_parent && !b->stats.changed_from[0])
                r = bv_changed_check(b->repo, src, b->changed_parent, root, height, size,
                                     &b->stats.counts.bytes_map_checked, &b->stats.counts.bytes_map_wrong);
        if (r < 0)
                return r;
        b->stats.size = size;
        b->stats.counts.bytes_stored = b->bytes_stored;
        b->stats.counts.packs = b->packs;
        b->stats.counts.seconds = (double)(bv_now_monotonic_ns() - start_ns) / 1e9;
        BvSourceReadStats rs;
        bv_source_read_stats(src, &rs);
        b->stats.counts.bytes_read_cached = rs.bytes_cached;
        b->stats.counts.bytes_read_direct = rs.bytes_direct;
        b->unreadable = rs.unreadable, b->n_unreadable = rs.n_unreadable;
        for (size_t i = 0; i < rs.n_unreadable; i++)
                b->stats.bytes_unreadable += rs.unreadable[i].length;
        b->stats.ranges_unreadable = rs.n_unreadable;
        r = backup_cancelled(b);
        if (r < 0)
                return r;
        return snapshot_publish(b, src, name, start_s, root, height, size, NULL);
}

/* An unchanged file: a snapshot with the parent's map, nothing read, nothing stored. */
static int backup_reuse(Backup *b, BvSource *src, const char *name, const BvSnapshot *parent, uint64_t start_s,
                        uint64_t start_ns)
{
        int r = backup_cancelled(b);
        if (r < 0)
                return r;
        b->stats.size = parent->size;
        b->stats.counts = (BvSnapshotStats){
                .bytes_zero = parent->stats.bytes_zero, .bytes_hole = parent->stats.bytes_hole,
                .bytes_data = parent->stats.bytes_data, .chunks = parent->stats.chunks,
                .seconds = (double)(bv_now_monotonic_ns() - start_ns) / 1e9,
        };
        return snapshot_publish(b, src, name, start_s, parent->root, parent->height, parent->size, parent);
}

/* A changed-block source: the parent paired with its map, or a whole read (and why). */
static int changed_setup(Backup *b, BvRepo *repo, BvSource *src, const char *name, const BvBackupOptions *opts)
{
        if (opts->read_whole_because) { /* the caller knows no parent pairs */
                snprintf(b->stats.changed_reason, sizeof(b->stats.changed_reason), "%s", opts->read_whole_because);
                return bv_source_read_all(src);
        }
        int r = bv_changed_parent(repo, b->pack_codec, b->index, src, name, opts, &b->changed_parent,
                                  b->stats.changed_reason, sizeof(b->stats.changed_reason));

        if (r < 0)
                return r;
        if (r == 0)
                return bv_source_read_all(src);
        memcpy(b->stats.changed_from, b->changed_parent->id, sizeof(b->stats.changed_from));
        r = bv_parent_map_open(repo, b->changed_parent, &b->parent);
        if (r < 0)
                return r;
        /* What the pass will take from the parent, read ahead together; only a hint: the pass
         * meets any failure again, and says what it is */
        const BvByteRange *changed = NULL;
        size_t n = 0;
        if (bv_source_changed_ranges(src, &changed, &n) < 0)
                changed = NULL, n = 0;
        (void)bv_parent_map_prefetch(b->parent, changed, n);
        return 0;
}

/* Backs up src: unread if it is an unchanged file, else read through the pipeline. */
static int backup_body(Backup *b, BvRepo *repo, BvSource *src, const BvBackupOptions *opts, unsigned threads,
                       uint64_t start_s, uint64_t start_ns)
{
        const char *name = opts->name ?: bv_backup_default_name(bv_source_path(src));
        BvSnapshot *reuse = NULL;
        BvSplitter *sp = NULL;
        int r;

        r = bv_used_record(opts->used_only, &b->used_only);
        if (r >= 0)
                r = bv_unchanged_parent(repo, b->pack_codec, b->index, src, name, opts, &b->used_only, &reuse,
                                        b->stats.lost_from, b->stats.other_read_from, &b->stats.other_read_used_only);
        if (r > 0) {
                r = backup_reuse(b, src, name, reuse, start_s, start_ns);
                bv_snapshot_free(reuse);
                return r;
        }
        if (r >= 0 && opts->parent)
                r = bv_parent_map_open(repo, opts->parent, &b->parent);
        else if (r >= 0 && bv_source_changed_map(src))
                r = changed_setup(b, repo, src, name, opts);
        if (r >= 0)
                r = bv_splitter_new(&b->chunker, &sp);
        if (r >= 0)
                r = bv_splitter_set_batch(sp, BATCH_BYTES, on_batch, b);
        if (r >= 0)
                r = workers_start(b, threads);
        if (r >= 0)
                r = backup_read(b, src, sp, opts, start_ns);
        bv_splitter_free(sp);
        if (r >= 0)
                r = backup_finish(b, src, name, start_s, start_ns);
        return r;
}

static int backup_run(BvRepo *repo, BvSource *src, const BvBackupOptions *opts, BvBackupStats *ret_stats)
{
        Backup b = {
                .lock = PTHREAD_MUTEX_INITIALIZER,
                .pack_lock = PTHREAD_MUTEX_INITIALIZER,
                .cancelled = opts->cancelled,
                .start_realtime_ns = bv_now_realtime_ns(),
        };
        uint64_t start_ns = bv_now_monotonic_ns(), start_s;
        unsigned threads = threads_wanted(opts);
        int r;

        start_s = b.start_realtime_ns / 1000000000ull;
        r = backup_setup(&b, repo, threads);
        if (r >= 0) /* what an interrupted backup left unrecorded: known, not stored again */
                r = bv_backup_adopt(repo, b.pack_codec, &b.stats.packs_resumed, &b.stats.bytes_resumed);
        if (r >= 0)
                r = backup_body(&b, repo, src, opts, threads, start_s, start_ns);
        if (r < 0) {
                if (opts->ret_error_offset) {
                        BvSourceReadStats rs;
                        bv_source_read_stats(src, &rs);
                        *opts->ret_error_offset = rs.error_offset;
                }
                backup_abort(&b, r, opts->ret_kept);
                backup_done(&b);
                return r;
        }
        b.stats.counts.seconds = (double)(bv_now_monotonic_ns() - start_ns) / 1e9;
        b.stats.used_uring = bv_source_uses_uring(src);
        b.stats.used_direct = bv_source_uses_direct(src);
        if (opts->progress)
                progress_report(opts, &b, b.stats.size, b.stats.size, b.stats.counts.bytes_read, start_ns,
                                bv_now_monotonic_ns());
        backup_done(&b);
        if (ret_stats)
                *ret_stats = b.stats;
        return 0;
}

/* -EINVAL for a snapshot name bv_snapshot_name_problem refuses: opts->name, or the default
 * name of the source at path. */
static int name_check(const BvBackupOptions *opts, const char *path)
{
        const char *name = opts && opts->name ? opts->name : bv_backup_default_name(path);

        return bv_snapshot_name_problem(name) ? -EINVAL : 0;
}

int bv_backup(BvRepo *repo, BvSource *src, const BvBackupOptions *opts, BvBackupStats *ret_stats)
{
        static const BvBackupOptions no_opts = {};

        if (!repo || !src || name_check(opts, bv_source_path(src)) < 0)
                return -EINVAL;
        return backup_run(repo, src, opts ?: &no_opts, ret_stats);
}

int bv_backup_path(BvRepo *repo, const char *path, const BvBackupOptions *opts, BvBackupStats *ret_stats)
{
        BvSource *src = NULL;
        int r;

        if (!repo || !path || name_check(opts, path) < 0)
                return -EINVAL;
        r = bv_source_open(path, opts ? &opts->source : NULL, &src);
        if (r < 0)
                return r;
        r = bv_backup(repo, src, opts, ret_stats);
        bv_source_free(src);
        return r;
}
