/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Repair: scan every pack (its own index, then every object, authenticated and re-hashed) into
 * a sorted table of the objects that are whole; compare the chunk index with it; walk every
 * snapshot over it to find what is lost; with force, rebuild the index from it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "chunks.h"
#include "fileio.h"
#include "hex.h"
#include "lock.h"
#include "macro.h"
#include "maptree.h"
#include "repair.h"

#define GROUP_CACHE (8u * 1024 * 1024)
#define FLUSH_ENTRIES (1u << 20) /* a segment per million entries, as a backup writes them */
#define SEGMENT_NAME_LEN 20      /* <16 hex>.idx */

/* A whole object: where it is. */
typedef struct Good {
        uint8_t id[BV_ID_SIZE];
        uint8_t pack_id[BV_PACK_ID_SIZE];
        uint32_t offset, length, raw_length;
        uint8_t type, member;
} Good;

typedef struct Repair {
        BvRepo *repo;
        BvObjectCodec *codec;
        BvGroupCache *groups;
        void (*cb)(const BvRepairEvent *e, void *ud);
        void *ud;
        BvRepairStats st;
        Good *good;
        size_t n_good, cap_good;
        uint8_t *buf;
        size_t buf_cap;
        uint8_t (*damaged)[BV_PACK_ID_SIZE]; /* packs whose own index does not read, sorted */
        size_t n_damaged;
} Repair;

static void emit(Repair *R, const BvRepairEvent *e)
{
        if (R->cb)
                R->cb(e, R->ud);
}

static void emit_damaged(Repair *R, const char *what, const char *detail, uint64_t offset, int error)
{
        emit(R, &(BvRepairEvent){ .kind = BV_REPAIR_DAMAGED, .what = what, .detail = detail, .offset = offset,
                                  .error = error });
}

static int good_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_ID_SIZE);
}

static int good_cmp_pack(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

/* The first whole copy of id, or NULL. */
static const Good *good_find(const Repair *R, const uint8_t id[BV_ID_SIZE])
{
        size_t lo = 0, hi = R->n_good;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (memcmp(R->good[mid].id, id, BV_ID_SIZE) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < R->n_good && memcmp(R->good[lo].id, id, BV_ID_SIZE) == 0 ? &R->good[lo] : NULL;
}

static BvLocation good_location(const Good *g)
{
        BvLocation loc = { .offset = g->offset, .length = g->length, .type = g->type, .member = g->member };
        memcpy(loc.pack_id, g->pack_id, BV_PACK_ID_SIZE);
        return loc;
}

/* Whether loc is one of the whole copies of id. */
static bool good_at(const Repair *R, const uint8_t id[BV_ID_SIZE], const BvLocation *loc)
{
        for (const Good *g = good_find(R, id); g && g < R->good + R->n_good && memcmp(g->id, id, BV_ID_SIZE) == 0;
             g++)
                if (memcmp(g->pack_id, loc->pack_id, BV_PACK_ID_SIZE) == 0 && g->offset == loc->offset &&
                    g->member == loc->member)
                        return true;
        return false;
}

/* ---- scanning the packs ---- */

/* Reads one entry of a pack's index: 0 if the object is whole. */
static int check_object(Repair *R, const uint8_t pack_id[BV_PACK_ID_SIZE], const BvPackEntry *e)
{
        BvLocation loc = { .offset = e->offset, .length = e->length, .type = e->type, .member = e->member };
        size_t got = 0;
        void *enc;
        int r;

        memcpy(loc.pack_id, pack_id, BV_PACK_ID_SIZE);
        r = bv_buf_reserve(&R->buf, &R->buf_cap, MAX((size_t)e->raw_length, (size_t)1));
        if (r < 0)
                return r;
        if (e->type == BV_OBJ_CHUNK || e->type == BV_OBJ_GROUP)
                r = bv_repo_read_chunk_at(R->repo, R->codec, R->groups, e->id, &loc, R->buf, R->buf_cap, &got);
        else {
                r = bv_repo_read_encoded(R->repo, R->codec, &loc, &enc);
                if (r >= 0)
                        r = bv_object_decode(R->codec, e->type, e->id, enc, e->length, R->buf, R->buf_cap, &got);
        }
        if (r == -ENOBUFS || (r >= 0 && got != e->raw_length))
                r = -EBADMSG;
        return r;
}

static int good_push(Repair *R, const uint8_t pack_id[BV_PACK_ID_SIZE], const BvPackEntry *e)
{
        if (R->n_good == R->cap_good) {
                size_t cap = R->cap_good ? 2 * R->cap_good : 4096;
                Good *p = realloc(R->good, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                R->good = p;
                R->cap_good = cap;
        }
        Good *g = &R->good[R->n_good++];
        *g = (Good){ .offset = e->offset, .length = e->length, .raw_length = e->raw_length, .type = e->type,
                     .member = e->member };
        memcpy(g->id, e->id, BV_ID_SIZE);
        memcpy(g->pack_id, pack_id, BV_PACK_ID_SIZE);
        return 0;
}

static int scan_pack(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        Repair *R = userdata;
        _cleanup_free_ BvPackEntry *entries = NULL;
        size_t count = 0;
        char path[64];
        int r;

        R->st.packs++;
        bv_pack_path(pack_id, path);
        r = bv_packset_read_index(bv_repo_packs(R->repo), R->codec, pack_id, &entries, &count);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                void *p = realloc(R->damaged, (R->n_damaged + 1) * BV_PACK_ID_SIZE);
                if (!p)
                        return -ENOMEM;
                R->damaged = p;
                memcpy(R->damaged[R->n_damaged++], pack_id, BV_PACK_ID_SIZE);
                R->st.packs_damaged++;
                emit_damaged(R, "pack", path, 0, r);
                return 0;
        }
        for (size_t i = 0; i < count; i++) {
                R->st.objects++;
                r = check_object(R, pack_id, &entries[i]);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        char hex[2 * BV_ID_SIZE + 1], detail[2 * BV_ID_SIZE + 80];

                        bv_hex_encode(entries[i].id, BV_ID_SIZE, hex);
                        snprintf(detail, sizeof(detail), "%s in pack %s", hex, path);
                        R->st.objects_damaged++;
                        emit_damaged(R, "object", detail, entries[i].offset, r);
                        continue;
                }
                r = good_push(R, pack_id, &entries[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A pack whose own index does not read may still hold whole objects: those the chunk index
 * locates in it are read (authenticated, re-hashed) and kept, so a rebuild never drops them. */
static int salvage_entry(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *userdata)
{
        Repair *R = userdata;
        BvPackEntry e = { .type = loc->type, .member = loc->member, .offset = loc->offset, .length = loc->length };
        size_t got = 0;
        void *enc;
        int r;

        if (R->n_damaged == 0 || !bsearch(loc->pack_id, R->damaged, R->n_damaged, BV_PACK_ID_SIZE, good_cmp_pack))
                return 0;
        memcpy(e.id, id, BV_ID_SIZE);
        r = bv_buf_reserve(&R->buf, &R->buf_cap, BV_OBJECT_MAX_RAW);
        if (r < 0)
                return r;
        if (e.type == BV_OBJ_CHUNK || e.type == BV_OBJ_GROUP)
                r = bv_repo_read_chunk_at(R->repo, R->codec, R->groups, id, loc, R->buf, R->buf_cap, &got);
        else {
                r = bv_repo_read_encoded(R->repo, R->codec, loc, &enc);
                if (r >= 0)
                        r = bv_object_decode(R->codec, e.type, id, enc, e.length, R->buf, R->buf_cap, &got);
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        e.raw_length = (uint32_t)got;
        return good_push(R, loc->pack_id, &e);
}

/* ---- the index against the packs ---- */

static int on_index_entry(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *userdata)
{
        Repair *R = userdata;
        if (!good_find(R, id))
                R->st.index_stale++;
        return 0;
}

static int compare_index(Repair *R)
{
        BvIndex *x = bv_repo_index(R->repo);
        _cleanup_free_ BvIndexDamage *d = NULL;
        size_t n = 0;
        int r;

        r = bv_index_damaged(x, &d, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char path[64];
                snprintf(path, sizeof(path), "index/%.32s", d[i].name);
                emit_damaged(R, "index segment", path, 0, d[i].error);
        }
        R->st.segments_damaged = n;
        r = bv_index_check(x, on_index_entry, R);
        if (r == -ENOMEM)
                return r;
        if (r < 0) { /* a mapped segment whose body does not check */
                R->st.segments_damaged++;
                emit_damaged(R, "index segment", "index/", 0, r);
        }
        for (size_t i = 0; i < R->n_good; i++) {
                BvLocation loc;

                if (i > 0 && memcmp(R->good[i - 1].id, R->good[i].id, BV_ID_SIZE) == 0)
                        continue;
                r = bv_index_lookup(x, R->good[i].id, &loc);
                if (r < 0 && r != -ENOENT)
                        return r;
                if (r == -ENOENT || !good_at(R, R->good[i].id, &loc))
                        R->st.index_missing++;
        }
        return 0;
}

static bool needs_rebuild(const Repair *R)
{
        return R->st.segments_damaged || R->st.index_missing || R->st.index_stale;
}

/* ---- what the snapshots lose ---- */

static int repair_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Repair *R = userdata;
        const Good *g = good_find(R, id);
        BvLocation loc;
        void *enc;
        int r;

        if (!g)
                return -EUCLEAN;
        loc = good_location(g);
        r = bv_repo_read_encoded(R->repo, R->codec, &loc, &enc);
        if (r < 0)
                return r;
        return bv_object_decode_alloc(R->codec, BV_OBJ_MAP, id, enc, loc.length, ret_node, ret_len);
}

typedef struct Lost {
        Repair *R;
        const BvSnapshot *snap;
        uint64_t start, end;
        const char *what;
} Lost;

static void lost_flush(Lost *l)
{
        if (l->end <= l->start)
                return;
        l->R->st.ranges_lost++;
        l->R->st.bytes_lost += l->end - l->start;
        emit(l->R, &(BvRepairEvent){ .kind = BV_REPAIR_LOST, .what = l->what, .offset = l->start,
                                     .length = l->end - l->start, .snapshot = l->snap, .error = -EBADMSG });
        l->start = l->end = 0;
}

static void lost_add(Lost *l, uint64_t start, uint64_t end, const char *what)
{
        if (l->end > l->start && l->end == start && strcmp(l->what, what) == 0) {
                l->end = end;
                return;
        }
        lost_flush(l);
        l->start = start, l->end = end, l->what = what;
}

/* The lookup at pos failed (a map node is not whole): where the unreachable part ends, i.e. the
 * start of the first extent after pos that can be looked up (or the size). */
static int unreachable_end(BvMapReader *map, uint64_t pos, uint64_t size, uint64_t *ret)
{
        uint64_t lo = pos, hi, step = 4096;
        BvMapExtent e;
        int r;

        for (;; step *= 2) { /* lo fails; find a hi that does not, or the end */
                hi = size - pos > step ? pos + step : size;
                if (hi == size || bv_map_reader_lookup(map, hi, &e) >= 0)
                        break;
                lo = hi;
        }
        while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;
                r = bv_map_reader_lookup(map, mid, &e);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        lo = mid;
                else
                        hi = mid;
        }
        if (hi < size) {
                r = bv_map_reader_lookup(map, hi, &e);
                if (r < 0)
                        return r;
                hi = MAX(e.offset, pos + 1);
        }
        *ret = hi;
        return 0;
}

static int snapshot_losses(Repair *R, const BvSnapshot *snap)
{
        BvMapReader *map = NULL;
        Lost l = { .R = R, .snap = snap };
        uint64_t pos = 0, before = R->st.ranges_lost;
        int r;

        r = bv_map_reader_new(snap->root, snap->height, snap->size, repair_fetch, R, 256, &map);
        if (r < 0) {
                lost_add(&l, 0, snap->size, "map");
                pos = snap->size, r = 0;
        }
        while (pos < snap->size) {
                BvMapExtent e;

                r = bv_map_reader_lookup(map, pos, &e);
                if (r == -ENOMEM)
                        break;
                if (r < 0) {
                        uint64_t end;
                        r = unreachable_end(map, pos, snap->size, &end);
                        if (r < 0)
                                break;
                        lost_add(&l, pos, end, "map");
                        pos = end;
                        continue;
                }
                if (e.kind == BV_EXTENT_DATA && !good_find(R, e.id))
                        lost_add(&l, e.offset, e.offset + e.length, "data");
                pos = e.offset + e.length;
        }
        bv_map_reader_free(map);
        if (r < 0)
                return r;
        lost_flush(&l);
        R->st.snapshots_lossy += R->st.ranges_lost > before;
        return 0;
}

static int find_losses(Repair *R)
{
        BvSnapshot *const *list;
        const BvRepoProblem *p;
        size_t n, np;
        int r;

        r = bv_repo_snapshots(R->repo, &list, &n);
        if (r < 0)
                return r;
        bv_repo_damaged(R->repo, &p, &np);
        for (size_t i = 0; i < np; i++)
                if (strncmp(p[i].path, "snapshots/", 10) == 0)
                        emit_damaged(R, "snapshot", p[i].path, 0, p[i].error);
        R->st.snapshots = n;
        for (size_t i = 0; i < n; i++) {
                r = snapshot_losses(R, list[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- rebuilding the index ---- */

static int storage_cmp(const void *a, const void *b)
{
        const Good *x = a, *y = b;
        int c = memcmp(x->pack_id, y->pack_id, BV_PACK_ID_SIZE);

        if (c != 0)
                return c;
        if (x->offset != y->offset)
                return x->offset < y->offset ? -1 : 1;
        return (int)x->member - (int)y->member;
}

/* The names of the segment files in index/ now (a malloc'd array of SEGMENT_NAME_LEN + 1). */
static int list_segments(Repair *R, char (**ret)[SEGMENT_NAME_LEN + 1], size_t *ret_n)
{
        char (*names)[SEGMENT_NAME_LEN + 1] = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;
        int r;

        r = bv_opendir_beneath(bv_repo_dirfd(R->repo, "index"), ".", &d);
        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                if (!bv_index_name_valid(de->d_name)) /* what the index opens, upper-case hex too */
                        continue;
                if (BV_ARRAY_RESERVE(names, cap, n + 1, 64) < 0) {
                        closedir(d);
                        free(names);
                        return -ENOMEM;
                }
                memcpy(names[n++], de->d_name, SEGMENT_NAME_LEN + 1);
        }
        closedir(d);
        *ret = names;
        *ret_n = n;
        return 0;
}

/* Adds the whole objects of one pack, R->good[from, to) in storage order, to the pending index. */
static int add_pack(Repair *R, size_t from, size_t to)
{
        _cleanup_free_ BvPackEntry *e = calloc(to - from, sizeof(*e));

        if (!e)
                return -ENOMEM;
        for (size_t i = from; i < to; i++) {
                const Good *g = &R->good[i];
                e[i - from] = (BvPackEntry){ .type = g->type, .member = g->member, .offset = g->offset,
                                             .length = g->length, .raw_length = g->raw_length };
                memcpy(e[i - from].id, g->id, BV_ID_SIZE);
        }
        return bv_index_add_pack(bv_repo_index(R->repo), R->good[from].pack_id, e, to - from);
}

static int flush(Repair *R)
{
        BvIndex *x = bv_repo_index(R->repo);
        if (bv_index_pending(x) == 0)
                return 0;
        R->st.segments_written++;
        return bv_index_flush(x);
}

/* New segments naming every whole object, durably; then the old segments go. */
static int rebuild(Repair *R)
{
        _cleanup_free_ char(*old)[SEGMENT_NAME_LEN + 1] = NULL;
        _cleanup_close_ int lock = -EBADF;
        int index_fd = bv_repo_dirfd(R->repo, "index");
        size_t n_old = 0, from = 0;
        int r;

        lock = bv_backend_lock(bv_repo_backend(R->repo), BV_LOCK_GC, false);
        if (lock < 0)
                return lock;
        r = list_segments(R, &old, &n_old);
        if (r < 0)
                return r;
        if (R->n_good > 0)
                qsort(R->good, R->n_good, sizeof(*R->good), storage_cmp);
        for (size_t i = 1; r >= 0 && i <= R->n_good; i++) {
                if (i < R->n_good && memcmp(R->good[i].pack_id, R->good[from].pack_id, BV_PACK_ID_SIZE) == 0)
                        continue;
                r = add_pack(R, from, i);
                if (r >= 0 && bv_index_pending(bv_repo_index(R->repo)) >= FLUSH_ENTRIES)
                        r = flush(R);
                from = i;
        }
        if (r >= 0)
                r = flush(R);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_old; i++) {
                if (unlinkat(index_fd, old[i], 0) < 0 && errno != ENOENT)
                        return -errno;
                R->st.segments_removed++;
        }
        r = bv_fsync_dir(index_fd);
        if (r < 0)
                return r;
        R->st.index_rebuilt = true;
        return 0;
}

/* Every pack, scanned; an entry of packs/ that is not a pack directory or file is refused. */
static int scan_packs(Repair *R, BvRepoProblem *problem)
{
        char refused[64] = "", path[80];
        int r = bv_packset_list_strict(bv_repo_packs(R->repo), scan_pack, R, refused);

        if (r >= 0 || !refused[0])
                return r;
        snprintf(path, sizeof(path), "packs/%s", refused);
        return bv_repo_problem_note(problem, bv_repo_backend(R->repo), path, !strchr(refused, '/'), r);
}

static int repair_run(Repair *R, bool force, BvRepoProblem *problem)
{
        int r;

        r = scan_packs(R, problem);
        if (r < 0)
                return r;
        if (R->n_damaged > 0) {
                qsort(R->damaged, R->n_damaged, BV_PACK_ID_SIZE, good_cmp_pack);
                r = bv_index_check(bv_repo_index(R->repo), salvage_entry, R);
                if (r == -ENOMEM)
                        return r;
        }
        if (R->n_good > 0)
                qsort(R->good, R->n_good, sizeof(*R->good), good_cmp);
        r = compare_index(R);
        if (r < 0)
                return r;
        r = find_losses(R);
        if (r < 0)
                return r;
        if (force && needs_rebuild(R)) {
                r = rebuild(R);
                if (r < 0)
                        return r;
        }
        if (needs_rebuild(R) && !R->st.index_rebuilt)
                return -EUCLEAN;
        return R->st.ranges_lost > 0 ? -EBADMSG : 0;
}

int bv_repair(BvRepo *r, bool force, void (*cb)(const BvRepairEvent *e, void *ud), void *userdata,
              BvRepairStats *ret_stats, BvRepoProblem *ret_problem)
{
        Repair R = { .repo = r, .cb = cb, .ud = userdata };
        int ret;

        if (ret_problem)
                *ret_problem = (BvRepoProblem){};
        if (!r)
                return -EINVAL;
        ret = bv_object_codec_new(bv_repo_keyring(r), bv_repo_config(r)->zstd_level, &R.codec);
        if (ret >= 0)
                ret = bv_group_cache_new(GROUP_CACHE, 0, &R.groups);
        if (ret >= 0)
                ret = repair_run(&R, force, ret_problem);
        bv_group_cache_free(R.groups);
        bv_object_codec_free(R.codec);
        free(R.good);
        free(R.buf);
        free(R.damaged);
        if (ret < 0 && ret != -EUCLEAN && ret != -EBADMSG)
                return ret;
        if (ret_stats)
                *ret_stats = R.st;
        return ret;
}
