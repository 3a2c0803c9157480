/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Verify: every snapshot record loads; every map tree walks from its root to its end (each
 * node is fetched, authenticated, re-hashed and parsed by the map reader); every data id is
 * in the index; the index segments check; every pack's own index authenticates, and every
 * pack the index names exists. With read_data, each distinct chunk is read and decoded
 * once (in parallel); an occurrence of a damaged chunk is reported per snapshot and image
 * offset.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "chunks.h"
#include "fileio.h"
#include "hex.h"
#include "macro.h"
#include "maptree.h"
#include "timeutil.h"
#include "verify-state.h"
#include "verify.h"

#define MAP_CACHE_NODES 256u
#define MAX_THREADS 16u
#define GROUP_CACHE (8u * 1024 * 1024)

typedef void (*problem_fn)(const BvVerifyProblem *p, void *ud);

/* A set of chunk ids with their expected length and check result (open addressing). */
typedef struct Slot {
        uint8_t id[BV_ID_SIZE];
        BvLocation loc; /* where it is stored: the data check reads in this order */
        uint32_t length;
        uint32_t rank; /* scheduled: the pack's place in the order packs are read */
        bool used;
        bool skip;    /* written: referenced by the snapshot before, not read */
        bool bad;     /* set only after the data check */
        int error;
} Slot;

typedef struct IdSet {
        Slot *slots;
        size_t cap, n; /* cap a power of two */
} IdSet;

typedef struct Verify {
        BvRepo *repo;
        BvObjectCodec *codec; /* for the calling thread */
        problem_fn cb;
        void *ud;
        BvVerifyStats stats;
        IdSet chunks;
        bool read_data;
        bool excluding; /* written: walking the snapshot before, whose chunks are not read */
        bool reporting; /* second walk: report occurrences of damaged chunks */
        const char *snapshot_id;
        pthread_mutex_t lock; /* data check workers */
        Slot **reads;         /* the chunks to read, in storage order */
        size_t n_reads, next, n_bad;
        BvGroupCache *groups;
        bool one_snapshot;    /* a missing pack matters only if the snapshot uses it */
        uint8_t (*used)[BV_PACK_ID_SIZE]; /* packs its data is located in (one_snapshot) */
        size_t n_used, cap_used;
        const BvVerifyOptions *opts;
        void *ud_schedule;
        uint64_t deadline_ns; /* monotonic; 0: none */
        bv_progress_fn progress;  /* of the data check, under lock */
        void *progress_ud;
        uint64_t read_total, start_ns, progress_ns;
} Verify;

#define PROGRESS_NS (250ull * 1000000ull)

/* Called with v->lock held: the data check's progress, every PROGRESS_NS and at the end. */
static void data_progress(Verify *v, bool force)
{
        uint64_t now = bv_now_monotonic_ns();

        if (!v->progress || (!force && now - v->progress_ns < PROGRESS_NS))
                return;
        v->progress_ns = now;
        v->progress(&(BvProgress){ .done = v->stats.bytes_checked, .total = v->read_total,
                                   .work_done = v->stats.bytes_checked, .work_total = v->read_total,
                                   .elapsed_ns = now - v->start_ns },
                    v->progress_ud);
}

static int pack_push(uint8_t (**ids)[BV_PACK_ID_SIZE], size_t *n, size_t *cap, const uint8_t id[BV_PACK_ID_SIZE]);

static size_t id_hash(const uint8_t id[BV_ID_SIZE])
{
        uint64_t h;
        memcpy(&h, id, sizeof(h)); /* keyed hashes: uniform */
        return (size_t)h;
}

static Slot *idset_find(IdSet *s, const uint8_t id[BV_ID_SIZE])
{
        if (s->cap == 0)
                return NULL;
        for (size_t i = id_hash(id) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
                if (!s->slots[i].used)
                        return NULL;
                if (memcmp(s->slots[i].id, id, BV_ID_SIZE) == 0)
                        return &s->slots[i];
        }
}

static int idset_grow(IdSet *s)
{
        size_t cap = s->cap ? 2 * s->cap : 1024;
        Slot *n = calloc(cap, sizeof(*n));

        if (!n)
                return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++) {
                if (!s->slots[i].used)
                        continue;
                size_t j = id_hash(s->slots[i].id) & (cap - 1);
                while (n[j].used)
                        j = (j + 1) & (cap - 1);
                n[j] = s->slots[i];
        }
        free(s->slots);
        s->slots = n;
        s->cap = cap;
        return 0;
}

static int idset_add(IdSet *s, const uint8_t id[BV_ID_SIZE], const BvLocation *loc, uint32_t length)
{
        size_t i;

        if (idset_find(s, id))
                return 0;
        if (2 * (s->n + 1) > s->cap) {
                int r = idset_grow(s);
                if (r < 0)
                        return r;
        }
        for (i = id_hash(id) & (s->cap - 1); s->slots[i].used; i = (i + 1) & (s->cap - 1))
                ;
        memcpy(s->slots[i].id, id, BV_ID_SIZE);
        s->slots[i].loc = *loc;
        s->slots[i].length = length;
        s->slots[i].used = true;
        s->n++;
        return 1;
}

static void report(Verify *v, const char *snapshot_id, uint64_t offset, int error, const char *what,
                   const char *detail)
{
        v->stats.problems++;
        if (v->cb)
                v->cb(&(BvVerifyProblem){ .snapshot_id = snapshot_id, .offset = offset, .error = error,
                                          .what = what, .detail = detail },
                      v->ud);
}

static void report_id(Verify *v, uint64_t offset, int error, const char *what, const uint8_t *id, size_t len)
{
        char hex[2 * BV_ID_SIZE + 1];
        bv_hex_encode(id, len, hex);
        report(v, v->snapshot_id, offset, error, what, hex);
}

static int map_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Verify *v = userdata;
        int r = bv_repo_read_object_alloc(v->repo, v->codec, BV_OBJ_MAP, id, ret_node, ret_len);
        if (r >= 0 && !v->reporting)
                v->stats.map_nodes++;
        return r;
}

/* One data extent of the walk. */
static int check_extent(Verify *v, const BvMapExtent *e)
{
        BvLocation loc;
        Slot *s;
        int r;

        if (v->reporting) {
                s = idset_find(&v->chunks, e->id);
                if (s && s->bad)
                        report_id(v, e->offset, s->error, "chunk", e->id, BV_ID_SIZE);
                return 0;
        }
        if (v->excluding) {
                r = idset_add(&v->chunks, e->id, &(BvLocation){}, (uint32_t)e->length);
                Slot *added = r > 0 ? idset_find(&v->chunks, e->id) : NULL;
                if (added)
                        added->skip = true;
                return MIN(r, 0);
        }
        if (e->length > BV_CHUNK_MAX_LIMIT) {
                report_id(v, e->offset, -EBADMSG, "map node", e->id, BV_ID_SIZE);
                return 0;
        }
        if (v->read_data && idset_find(&v->chunks, e->id))
                return 0; /* seen before: indexed, and to be read once */
        r = bv_index_lookup(bv_repo_index(v->repo), e->id, &loc);
        if (r == -ENOENT) {
                report_id(v, e->offset, -EUCLEAN, "chunk", e->id, BV_ID_SIZE);
                return 0;
        }
        if (r < 0)
                return r;
        if (v->one_snapshot && (v->n_used == 0 || memcmp(v->used[v->n_used - 1], loc.pack_id, BV_PACK_ID_SIZE) != 0)) {
                r = pack_push(&v->used, &v->n_used, &v->cap_used, loc.pack_id);
                if (r < 0)
                        return r;
        }
        if (v->read_data) {
                r = idset_add(&v->chunks, e->id, &loc, (uint32_t)e->length);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Walks a snapshot's map from offset 0 to its size. */
static int walk_snapshot(Verify *v, const BvSnapshot *snap)
{
        BvMapReader *map = NULL;
        uint64_t pos = 0;
        int r;

        v->snapshot_id = snap->id;
        r = bv_map_reader_new(snap->root, snap->height, snap->size, map_fetch, v, MAP_CACHE_NODES, &map);
        if (r < 0) {
                if (!v->excluding)
                        report(v, snap->id, 0, r, "map node", NULL);
                return 0;
        }
        while (pos < snap->size) {
                BvMapExtent e;

                r = bv_map_reader_lookup(map, pos, &e);
                if (r >= 0 && (e.offset > pos || e.length == 0 || pos - e.offset >= e.length))
                        r = -EBADMSG;
                if (r == -ENOMEM)
                        break;
                if (r < 0) { /* the rest of this map cannot be reached */
                        if (!v->reporting && !v->excluding)
                                report(v, snap->id, pos, r, "map node", NULL);
                        r = 0;
                        break;
                }
                if (e.kind == BV_EXTENT_DATA) {
                        r = check_extent(v, &e);
                        if (r < 0)
                                break;
                }
                pos = e.offset + e.length;
        }
        bv_map_reader_free(map);
        return r;
}

/* ---- reading every distinct chunk ---- */

/* Storage order: reading in it decodes each group once and reads each pack front to back. */
static int read_cmp(const void *a, const void *b)
{
        const Slot *sa = *(Slot *const *)a, *sb = *(Slot *const *)b;
        const BvLocation *x = &sa->loc, *y = &sb->loc;
        int c = memcmp(x->pack_id, y->pack_id, BV_PACK_ID_SIZE);

        if (sa->rank != sb->rank)
                return sa->rank < sb->rank ? -1 : 1;

        if (c != 0)
                return c;
        if (x->offset != y->offset)
                return x->offset < y->offset ? -1 : 1;
        return (int)x->member - (int)y->member;
}

static void *data_worker(void *userdata)
{
        Verify *v = userdata;
        _cleanup_free_ uint8_t *buf = malloc(BV_CHUNK_MAX_LIMIT);
        BvObjectCodec *codec = NULL;
        int r;

        r = bv_object_codec_new(bv_repo_keyring(v->repo), bv_repo_config(v->repo)->zstd_level, &codec);
        if (r < 0 || !buf) {
                bv_object_codec_free(codec);
                return (void *)(intptr_t)(r < 0 ? r : -ENOMEM);
        }
        for (;;) {
                Slot *s = NULL;
                size_t got = 0;

                pthread_mutex_lock(&v->lock);
                if (v->next < v->n_reads)
                        s = v->reads[v->next++];
                pthread_mutex_unlock(&v->lock);
                if (!s)
                        break;

                r = bv_repo_read_chunk_at(v->repo, codec, v->groups, s->id, &s->loc, buf, s->length, &got);
                if (r == -ENOBUFS || (r >= 0 && got != s->length))
                        r = -EBADMSG;

                BV_LOCK_GUARD(&v->lock);
                if (r < 0) {
                        s->bad = true;
                        s->error = r;
                        v->n_bad++;
                } else {
                        v->stats.chunks_checked++;
                        v->stats.bytes_checked += got;
                }
                data_progress(v, false);
        }
        bv_object_codec_free(codec);
        return NULL;
}

/* Lists the chunks to read in storage order (scheduled: packs in the order they are due, then
 * storage order; want(rank) says whether a chunk's pack is read at all). */
static int verify_plan_reads(Verify *v, bool (*want)(Verify *v, Slot *s))
{
        v->reads = calloc(MAX(v->chunks.n, (size_t)1), sizeof(Slot *));
        if (!v->reads)
                return -ENOMEM;
        v->n_reads = 0;
        for (size_t i = 0; i < v->chunks.cap; i++) {
                Slot *s = &v->chunks.slots[i];
                if (s->used && !s->skip && (!want || want(v, s)))
                        v->reads[v->n_reads++] = s;
        }
        qsort(v->reads, v->n_reads, sizeof(Slot *), read_cmp);
        v->read_total = 0;
        for (size_t i = 0; i < v->n_reads; i++)
                v->read_total += v->reads[i]->length;
        v->start_ns = v->progress_ns = bv_now_monotonic_ns();
        return 0;
}

/* Reads v->reads[from, to) with a pool of threads. */
static int verify_read_range(Verify *v, size_t from, size_t to)
{
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned n = (unsigned)(ncpu < 1 ? 1 : MIN(ncpu, (long)MAX_THREADS)), started = 0;
        pthread_t tids[MAX_THREADS];
        size_t saved = v->n_reads;
        int ret = 0;

        if (!v->groups) {
                ret = bv_group_cache_new(GROUP_CACHE, 0, &v->groups);
                if (ret < 0)
                        return ret;
        }
        v->next = from;
        v->n_reads = to;
        for (; started < n; started++)
                if (pthread_create(&tids[started], NULL, data_worker, v) != 0)
                        break;
        if (started == 0) {
                v->n_reads = saved;
                return -EAGAIN;
        }
        for (unsigned i = 0; i < started; i++) {
                void *res;
                pthread_join(tids[i], &res);
                if ((intptr_t)res < 0)
                        ret = (int)(intptr_t)res;
        }
        v->n_reads = saved;
        if (to == saved) {
                v->read_total = v->stats.bytes_checked; /* what was read in the end (damaged chunks were not) */
                data_progress(v, true);
        }
        return ret;
}

static int check_data(Verify *v)
{
        int r = verify_plan_reads(v, NULL);
        return r < 0 ? r : verify_read_range(v, 0, v->n_reads);
}

/* ---- scheduled: the least recently verified packs first ---- */

#define BATCH_BYTES (256ull << 20) /* packs read between two saves of the state */
#define BATCH_PACKS 64u

typedef struct Schedule {
        BvVerifyPackState *packs; /* every pack on disk, in the order due */
        size_t n, cap, selected;  /* the first `selected` are read */
        struct PackRank { uint8_t id[BV_PACK_ID_SIZE]; uint32_t rank; } *by_id;
} Schedule;

/* verify-state named as the entry at fault for error; returns error. */
static int state_note(Verify *v, int error)
{
        return bv_repo_problem_note(v->opts->problem, bv_repo_backend(v->repo), BV_VERIFY_STATE_FILE, false, error);
}

static int schedule_on_pack(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        Schedule *sc = userdata;
        if (BV_ARRAY_RESERVE(sc->packs, sc->cap, sc->n + 1, 64) < 0)
                return -ENOMEM;
        sc->packs[sc->n] = (BvVerifyPackState){ .size = size };
        memcpy(sc->packs[sc->n++].id, pack_id, BV_PACK_ID_SIZE);
        return 0;
}

static int rank_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static bool schedule_wants(Verify *v, Slot *s)
{
        Schedule *sc = (Schedule *)v->ud_schedule;
        struct PackRank *pr = sc->n ? bsearch(s->loc.pack_id, sc->by_id, sc->n, sizeof(*pr), rank_cmp) : NULL;

        if (!pr || pr->rank >= sc->selected)
                return false; /* a missing pack is check_store's to report */
        s->rank = pr->rank;
        return true;
}

/* Lists the packs on disk with what the state says of them, due first, and picks the sample. */
static int schedule_plan(Verify *v, Schedule *sc)
{
        _cleanup_free_ BvVerifyPackState *st = NULL;
        uint64_t total = 0, want, sum = 0;
        size_t n_st = 0;
        int r;

        r = bv_verify_state_load(bv_repo_backend(v->repo), &st, &n_st);
        if (r == -EBADMSG)
                v->stats.state_reset = true, n_st = 0;
        else if (r < 0)
                return state_note(v, r);
        r = bv_packset_list(bv_repo_packs(v->repo), schedule_on_pack, sc);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sc->n; i++) {
                const BvVerifyPackState *old = bv_verify_state_find(st, n_st, sc->packs[i].id);
                if (old)
                        sc->packs[i].verified_ns = old->verified_ns, sc->packs[i].bad = old->bad;
                total += sc->packs[i].size;
        }
        bv_verify_state_sort_due(sc->packs, sc->n);
        want = v->opts->sample_percent ? (total * v->opts->sample_percent + 99) / 100 : total;
        for (sc->selected = 0; sc->selected < sc->n && (sc->selected == 0 || sum < want); sc->selected++)
                sum += sc->packs[sc->selected].size;
        sc->by_id = calloc(MAX(sc->n, (size_t)1), sizeof(*sc->by_id));
        if (!sc->by_id)
                return -ENOMEM;
        for (size_t i = 0; i < sc->n; i++) {
                memcpy(sc->by_id[i].id, sc->packs[i].id, BV_PACK_ID_SIZE);
                sc->by_id[i].rank = (uint32_t)i;
        }
        if (sc->n > 0)
                qsort(sc->by_id, sc->n, sizeof(*sc->by_id), rank_cmp);
        return 0;
}

/* Reads the packs [first, last) of the schedule (their chunks start at reads[*pos]) and
 * records them in the state. */
static int schedule_batch(Verify *v, Schedule *sc, size_t first, size_t last, size_t *pos)
{
        size_t end = *pos;
        uint64_t now;
        int r;

        while (end < v->n_reads && v->reads[end]->rank < last)
                end++;
        r = verify_read_range(v, *pos, end);
        if (r < 0)
                return r;
        now = bv_now_realtime_ns();
        for (size_t i = first; i < last; i++)
                sc->packs[i].verified_ns = now, sc->packs[i].bad = false;
        for (size_t i = *pos; i < end; i++)
                if (v->reads[i]->bad)
                        sc->packs[v->reads[i]->rank].bad = true;
        *pos = end;
        v->stats.packs_read += last - first;
        r = bv_verify_state_save(bv_repo_backend(v->repo), sc->packs, sc->n);
        return r < 0 ? state_note(v, r) : 0;
}

static int check_scheduled(Verify *v)
{
        Schedule sc = {};
        size_t first = 0, pos = 0;
        int r;

        v->ud_schedule = &sc;
        r = schedule_plan(v, &sc);
        if (r >= 0)
                r = verify_plan_reads(v, schedule_wants);
        while (r >= 0 && first < sc.selected) {
                uint64_t bytes = 0;
                size_t last = first;

                if (v->deadline_ns && bv_now_monotonic_ns() >= v->deadline_ns) {
                        v->stats.stopped = true;
                        break;
                }
                while (last < sc.selected && last - first < BATCH_PACKS && bytes < BATCH_BYTES)
                        bytes += sc.packs[last++].size;
                r = schedule_batch(v, &sc, first, last, &pos);
                first = last;
        }
        for (size_t i = 0; i < sc.n; i++)
                v->stats.packs_never += sc.packs[i].verified_ns == 0;
        free(sc.packs);
        free(sc.by_id);
        v->ud_schedule = NULL;
        return r;
}

/* ---- index and packs ---- */

typedef struct PackList {
        uint8_t (*ids)[BV_PACK_ID_SIZE];
        size_t n, cap;
        uint8_t (*missing)[BV_PACK_ID_SIZE]; /* named by the index, not on disk */
        size_t n_missing, cap_missing;
} PackList;

static int pack_id_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static int pack_push(uint8_t (**ids)[BV_PACK_ID_SIZE], size_t *n, size_t *cap, const uint8_t id[BV_PACK_ID_SIZE])
{
        if (BV_ARRAY_RESERVE(*ids, *cap, *n + 1, 64) < 0)
                return -ENOMEM;
        memcpy((*ids)[(*n)++], id, BV_PACK_ID_SIZE);
        return 0;
}

static int on_pack(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        PackList *l = userdata;
        return pack_push(&l->ids, &l->n, &l->cap, pack_id);
}

static int on_index_entry(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *userdata)
{
        PackList *l = userdata;

        if (l->n > 0 && bsearch(loc->pack_id, l->ids, l->n, BV_PACK_ID_SIZE, pack_id_cmp))
                return 0;
        for (size_t i = 0; i < l->n_missing; i++)
                if (memcmp(l->missing[i], loc->pack_id, BV_PACK_ID_SIZE) == 0)
                        return 0;
        return pack_push(&l->missing, &l->n_missing, &l->cap_missing, loc->pack_id);
}

static void report_pack(Verify *v, int error, const uint8_t id[BV_PACK_ID_SIZE])
{
        char path[64];
        bv_pack_path(id, path);
        report(v, NULL, 0, error, "pack", path);
}

/* Index segments the repository left out: each is an error, and the rest is checked. */
static int report_damaged_segments(Verify *v)
{
        _cleanup_free_ BvIndexDamage *d = NULL;
        size_t n = 0;
        int r;

        r = bv_index_damaged(bv_repo_index(v->repo), &d, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char path[64];

                snprintf(path, sizeof(path), "index/%.32s", d[i].name);
                report(v, NULL, 0, d[i].error, "index segment", path);
        }
        return 0;
}

static int check_store(Verify *v)
{
        PackList l = {};
        int r;

        r = bv_packset_list(bv_repo_packs(v->repo), on_pack, &l);
        if (r < 0)
                goto out;
        if (l.n > 0) /* no packs at all: l.ids is NULL, which qsort and bsearch must not get */
                qsort(l.ids, l.n, BV_PACK_ID_SIZE, pack_id_cmp);
        for (size_t i = 0; i < l.n; i++) {
                BvPackEntry *entries = NULL;
                size_t count = 0;

                v->stats.packs++;
                r = bv_packset_read_index(bv_repo_packs(v->repo), v->codec, l.ids[i], &entries, &count);
                free(entries);
                if (r == -ENOMEM)
                        goto out;
                if (r < 0)
                        report_pack(v, r, l.ids[i]);
        }
        r = bv_index_check(bv_repo_index(v->repo), on_index_entry, &l);
        if (r == -ENOMEM)
                goto out;
        if (r < 0)
                report(v, NULL, 0, r, "index segment", NULL);
        r = report_damaged_segments(v);
        if (r < 0)
                goto out;
        if (v->n_used > 0)
                qsort(v->used, v->n_used, BV_PACK_ID_SIZE, pack_id_cmp);
        for (size_t i = 0; i < l.n_missing; i++)
                if (!v->one_snapshot ||
                    (v->n_used > 0 && bsearch(l.missing[i], v->used, v->n_used, BV_PACK_ID_SIZE, pack_id_cmp)))
                        report_pack(v, -EUCLEAN, l.missing[i]);
        r = 0;
out:
        free(l.ids);
        free(l.missing);
        return r;
}

/* ---- snapshots ---- */

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct IdList {
        char **names;
        size_t n, cap;
} IdList;

static int id_add(const BvObjEntry *e, void *userdata)
{
        IdList *l = userdata;
        char hex[2 * BV_SNAPSHOT_ID_SIZE + 1], *id;

        if (!bv_snapshot_file_id(e->name, hex)) /* the records every reader lists */
                return 0;
        id = strdup(hex);
        if (!id || BV_ARRAY_RESERVE(l->names, l->cap, l->n + 1, 16) < 0) {
                free(id);
                return -ENOMEM;
        }
        l->names[l->n++] = id;
        return 0;
}

/* Ids of every snapshot record in snapshots/ (bv_snapshot_file_id), sorted. */
static int list_snapshot_ids(BvRepo *r, char ***ret, size_t *ret_n)
{
        IdList l = {};
        int err = bv_backend_list(bv_repo_backend(r), BV_KIND_SNAPSHOT, id_add, &l);

        if (err < 0) {
                for (size_t i = 0; i < l.n; i++)
                        free(l.names[i]);
                free(l.names);
                return err;
        }
        if (l.n > 0)
                qsort(l.names, l.n, sizeof(*l.names), name_cmp);
        *ret = l.names;
        *ret_n = l.n;
        return 0;
}

/* Loads every snapshot record, reporting the ones that do not load. */
static int load_all(Verify *v, BvSnapshot ***ret, size_t *ret_n)
{
        char **ids = NULL;
        size_t n = 0, loaded = 0;
        BvSnapshot **list;
        int r;

        r = list_snapshot_ids(v->repo, &ids, &n);
        if (r < 0)
                return r;
        list = calloc(n ? n : 1, sizeof(*list));
        if (!list)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                int q = bv_snapshot_load(bv_repo_backend(v->repo), v->codec, ids[i], &list[loaded]);
                if (q == -ENOMEM)
                        r = q;
                else if (q < 0)
                        report(v, ids[i], 0, q, "snapshot", ids[i]);
                else
                        loaded++;
        }
        for (size_t i = 0; i < n; i++)
                free(ids[i]);
        free(ids);
        if (r < 0) {
                bv_snapshot_list_free(list, loaded);
                return r;
        }
        *ret = list;
        *ret_n = loaded;
        return 0;
}

static int walk_all(Verify *v, BvSnapshot *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int r = walk_snapshot(v, list[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* written: the chunks of the snapshot before one (same name, older) are not read. */
static int exclude_predecessor(Verify *v, const BvSnapshot *one)
{
        BvSnapshot *const *all;
        size_t n, i;
        int r;

        r = bv_repo_snapshots(v->repo, &all, &n);
        if (r < 0)
                return r;
        for (i = 0; i < n && all[i] != one; i++)
                ;
        while (i-- > 0)
                if (strcmp(all[i]->name ? all[i]->name : "", one->name ? one->name : "") == 0)
                        break;
        if (i == (size_t)-1)
                return 0; /* the first of its name: everything it references was written */
        v->excluding = true;
        r = walk_snapshot(v, all[i]);
        v->excluding = false;
        return r;
}

static int verify_run(Verify *v, const char *spec)
{
        _cleanup_free_ BvSnapshot **owned = NULL;
        BvSnapshot *const *list;
        const BvSnapshot *one;
        size_t n = 0;
        int r;

        if (spec) {
                v->one_snapshot = true;
                r = bv_repo_find_snapshot(v->repo, spec, &one);
                if (r < 0)
                        return r;
                list = (BvSnapshot *const *)&one;
                n = 1;
                if (v->opts->written) {
                        r = exclude_predecessor(v, one);
                        if (r < 0)
                                return r;
                }
        } else {
                BvSnapshot **all = NULL;
                r = load_all(v, &all, &n);
                if (r < 0)
                        return r;
                list = owned = all;
        }
        v->stats.snapshots = n;
        r = walk_all(v, list, n);
        if (r >= 0 && v->read_data && (v->opts->sample_percent || v->opts->max_duration_ns))
                r = check_scheduled(v);
        else if (r >= 0 && v->read_data && v->chunks.n > 0)
                r = check_data(v);
        /* Walk again for the places that use bad chunks only if there are any. */
        if (r >= 0 && v->n_bad > 0) {
                v->reporting = true;
                r = walk_all(v, list, n);
        }
        if (r >= 0)
                r = check_store(v);
        if (owned)
                for (size_t i = 0; i < n; i++)
                        bv_snapshot_free(owned[i]);
        return r;
}

int bv_verify(BvRepo *r, const char *snapshot_spec, bool read_data,
              void (*cb)(const BvVerifyProblem *p, void *ud), void *userdata, BvVerifyStats *ret_stats)
{
        BvVerifyOptions o = { .snapshot = snapshot_spec, .read_data = read_data };
        return bv_verify_opts(r, &o, cb, userdata, ret_stats);
}

int bv_verify_progress(BvRepo *r, const char *snapshot_spec, bool read_data,
                       void (*cb)(const BvVerifyProblem *p, void *ud), void *userdata, bv_progress_fn progress,
                       void *progress_userdata, BvVerifyStats *ret_stats)
{
        BvVerifyOptions o = { .snapshot = snapshot_spec, .read_data = read_data, .progress = progress,
                              .progress_userdata = progress_userdata };
        return bv_verify_opts(r, &o, cb, userdata, ret_stats);
}

int bv_verify_opts(BvRepo *r, const BvVerifyOptions *o, void (*cb)(const BvVerifyProblem *p, void *ud),
                   void *userdata, BvVerifyStats *ret_stats)
{
        bool scheduled = o && (o->sample_percent || o->max_duration_ns);
        Verify v = { .repo = r, .cb = cb, .ud = userdata, .opts = o };
        const char *snapshot_spec = o ? o->snapshot : NULL;
        int ret;

        if (!r || !o || o->sample_percent > 100 || (scheduled && (o->snapshot || !o->read_data)) ||
            (o->written && !o->snapshot))
                return -EINVAL;
        if (o->problem)
                *o->problem = (BvRepoProblem){};
        v.read_data = o->read_data;
        v.progress = o->progress, v.progress_ud = o->progress_userdata;
        if (o->max_duration_ns)
                v.deadline_ns = bv_now_monotonic_ns() + o->max_duration_ns;
        ret = bv_object_codec_new(bv_repo_keyring(r), bv_repo_config(r)->zstd_level, &v.codec);
        if (ret < 0)
                return ret;
        pthread_mutex_init(&v.lock, NULL);
        ret = verify_run(&v, snapshot_spec);
        pthread_mutex_destroy(&v.lock);
        bv_object_codec_free(v.codec);
        free(v.chunks.slots);
        free(v.reads);
        free(v.used);
        bv_group_cache_free(v.groups);
        if (ret < 0)
                return ret;
        if (ret_stats)
                *ret_stats = v.stats;
        return v.stats.problems > 0 ? -EBADMSG : 0;
}
