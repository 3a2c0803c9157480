/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Random access to a snapshot's image. Opening builds a map reader over the snapshot's root
 * (no node is loaded until a read needs it). Reads split at extent boundaries: zero and hole
 * extents read as zeros, data extents come from a decode-once cache of decoded chunks
 * (util/dcache.h, the same mechanism as the group cache of chunks.c) with drop-behind: chunks
 * whose every byte was read out (a sequential stream passing through) are kept only up to a
 * sixty-fourth of the cache, so a whole-image copy recycles a few MiB instead of faulting in the
 * whole cache (on a 256 MiB cache that was a third of nbdkit's system time), while chunks read
 * in parts (random reads, a filesystem's metadata) stay. A lone sequential reader starts a small
 * pool of threads that decode the next chunks ahead.
 *
 * Any stream, lone or not (restore's walk, each of nbdcopy's connections), also gets the map
 * ahead of it: when it enters a leaf of the map tree right after the one before, the pool
 * loads the next leaves and looks their chunks up in the index. Cold, each leaf costs a pack
 * read and each lookup an index page; in the stream's path those waits held up whole requests
 * (most of the I/O waits of a cold nbdcopy copying to the disk the repository is on).
 */
#include <stdatomic.h>
#include <string.h>

#include "buf.h"
#include "chunks.h"
#include "dcache.h"
#include "image.h"
#include "macro.h"
#include "queue.h"
#include "maptree.h"

#define CACHE_DEFAULT (64u * 1024 * 1024)
#define READ_OUT_SHARE 64u /* fully read chunks are kept up to 1/64 of the cache */
#define GROUP_CACHE_SHARE 8u /* decoded groups take an eighth of the cache */
#define GROUP_CACHE_MIN (512u * 1024)
#define READAHEAD_DEFAULT 4u
#define READAHEAD_MAX 64u
#define SHARDS 16u
#define MAP_CACHE_NODES 1024u
#define RA_THREADS 2u
#define RA_QUEUE 16u
#define MAP_AHEAD_LEAVES 4u /* leaves loaded ahead of a stream */
#define LONE_STREAK_MIN 3u /* sequential reads, none overlapping another, before readahead */
/* A remote repository's map nodes (each a ranged GET, a round trip that a local read does not cost)
 * are fetched by this many threads of the map reader, at most MAP_PREFETCH_AHEAD nodes ahead of
 * the lookups; for a restore (opts->map_stream) MAP_PREFETCH_AHEAD_STREAM, each read with the
 * pack window around it, which the restore reads next (measured: more ahead, or reading the nodes
 * alone, cost more GETs than the walk did one node at a time) */
#define MAP_PREFETCH_THREADS 8u
#define MAP_PREFETCH_AHEAD 32u
#define MAP_PREFETCH_AHEAD_STREAM 8u

/* Work for the readahead pool. */
typedef struct RaJob {
        uint64_t offset;
        bool map; /* the map leaf at offset and its index entries, not chunks */
} RaJob;

/* Codecs are per thread: a pool lends one to each caller. */
typedef struct CodecPool {
        pthread_mutex_t lock;
        BvObjectCodec **free;
        size_t n_free, cap;
} CodecPool;

struct BvImage {
        BvRepo *repo;
        uint64_t size;
        BvMapReader *map;
        bool map_windows; /* opts->map_stream: map nodes read with the pack window around them */
        CodecPool codecs;
        BvDecodeCache *chunks; /* decoded chunks */
        BvGroupCache *groups; /* decoded compression groups, whose members the chunk cache then holds */

        unsigned readahead;
        _Atomic uint64_t last_end;      /* where the previous read ended */
        _Atomic unsigned reads_in_flight;
        _Atomic unsigned lone_streak;   /* sequential reads in a row with no other read alongside */
        _Atomic uint64_t decodes;
        _Atomic uint64_t leaves_ahead; /* map leaves loaded ahead of a stream */
        _Atomic uint64_t ra_last_queued; /* extent offset readahead was last queued after */
        BvQueue ra_queue;             /* of RaJob */
        pthread_mutex_t ra_lock;      /* starting the threads */
        _Atomic bool ra_started;
        pthread_t ra_threads[RA_THREADS];
        size_t n_ra_threads;
};

/* ---- codec pool ---- */

static int codec_get(BvImage *img, BvObjectCodec **ret)
{
        CodecPool *p = &img->codecs;

        pthread_mutex_lock(&p->lock);
        if (p->n_free > 0) {
                *ret = p->free[--p->n_free];
                pthread_mutex_unlock(&p->lock);
                return 0;
        }
        pthread_mutex_unlock(&p->lock);
        return bv_object_codec_new(bv_repo_keyring(img->repo), bv_repo_config(img->repo)->zstd_level, ret);
}

static void codec_put(BvImage *img, BvObjectCodec *c)
{
        CodecPool *p = &img->codecs;

        pthread_mutex_lock(&p->lock);
        if (BV_ARRAY_RESERVE(p->free, p->cap, p->n_free + 1, 8) < 0) {
                pthread_mutex_unlock(&p->lock);
                bv_object_codec_free(c);
                return;
        }
        p->free[p->n_free++] = c;
        pthread_mutex_unlock(&p->lock);
}

static void codec_pool_done(CodecPool *p)
{
        for (size_t i = 0; i < p->n_free; i++)
                bv_object_codec_free(p->free[i]);
        free(p->free);
        pthread_mutex_destroy(&p->lock);
}

/* ---- map node fetch ---- */

static int map_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        BvImage *img = userdata;
        BvObjectCodec *c;
        int r;

        if (img->map_windows) { /* a read as a stream: the window that holds it, and the next */
                BvLocation loc;
                if (bv_repo_locate(img->repo, id, &loc) >= 0)
                        (void)bv_repo_advise(img->repo, &loc);
        }
        r = codec_get(img, &c);
        if (r < 0)
                return r;
        r = bv_repo_read_object_alloc(img->repo, c, BV_OBJ_MAP, id, ret_node, ret_len);
        codec_put(img, c);
        return r;
}

/* The extent holding pos: -EBADMSG if the reader answers with one that does not. */
static int map_lookup(BvImage *img, uint64_t pos, BvMapExtent *ret)
{
        int r = bv_map_reader_lookup(img->map, pos, ret);
        if (r >= 0 && (ret->offset > pos || ret->length == 0 || pos - ret->offset >= ret->length))
                return -EBADMSG;
        return r;
}

/* ---- chunk cache ---- */

/* Decodes one chunk of the expected length into buf. */
static int chunk_decode_into(BvImage *img, const uint8_t id[BV_ID_SIZE], size_t expected, uint8_t *buf)
{
        BvObjectCodec *c;
        size_t got;
        int r;

        r = codec_get(img, &c);
        if (r < 0)
                return r;
        r = bv_repo_read_chunk(img->repo, c, img->groups, id, buf, expected, &got);
        codec_put(img, c);
        if (r == -ENOBUFS)
                return -EBADMSG; /* larger than its extent: the map and the chunk disagree */
        if (r < 0)
                return r;
        if (got != expected)
                return -EBADMSG;
        atomic_fetch_add_explicit(&img->decodes, 1, memory_order_relaxed);
        return 0;
}

typedef struct ChunkLoad {
        BvImage *img;
        const uint8_t *id;
        size_t len;
} ChunkLoad;

/* Decodes one chunk of the expected length (malloc'd) for the cache. */
static int chunk_load(void *userdata, BvDecodeCache *c, BvDecoded *ret)
{
        ChunkLoad *l = userdata;
        _cleanup_free_ uint8_t *buf = malloc(l->len ? l->len : 1);
        int r;

        (void)c;
        if (!buf)
                return -ENOMEM;
        r = chunk_decode_into(l->img, l->id, l->len, buf);
        if (r < 0)
                return r;
        *ret = (BvDecoded){ .data = TAKE_PTR(buf), .len = l->len, .cap = l->len };
        return 0;
}

/* Copies [off, off+n) of the chunk into dst (dst NULL and n 0: only make sure it is cached).
 * With wait false, a chunk that another thread is loading is left to it. */
static int cache_read(BvImage *img, const uint8_t id[BV_ID_SIZE], size_t len, void *dst, size_t off, size_t n,
                      bool wait)
{
        bool whole = dst && off == 0 && n == len;
        BvDecodeEntry *e;
        size_t got;
        int r;

        /* A read of the whole chunk, not cached, is decoded straight into the reader's buffer:
         * it would be read out at once, so drop-behind would keep it only briefly anyway; this
         * saves a buffer, a copy and the cache's bookkeeping. */
        r = bv_dcache_get(img->chunks, id, (wait ? 0 : BV_DCACHE_NOWAIT) | (whole ? BV_DCACHE_PEEK : 0),
                          chunk_load, &(ChunkLoad){ .img = img, .id = id, .len = len }, &e);
        if (r < 0)
                return r;
        if (!e)
                return whole ? chunk_decode_into(img, id, len, dst) : 0;
        const uint8_t *data = bv_dcache_data(e, &got);
        if (got != len) {
                bv_dcache_put(img->chunks, e, 0);
                return -EBADMSG;
        }
        if (dst)
                memcpy(dst, data + off, n);
        bv_dcache_put(img->chunks, e, n);
        return 0;
}

/* ---- readahead ---- */

/* Decodes the next readahead data chunks from offset into the cache. Errors are left for
 * the read that needs the chunk to report. */
static void readahead_run(BvImage *img, uint64_t offset)
{
        unsigned done = 0;

        while (done < img->readahead && offset < img->size) {
                BvMapExtent ext;
                if (map_lookup(img, offset, &ext) < 0)
                        return;
                if (ext.kind == BV_EXTENT_DATA) {
                        if (cache_read(img, ext.id, ext.length, NULL, 0, 0, false) < 0)
                                return;
                        done++;
                }
                offset = ext.offset + ext.length;
        }
}

/* Loads the map leaf starting at offset, unless cached, and looks up its data chunks in the
 * index: the stream reading there next finds both in memory. */
static void map_ahead_run(BvImage *img, uint64_t offset)
{
        uint64_t start, pos = offset;
        BvMapExtent ext;

        if (bv_map_reader_leaf_starts(img->map, offset, &start, NULL, 0) >= 0)
                return; /* cached: loaded ahead already, or read */
        atomic_fetch_add_explicit(&img->leaves_ahead, 1, memory_order_relaxed);
        /* map_lookup makes every extent end past where it starts: pos moves on */
        while (pos < img->size && map_lookup(img, pos, &ext) >= 0 && ext.leaf_offset == offset) {
                BvLocation loc;

                if (ext.kind == BV_EXTENT_DATA)
                        (void)bv_repo_locate(img->repo, ext.id, &loc);
                pos = ext.offset + ext.length;
        }
}

static void *readahead_thread(void *userdata)
{
        BvImage *img = userdata;
        RaJob job;

        while (bv_queue_pop(&img->ra_queue, &job) > 0) {
                if (job.map)
                        map_ahead_run(img, job.offset);
                else
                        readahead_run(img, job.offset);
        }
        return NULL;
}

/* Best effort: a full queue drops the request. Threads start with the first request. */
static void readahead_queue(BvImage *img, uint64_t offset, bool map)
{
        if (!atomic_load_explicit(&img->ra_started, memory_order_acquire)) {
                BV_LOCK_GUARD(&img->ra_lock);
                for (; !img->ra_started && img->n_ra_threads < RA_THREADS; img->n_ra_threads++)
                        if (pthread_create(&img->ra_threads[img->n_ra_threads], NULL, readahead_thread, img) != 0)
                                break;
                atomic_store_explicit(&img->ra_started, true, memory_order_release);
        }
        (void)bv_queue_try_push(&img->ra_queue, &(RaJob){ .offset = offset, .map = map });
}

/* After a lookup of ext: a stream that enters a leaf at its first extent, coming from the leaf
 * before it (cached), gets the next leaves loaded ahead. A random read starts a leaf rarely and
 * seldom right after the leaf before it was read. */
static void map_ahead(BvImage *img, const BvMapExtent *ext)
{
        uint64_t start, prev, next[MAP_AHEAD_LEAVES];
        int k;

        /* every extent passes here: only a leaf's first one costs a look at the tree */
        if (ext->offset != ext->leaf_offset || ext->offset == 0)
                return;
        k = bv_map_reader_leaf_starts(img->map, ext->offset, &start, next, MAP_AHEAD_LEAVES);
        if (k <= 0 || bv_map_reader_leaf_starts(img->map, start - 1, &prev, NULL, 0) < 0)
                return;
        for (int i = 0; i < k; i++)
                readahead_queue(img, next[i], true);
}

static void readahead_stop(BvImage *img)
{
        if (img->ra_queue.items)
                bv_queue_cancel(&img->ra_queue);
        for (size_t i = 0; i < img->n_ra_threads; i++)
                pthread_join(img->ra_threads[i], NULL);
        img->n_ra_threads = 0;
}

/* ---- the image ---- */

void bv_image_free(BvImage *img)
{
        if (!img)
                return;
        readahead_stop(img);
        bv_map_reader_free(img->map);
        bv_dcache_free(img->chunks);
        bv_group_cache_free(img->groups);
        codec_pool_done(&img->codecs);
        pthread_mutex_destroy(&img->ra_lock);
        bv_queue_done(&img->ra_queue);
        free(img);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvImage, bv_image_free);

int bv_image_open(BvRepo *r, const BvSnapshot *snap, const BvImageOptions *opts, BvImage **ret)
{
        _cleanup_(bv_image_freep) BvImage *img = NULL;
        size_t cache = opts && opts->cache_bytes ? opts->cache_bytes : CACHE_DEFAULT;
        size_t group_cache = MAX(cache / GROUP_CACHE_SHARE, (size_t)GROUP_CACHE_MIN);
        int rr;

        if (!r || !snap || !ret)
                return -EINVAL;
        img = calloc(1, sizeof(*img));
        if (!img)
                return -ENOMEM;
        img->repo = r;
        img->size = snap->size;
        img->readahead = opts ? MIN(opts->readahead, READAHEAD_MAX) : READAHEAD_DEFAULT;
        atomic_init(&img->last_end, UINT64_MAX);
        atomic_init(&img->ra_last_queued, UINT64_MAX);
        atomic_init(&img->lone_streak, 0);
        atomic_init(&img->leaves_ahead, 0);
        pthread_mutex_init(&img->codecs.lock, NULL);
        pthread_mutex_init(&img->ra_lock, NULL);
        rr = bv_queue_init(&img->ra_queue, sizeof(RaJob), RA_QUEUE);
        if (rr < 0)
                return rr;
        rr = bv_dcache_new(&(BvDecodeCacheOptions){ .cap_bytes = cache > group_cache ? cache - group_cache : cache,
                                                    .key_size = BV_ID_SIZE,
                                                    .shards = SHARDS,
                                                    .read_out_share = READ_OUT_SHARE },
                           &img->chunks);
        if (rr < 0)
                return rr;
        rr = bv_group_cache_new(group_cache, opts ? opts->max_decodes : 0, &img->groups);
        if (rr < 0)
                return rr;
        rr = bv_map_reader_new(snap->root, snap->height, snap->size, map_fetch, img, MAP_CACHE_NODES, &img->map);
        if (rr < 0)
                return rr;
        if (!bv_backend_is_local(bv_repo_backend(r))) {
                img->map_windows = opts && opts->map_stream;
                rr = bv_map_reader_prefetch(img->map, MAP_PREFETCH_THREADS,
                                            img->map_windows ? MAP_PREFETCH_AHEAD_STREAM : MAP_PREFETCH_AHEAD);
                if (rr < 0)
                        return rr;
        }
        *ret = TAKE_PTR(img);
        return 0;
}

uint64_t bv_image_size(const BvImage *img)
{
        return img->size;
}

int bv_image_bad_map_node(BvImage *img, uint8_t ret_id[BV_ID_SIZE])
{
        return bv_map_reader_bad_node(img->map, ret_id);
}

void bv_image_stats(BvImage *img, BvImageStats *ret)
{
        BvMapPrefetchStats m;

        bv_map_reader_prefetch_stats(img->map, &m);
        *ret = (BvImageStats){ .decodes = atomic_load(&img->decodes),
                               .group_decodes = bv_group_cache_decodes(img->groups),
                               .group_cached_bytes = bv_group_cache_bytes(img->groups),
                               .cached_bytes = bv_dcache_bytes(img->chunks),
                               .map_leaves_ahead = atomic_load(&img->leaves_ahead),
                               .map_prefetched = m.prefetched,
                               .map_in_flight_max = m.in_flight_max };
}

/* Reads within one extent. */
static int read_extent(BvImage *img, const BvMapExtent *ext, uint8_t *dst, uint64_t offset, size_t n)
{
        switch (ext->kind) {
        case BV_EXTENT_ZERO:
        case BV_EXTENT_HOLE:
                memset(dst, 0, n);
                return 0;
        case BV_EXTENT_DATA:
                if (ext->length > BV_CHUNK_MAX_LIMIT)
                        return -EBADMSG;
                return cache_read(img, ext->id, (size_t)ext->length, dst, (size_t)(offset - ext->offset), n, true);
        case BV_EXTENT_UNCHANGED: /* never in a stored map */
                break;
        }
        return -EBADMSG;
}

static int image_pread(BvImage *img, void *buf, size_t count, uint64_t offset, uint64_t *ret_bad_offset)
{
        uint8_t *p = buf;
        uint64_t pos = offset, end, last_ext = UINT64_MAX, last_ext_end = 0;
        bool sequential;
        int r;

        if (!buf && count > 0)
                return -EINVAL;
        if (offset > img->size || count > img->size - offset)
                return -ERANGE;
        end = offset + count;
        sequential = atomic_load(&img->last_end) == offset;

        while (pos < end) {
                BvMapExtent ext;
                size_t n;

                r = map_lookup(img, pos, &ext);
                if (r < 0) {
                        if (ret_bad_offset && (r == -EBADMSG || r == -EUCLEAN))
                                *ret_bad_offset = pos;
                        return r;
                }
                map_ahead(img, &ext);
                n = (size_t)MIN(ext.offset + ext.length - pos, end - pos);
                r = read_extent(img, &ext, p, pos, n);
                if (r < 0) {
                        if (ret_bad_offset && (r == -EBADMSG || r == -EUCLEAN))
                                *ret_bad_offset = ext.offset;
                        return r;
                }
                if (ext.kind == BV_EXTENT_DATA) {
                        last_ext = ext.offset;
                        last_ext_end = ext.offset + ext.length;
                }
                p += n;
                pos += n;
        }
        atomic_store(&img->last_end, end);

        /* A lone sequential reader: queue readahead once per chunk, after the last chunk this
         * read touched. A client that keeps several reads in flight (nbdcopy: 64 per connection)
         * is busy enough by itself, and since its reads complete out of order, readahead after
         * one of them would decode again chunks that later reads had already taken (13% more
         * decodes for a whole-image nbdcopy). So readahead waits for LONE_STREAK_MIN sequential
         * reads in a row during which no other read ran, and stops at the first that did. */
        if (sequential && atomic_load(&img->reads_in_flight) == 1)
                atomic_fetch_add(&img->lone_streak, 1);
        else
                atomic_store(&img->lone_streak, 0);
        if (img->readahead > 0 && last_ext != UINT64_MAX && atomic_load(&img->lone_streak) >= LONE_STREAK_MIN &&
            atomic_exchange(&img->ra_last_queued, last_ext) != last_ext)
                readahead_queue(img, last_ext_end, false);
        return 0;
}

int bv_image_pread(BvImage *img, void *buf, size_t count, uint64_t offset, uint64_t *ret_bad_offset)
{
        int r;

        if (!img)
                return -EINVAL;
        if (atomic_fetch_add(&img->reads_in_flight, 1) > 0)
                atomic_store(&img->lone_streak, 0); /* reads overlap: not a lone reader */
        r = image_pread(img, buf, count, offset, ret_bad_offset);
        atomic_fetch_sub(&img->reads_in_flight, 1);
        return r;
}

int bv_image_extents(BvImage *img, uint64_t offset, uint64_t count,
                     int (*cb)(BvExtentKind kind, uint64_t off, uint64_t len, void *ud), void *userdata)
{
        uint64_t pos = offset, end;
        int r;

        if (!img || !cb)
                return -EINVAL;
        if (offset > img->size || count > img->size - offset)
                return -ERANGE;
        end = offset + count;
        while (pos < end) {
                BvMapExtent ext;
                uint64_t ext_end;

                r = map_lookup(img, pos, &ext);
                if (r < 0)
                        return r;
                map_ahead(img, &ext);
                ext_end = MIN(ext.offset + ext.length, end);
                r = cb(ext.kind, pos, ext_end - pos, userdata);
                if (r < 0)
                        return r;
                pos = ext_end;
        }
        return 0;
}
