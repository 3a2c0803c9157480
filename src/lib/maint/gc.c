/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A gc run (docs/LIFECYCLE.md, "gc in two phases"): reap dead leases, mark, condemn (rewrite
 * packs, compact the index without the condemned packs' entries into a condemned list, bump the
 * epoch), then finalize every list whose epoch all live leases have reached.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend-s3.h"
#include "buf.h"
#include "fileio.h"
#include "gc-internal.h"
#include "lease.h"
#include "lock.h"
#include "macro.h"
#include "pack.h"

static int packs_add(Packs *ps, const uint8_t id[BV_PACK_ID_SIZE], uint64_t size, uint8_t flags)
{
        if (BV_ARRAY_RESERVE(ps->p, ps->cap, ps->n + 1, 256) < 0)
                return -ENOMEM;
        ps->p[ps->n++] = (PackStat){ .size = size, .flags = flags };
        memcpy(ps->p[ps->n - 1].id, id, BV_PACK_ID_SIZE);
        return 0;
}

static int on_named(const uint8_t id[BV_PACK_ID_SIZE], void *userdata)
{
        return packs_add(userdata, id, 0, PACK_NAMED);
}

static int on_listed(const uint8_t id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        return packs_add(userdata, id, size, PACK_LISTED);
}

/* Every pack the index names or packs/ holds, once, sorted. */
static int packs_collect(Gc *g, Packs *ps)
{
        int r = bv_index_packs(g->index, on_named, ps);
        if (r >= 0)
                r = bv_packset_list(bv_repo_packs(g->repo), on_listed, ps);
        if (r < 0)
                return r;
        if (ps->n > 1)
                qsort(ps->p, ps->n, sizeof(PackStat), gc_pack_cmp);
        size_t n = 0;
        for (size_t i = 0; i < ps->n; i++) {
                if (n > 0 && memcmp(ps->p[n - 1].id, ps->p[i].id, BV_PACK_ID_SIZE) == 0) {
                        ps->p[n - 1].flags |= ps->p[i].flags;
                        ps->p[n - 1].size = MAX(ps->p[n - 1].size, ps->p[i].size);
                } else
                        ps->p[n++] = ps->p[i];
        }
        ps->n = n;
        for (size_t i = 0; i < g->nlists; i++) {
                const uint8_t(*ids)[BV_PACK_ID_SIZE];
                size_t np = bv_index_list_packs(g->lists[i].list, &ids);
                for (size_t j = 0; j < np && ps->n > 0; j++) {
                        PackStat *p = bsearch(ids[j], ps->p, ps->n, sizeof(PackStat), gc_pack_cmp);
                        if (p)
                                p->flags |= PACK_PENDING;
                }
        }
        return 0;
}

typedef struct Count {
        Gc *g;
        Packs *ps;
} Count;

static int count_entry(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, uint64_t pos, bool winner, void *ud)
{
        Count *c = ud;
        PackStat *p = bsearch(loc->pack_id, c->ps->p, c->ps->n, sizeof(PackStat), gc_pack_cmp);
        if (!p)
                return -EBADMSG; /* every segment's packs were collected */
        p->total++;
        c->g->st->entries++;
        if (winner && bit_test(c->g->bits, pos)) {
                p->live++;
                c->g->st->entries_live++;
        }
        return 0;
}

/* Decides each pack's fate; returns the number condemned. */
static size_t packs_plan(Gc *g, Packs *ps)
{
        size_t n = 0;
        for (size_t i = 0; i < ps->n; i++) {
                PackStat *p = &ps->p[i];
                if (p->flags & PACK_PENDING)
                        continue;
                if (!(p->flags & PACK_NAMED)) {
                        p->flags |= PACK_CONDEMN;
                        g->st->packs_orphan++;
                } else if (p->live == 0) {
                        p->flags |= PACK_CONDEMN;
                        g->st->packs_dead++;
                } else if ((p->flags & PACK_LISTED) && (uint64_t)(p->total - p->live) * 100 > (uint64_t)g->max_unused * p->total) {
                        p->flags |= PACK_CONDEMN | PACK_REWRITE;
                        g->st->packs_rewritten++;
                }
                if (p->flags & PACK_CONDEMN) {
                        g->st->bytes_condemned += p->size;
                        n++;
                }
        }
        g->st->packs = ps->n;
        return n;
}

/* Rewrites, then writes the condemned list and the index without the condemned packs, then
 * moves the epoch to epoch + 1. */
static int condemn(Gc *g, const Packs *ps, size_t ncondemned, uint64_t epoch, char list_name[BV_INDEX_NAME_MAX])
{
        _cleanup_free_ uint8_t(*ids)[BV_PACK_ID_SIZE] = calloc(ncondemned + 1, BV_PACK_ID_SIZE);
        uint64_t list_max = 0;
        size_t n = 0;
        if (!ids)
                return -ENOMEM;
        int r = gc_rewrite_packs(g, ps);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ps->n; i++)
                if (ps->p[i].flags & PACK_CONDEMN) {
                        memcpy(ids[n++], ps->p[i].id, BV_PACK_ID_SIZE);
                        list_max += ps->p[i].total;
                }
        r = bv_index_compact_drop(g->index, (const uint8_t(*)[BV_PACK_ID_SIZE])ids, n, list_max, g->gc_dirfd,
                                  epoch + 1, list_name);
        if (r < 0)
                return r;
        r = bv_gc_epoch_write(bv_repo_backend(g->repo), epoch + 1);
        return r < 0 ? gc_note(g, "gc/epoch", false, r) : 0;
}

/* ---- the run ---- */

/* Whether a snapshot was committed since the mark (its references were not marked). */
static int snapshots_added(Gc *g, bool *ret)
{
        BvSnapshot *const *list;
        size_t n;
        int r = bv_repo_reload(g->repo);
        if (r >= 0)
                r = bv_repo_snapshots(g->repo, &list, &n);
        if (r < 0)
                return r;
        *ret = false;
        for (size_t i = 0; i < n && !*ret; i++)
                *ret = !bsearch(list[i]->id, g->snaps, g->nsnaps, sizeof(*g->snaps), gc_snap_cmp);
        return 0;
}

/* A listed record the mark did not see stops the listing (1). */
static int snapshot_unmarked(const BvObjEntry *e, void *userdata)
{
        Gc *g = userdata;
        char id[sizeof(*g->snaps)];

        if (!bv_snapshot_file_id(e->name, id)) /* only records: a stray .snap is no backup */
                return 0;
        return bsearch(id, g->snaps, g->nsnaps, sizeof(*g->snaps), gc_snap_cmp) ? 0 : -ECANCELED;
}

/* Whether snapshots/ names a record the mark did not see (read from the listing: the index
 * must not be refreshed between the mark and the condemn, its positions would move). */
static int snapshots_added_since_mark(Gc *g, bool *ret)
{
        int r = bv_backend_list(bv_repo_backend(g->repo), BV_KIND_SNAPSHOT, snapshot_unmarked, g);

        *ret = r == -ECANCELED;
        return r == -ECANCELED ? 0 : MIN(r, 0);
}

/* Condemns under locks/commit, unless a backup committed since the mark (the next run marks its
 * snapshot): a backup's commit then either precedes the condemn and the check above saw it, or
 * follows it and finds gc/epoch moved (write/heal.h). */
static int condemn_locked(Gc *g, const Packs *ps, size_t ncondemned, uint64_t epoch, char list_name[BV_INDEX_NAME_MAX])
{
        _cleanup_close_ int fd = bv_backend_lock(bv_repo_backend(g->repo), BV_LOCK_COMMIT, true);
        bool added;
        if (fd < 0)
                return fd;
        int r = snapshots_added_since_mark(g, &added);
        if (r < 0)
                return r;
        if (added) {
                g->st->packs_rewritten = g->st->packs_dead = g->st->packs_orphan = 0;
                g->st->bytes_condemned = 0;
                return 0;
        }
        r = condemn(g, ps, ncondemned, epoch, list_name);
        return r < 0 ? r : 1;
}

/* Finalizes each list whose epoch W has come: W <= the epoch at the start and every lease seen
 * then was at W or later; or W is the epoch this run moved to, no live lease is older now, and
 * no snapshot was committed since the mark. */
static int finalize_lists(Gc *g, uint64_t start_epoch, uint64_t start_min, uint64_t epoch)
{
        uint64_t now_min = 0;
        size_t live;
        bool rescanned = false, added = true;
        int r = 0;

        for (size_t i = 0; i < g->nlists && r >= 0; i++) {
                GcList *l = &g->lists[i];
                uint64_t w = bv_index_list_generation(l->list);
                bool ready = w <= start_epoch && start_min >= w;
                if (!ready && w <= epoch) {
                        if (!rescanned) {
                                r = bv_leases_scan(bv_repo_backend(g->repo), true, &now_min, NULL, &live, g->problem);
                                if (r >= 0)
                                        r = snapshots_added(g, &added);
                                if (r < 0)
                                        return r;
                                rescanned = true;
                        }
                        ready = now_min >= w && !added;
                }
                if (ready)
                        r = gc_finalize(g, l);
                else
                        g->st->lists_waiting++;
        }
        return r;
}

/* The epoch cannot go back (docs/LIFECYCLE.md, "An epoch that cannot go back"): gc goes on from
 * the largest of gc/epoch, the epochs of the live leases and those the condemned lists wait for.
 * A gc/epoch behind them was removed or rolled back; read as it is, a new list could wait for an
 * epoch a running backup's lease already carries and be finalized under it. It is written anew
 * (not by a dry run): moving it forward only makes later holders' leases newer, and every list
 * then waiting has already dropped its entries from the index (or finalize's re-check keeps
 * what a segment still names). */
static int epoch_derive(Gc *g, bool dry_run, uint64_t file, uint64_t lease_max, uint64_t *ret)
{
        uint64_t e = MAX(file, lease_max);
        for (size_t i = 0; i < g->nlists; i++)
                e = MAX(e, bv_index_list_generation(g->lists[i].list));
        g->st->epoch_read = file;
        g->st->epoch_start = *ret = e;
        if (e == file || dry_run)
                return 0;
        int r = bv_gc_epoch_write(bv_repo_backend(g->repo), e);
        return r < 0 ? gc_note(g, "gc/epoch", false, r) : 0;
}

/* A dry run creates, reaps and deletes nothing: without gc/ there is no list to load. */
static int gc_prepare(Gc *g, bool dry_run, uint64_t *ret_epoch, uint64_t *ret_min)
{
        uint64_t file, lease_max;
        size_t live;
        if (!g->remote && !dry_run && mkdirat(g->dirfd, "gc", 0700) < 0 && errno != EEXIST)
                return gc_note(g, "gc", true, negative_errno());
        g->gc_dirfd = g->remote ? -EBADF : bv_open_dir_beneath(g->dirfd, "gc");
        if (!g->remote && g->gc_dirfd < 0 && !(dry_run && g->gc_dirfd == -ENOENT))
                return gc_note(g, "gc", true, g->gc_dirfd);
        /* the leases first: whoever registers later reads an epoch this run has seen or moved to */
        int r = bv_leases_scan(bv_repo_backend(g->repo), !dry_run, ret_min, &lease_max, &live, g->problem);
        if (r < 0)
                return r;
        g->st->leases_reaped = (uint64_t)r;
        g->st->leases_live = live;
        r = bv_gc_epoch_read(bv_repo_backend(g->repo), &file);
        if (r < 0)
                return gc_note(g, "gc/epoch", false, r);
        r = bv_repo_reload(g->repo); /* the index as of now, then the snapshots */
        if (r >= 0)
                r = bv_object_codec_new(bv_repo_keyring(g->repo), bv_repo_config(g->repo)->zstd_level, &g->codec);
        if (r >= 0 && (g->gc_dirfd >= 0 || g->remote))
                r = gc_lists_load(g);
        return r < 0 ? r : epoch_derive(g, dry_run, file, lease_max, ret_epoch);
}

/* In a bucket with Object Lock, what gc puts (the packs it rewrites, the index segments and
 * condemned lists) is retained as the config is: until its retention's end, which copy's
 * extension pass moves (docs/LIFECYCLE.md, "gc and Object Lock"), in its mode. Also probes, once
 * a run, whether the bucket has Object Lock (g->object_lock). */
static int gc_lock_like_config(Gc *g)
{
        BvBackend *b = bv_repo_backend(g->repo);
        bv_s3_lock_mode mode = BV_S3_LOCK_NONE;
        int64_t until = 0, now;
        int r = bv_backend_s3_object_lock_enabled(b);
        if (r == -EOPNOTSUPP)
                r = 0;
        if (r < 0)
                return r;
        g->object_lock = r > 0 ? 1 : -1;
        if (r == 0)
                return 0;
        r = bv_backend_s3_retention_mode(b, BV_KIND_CONFIG, NULL, &until, &mode);
        if (r < 0)
                return gc_note(g, "config", false, r);
        now = bv_backend_s3_now(b); /* the storage's clock, which keeps the retention */
        if (until <= now)
                return 0;
        return bv_backend_s3_set_object_lock(b, until - now, mode);
}

/* A damaged index segment or snapshot record hides references: deleting is then unsafe. */
static int gc_check_damage(Gc *g)
{
        const BvRepoProblem *p;
        size_t n;
        bv_repo_damaged(g->repo, &p, &n);
        return n > 0 ? -EUCLEAN : 0;
}

int bv_gc(BvRepo *repo, const BvGcOptions *o, BvGcStats *st)
{
        Gc g = { .repo = repo, .index = bv_repo_index(repo), .dirfd = bv_repo_dirfd(repo, ""), .gc_dirfd = -EBADF,
                 .remote = !bv_backend_is_local(bv_repo_backend(repo)), .st = st, .problem = o->problem,
                 .max_unused = o->max_unused };
        Packs ps = {};
        uint64_t epoch = 0, min = 0;
        char list_name[BV_INDEX_NAME_MAX] = "";
        size_t ncondemned;

        *st = (BvGcStats){};
        if (o->problem)
                *o->problem = (BvRepoProblem){};
        int r = gc_prepare(&g, o->dry_run, &epoch, &min);
        if (r >= 0)
                r = gc_mark(&g);
        if (r >= 0)
                r = gc_check_damage(&g);
        if (r >= 0)
                r = packs_collect(&g, &ps);
        g.ps = &ps;
        if (r >= 0) {
                Count c = { &g, &ps };
                r = bv_index_walk(g.index, count_entry, &c);
        }
        if (r < 0)
                goto out;
        ncondemned = packs_plan(&g, &ps);
        st->epoch = epoch;
        if (ncondemned > 0 && epoch == UINT64_MAX) { /* W = epoch + 1 would wrap to 0: ready at once */
                r = -EOVERFLOW;
                goto out;
        }
        if (o->dry_run) {
                st->lists_waiting = g.nlists;
                goto out;
        }
        if (g.remote) {
                r = gc_lock_like_config(&g);
                if (r < 0)
                        goto out;
        }
        if (ncondemned > 0) {
                r = condemn_locked(&g, &ps, ncondemned, epoch, list_name);
                if (r <= 0)
                        goto finalize;
                st->epoch = epoch + 1;
                r = gc_list_add(&g, list_name, false); /* the mark saw everything: nothing to resurrect */
                if (r < 0)
                        goto out;
        }
finalize:
        if (r >= 0)
                r = finalize_lists(&g, epoch, min, st->epoch);
        if (r >= 0)
                r = gc_reap_tmp(&g);
out:
        free(ps.p);
        gc_lists_free(&g);
        free(g.bits);
        free(g.snaps);
        bv_object_codec_free(g.codec);
        safe_close(g.gc_dirfd);
        return r;
}
