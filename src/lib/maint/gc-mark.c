/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * gc's mark (one bit per index position, walking each snapshot's map once per distinct
 * subtree), its condemned lists (gc/<16 hex>.idx) and their finalize (docs/LIFECYCLE.md).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend-s3.h"
#include "buf.h"
#include "fileio.h"
#include "gc-internal.h"
#include "macro.h"
#include "maptree.h"
#include "pack.h"

int gc_pack_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static int list_name_cmp(const void *a, const void *b)
{
        return strcmp(((const GcList *)a)->name, ((const GcList *)b)->name);
}

int gc_list_add(Gc *g, const char *name, bool mark)
{
        GcList *p = reallocarray(g->lists, g->nlists + 1, sizeof(GcList));
        if (!p)
                return -ENOMEM;
        g->lists = p;
        GcList *l = &g->lists[g->nlists];
        *l = (GcList){};
        snprintf(l->name, sizeof(l->name), "%s", name);
        int r = g->remote ? bv_index_list_open_backend(bv_repo_backend(g->repo), name, &l->list)
                          : bv_index_list_open(g->gc_dirfd, name, &l->list);
        if (r < 0) { /* a damaged list: gc stops rather than forget what it condemned */
                char path[sizeof("gc/") + BV_INDEX_NAME_MAX];
                snprintf(path, sizeof(path), "gc/%s", name);
                return gc_note(g, path, false, r);
        }
        l->bits = mark ? calloc(bv_index_list_count(l->list) / 8 + 1, 1) : NULL;
        if (mark && !l->bits) {
                bv_index_list_free(l->list);
                return -ENOMEM;
        }
        g->nlists++;
        return 0;
}

static int list_listed(const BvObjEntry *e, void *userdata)
{
        return bv_index_name_valid(e->name) ? gc_list_add(userdata, e->name, true) : 0; /* not gc/epoch */
}

int gc_lists_load(Gc *g)
{
        if (g->remote) {
                int r = bv_backend_list(bv_repo_backend(g->repo), BV_KIND_CONDEMNED, list_listed, g);
                if (r < 0)
                        return g->problem && g->problem->path[0] ? r : gc_note(g, "gc", true, r);
                if (g->nlists > 1)
                        qsort(g->lists, g->nlists, sizeof(GcList), list_name_cmp);
                return 0;
        }
        DIR *d;
        int r = bv_opendir_beneath(g->dirfd, "gc", &d);
        if (r < 0)
                return gc_note(g, "gc", true, r);
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d)))
                if (bv_index_name_valid(de->d_name))
                        r = gc_list_add(g, de->d_name, true);
        if (r >= 0 && errno)
                r = gc_note(g, "gc", true, negative_errno());
        closedir(d);
        if (r >= 0 && g->nlists > 1)
                qsort(g->lists, g->nlists, sizeof(GcList), list_name_cmp);
        return r;
}

void gc_lists_free(Gc *g)
{
        for (size_t i = 0; i < g->nlists; i++) {
                bv_index_list_free(g->lists[i].list);
                free(g->lists[i].bits);
        }
        free(g->lists);
        g->lists = NULL;
        g->nlists = 0;
}

/* 1: seen before (a node's subtree is then skipped), 0: marked now (bv_map_walk_ids). */
static int mark_id(void *userdata, const uint8_t id[BV_ID_SIZE])
{
        Gc *g = userdata;
        BvLocation loc;
        uint64_t pos;
        int r = bv_index_lookup_position(g->index, id, &loc, &pos);
        if (r == 0) {
                if (bit_test(g->bits, pos))
                        return 1;
                bit_set(g->bits, pos);
                return 0;
        }
        if (r != -ENOENT)
                return r;
        for (size_t i = 0; i < g->nlists; i++)
                if (bv_index_list_find(g->lists[i].list, id, &loc, &pos) == 0) {
                        if (bit_test(g->lists[i].bits, pos))
                                return 1;
                        bit_set(g->lists[i].bits, pos);
                        return 0;
                }
        g->st->missing++;
        return 0;
}

/* A map node from the index, or from a condemned list that still holds it. */
static int mark_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Gc *g = userdata;
        BvLocation loc;
        uint64_t entry;
        void *enc;
        int r = bv_repo_read_object_alloc(g->repo, g->codec, BV_OBJ_MAP, id, ret_node, ret_len);
        if (r != -EUCLEAN)
                return r;
        for (size_t i = 0; i < g->nlists; i++)
                if (bv_index_list_find(g->lists[i].list, id, &loc, &entry) == 0) {
                        r = bv_repo_read_encoded(g->repo, g->codec, &loc, &enc);
                        if (r < 0)
                                return r;
                        return bv_object_decode_alloc(g->codec, BV_OBJ_MAP, id, enc, loc.length, ret_node, ret_len);
                }
        return -EUCLEAN;
}

int gc_snap_cmp(const void *a, const void *b)
{
        return strcmp(a, b);
}

int gc_mark(Gc *g)
{
        BvSnapshot *const *list;
        size_t n;
        int r = bv_repo_snapshots(g->repo, &list, &n);
        if (r < 0)
                return r;
        g->npos = bv_index_positions(g->index);
        g->bits = calloc(g->npos / 8 + 1, 1);
        g->snaps = calloc(n + 1, sizeof(*g->snaps));
        if (!g->bits || !g->snaps)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const BvSnapshot *s = list[i];
                r = bv_map_walk_ids(s->root, s->height, s->size, mark_fetch, g, mark_id, g);
                if (r < 0)
                        return r == -ENOENT ? -EUCLEAN : r;
                snprintf(g->snaps[i], sizeof(g->snaps[i]), "%s", s->id);
        }
        g->nsnaps = n;
        qsort(g->snaps, n, sizeof(*g->snaps), gc_snap_cmp);
        g->st->snapshots = n;
        return 0;
}

typedef struct Found {
        uint8_t id[BV_ID_SIZE];
        BvLocation loc;
} Found;

static int found_cmp(const void *a, const void *b)
{
        return memcmp(((const Found *)a)->loc.pack_id, ((const Found *)b)->loc.pack_id, BV_PACK_ID_SIZE);
}

/* Puts back into the index (a new durable segment) the entries of l that a snapshot references
 * and the index lacks; *ret and *ret_n: them, sorted by pack. */
static int resurrect(Gc *g, GcList *l, Found **ret, size_t *ret_n)
{
        _cleanup_free_ Found *f = NULL;
        size_t n = 0, cap = 0;
        int r = 0;

        for (uint64_t i = 0; l->bits && i < bv_index_list_count(l->list); i++) {
                Found x;
                BvLocation cur;
                if (!bit_test(l->bits, i))
                        continue;
                r = bv_index_list_entry(l->list, i, x.id, &x.loc);
                if (r < 0)
                        return r;
                r = bv_index_lookup(g->index, x.id, &cur);
                if (r == 0)
                        continue;
                if (r != -ENOENT)
                        return r;
                if (BV_ARRAY_RESERVE(f, cap, n + 1, 64) < 0)
                        return -ENOMEM;
                f[n++] = x;
        }
        if (n > 1)
                qsort(f, n, sizeof(Found), found_cmp);
        for (size_t i = 0, j; i < n; i = j) {
                for (j = i; j < n && memcmp(f[j].loc.pack_id, f[i].loc.pack_id, BV_PACK_ID_SIZE) == 0; j++)
                        ;
                _cleanup_free_ BvPackEntry *e = calloc(j - i, sizeof(BvPackEntry));
                if (!e)
                        return -ENOMEM;
                for (size_t k = i; k < j; k++)
                        e[k - i] = (BvPackEntry){ .type = f[k].loc.type, .member = f[k].loc.member,
                                                  .offset = f[k].loc.offset, .length = f[k].loc.length };
                for (size_t k = i; k < j; k++)
                        memcpy(e[k - i].id, f[k].id, BV_ID_SIZE);
                r = bv_index_add_pack(g->index, f[i].loc.pack_id, e, j - i);
                if (r < 0)
                        return r;
        }
        if (n > 0) {
                r = bv_index_flush(g->index);
                if (r < 0)
                        return r;
        }
        g->st->entries_resurrected += n;
        *ret = TAKE_PTR(f);
        *ret_n = n;
        return 0;
}

typedef struct PackIds {
        uint8_t (*ids)[BV_PACK_ID_SIZE];
        size_t n, cap;
} PackIds;

static int pack_ids_add(const uint8_t id[BV_PACK_ID_SIZE], void *userdata)
{
        PackIds *p = userdata;
        if (BV_ARRAY_RESERVE(p->ids, p->cap, p->n + 1, 256) < 0)
                return -ENOMEM;
        memcpy(p->ids[p->n++], id, BV_PACK_ID_SIZE);
        return 0;
}

/* The pack's path below packs/ named as the entry at fault. */
static int unlink_pack_refused(Gc *g, const char *pack_path, int error)
{
        char path[sizeof("packs/") + 64];
        snprintf(path, sizeof(path), "packs/%s", pack_path);
        return gc_note(g, path, false, error);
}

/* A remote pack: one DELETE (which succeeds for an absent one), its size from gc's listing. */
static int remove_pack(Gc *g, const uint8_t id[BV_PACK_ID_SIZE], const char *path)
{
        const PackStat *p = g->ps && g->ps->n > 0 ? bsearch(id, g->ps->p, g->ps->n, sizeof(PackStat), gc_pack_cmp) : NULL;
        int r = bv_backend_remove(bv_repo_backend(g->repo), BV_KIND_PACK, path);
        if (r < 0 && r != -ENOENT)
                return unlink_pack_refused(g, path, r);
        if (r >= 0 && p && (p->flags & PACK_LISTED)) { /* absent: a finalize that crashed did it */
                g->st->packs_deleted++;
                g->st->bytes_deleted += p->size;
        }
        return 0;
}

/* Whether the pack at path still carries Object Lock retention (docs/LIFECYCLE.md, "gc and
 * Object Lock"): 1 locked (counted, its retention's end kept for the summary), 0 not. Only in a
 * bucket with Object Lock (probed once a run, gc.c): elsewhere no pack is HEADed. */
static int pack_locked(Gc *g, const char *path)
{
        int64_t until = 0;
        if (g->object_lock <= 0)
                return 0;
        int r = bv_backend_s3_retention(bv_repo_backend(g->repo), BV_KIND_PACK, path, &until);
        if (r == -ENOENT) /* a finalize that crashed deleted it */
                return 0;
        if (r < 0)
                return unlink_pack_refused(g, path, r);
        if (until <= bv_backend_s3_now(bv_repo_backend(g->repo))) /* the HEAD's Date: the storage's clock */
                return 0;
        g->st->packs_locked++;
        g->st->locked_until = MAX(g->st->locked_until, (uint64_t)until);
        return 1;
}

static int unlink_pack(Gc *g, const uint8_t id[BV_PACK_ID_SIZE])
{
        int packs = bv_repo_dirfd(g->repo, "packs");
        char path[64];
        struct stat st;
        bv_pack_path(id, path);
        if (g->remote) {
                int r = pack_locked(g, path);
                return r != 0 ? r : remove_pack(g, id, path);
        }
        if (fstatat(packs, path, &st, AT_SYMLINK_NOFOLLOW) < 0) /* ENOENT: a finalize that crashed did it */
                return errno == ENOENT ? 0 : unlink_pack_refused(g, path, negative_errno());
        if (!S_ISREG(st.st_mode))
                return unlink_pack_refused(g, path, -EBADFD);
        if (unlinkat(packs, path, 0) < 0)
                return errno == ENOENT ? 0 : unlink_pack_refused(g, path, negative_errno());
        g->st->packs_deleted++;
        g->st->bytes_deleted += (uint64_t)st.st_size;
        path[2] = '\0';
        _cleanup_close_ int sub = bv_open_dir_beneath(packs, path);
        return sub < 0 ? sub : bv_fsync_dir(sub);
}

int gc_finalize(Gc *g, GcList *l)
{
        _cleanup_free_ Found *kept = NULL;
        PackIds named = {};
        const uint8_t(*packs)[BV_PACK_ID_SIZE];
        size_t nkept = 0;
        int r = resurrect(g, l, &kept, &nkept);
        if (r >= 0)
                r = bv_index_refresh(g->index); /* segments backups wrote meanwhile name their packs */
        if (r >= 0)
                r = bv_index_packs(g->index, pack_ids_add, &named);
        if (r < 0)
                goto out;
        if (named.n > 1)
                qsort(named.ids, named.n, BV_PACK_ID_SIZE, gc_pack_cmp);
        size_t np = bv_index_list_packs(l->list, &packs);
        bool locked = false;
        for (size_t i = 0; i < np && r >= 0; i++) {
                Found key;
                memcpy(key.loc.pack_id, packs[i], BV_PACK_ID_SIZE);
                if ((named.n > 0 && bsearch(packs[i], named.ids, named.n, BV_PACK_ID_SIZE, gc_pack_cmp)) ||
                    (nkept > 0 && bsearch(&key, kept, nkept, sizeof(Found), found_cmp)))
                        continue;
                r = unlink_pack(g, packs[i]);
                locked |= r > 0;
                r = MIN(r, 0);
        }
        if (r >= 0 && locked) { /* kept: a later gc deletes its packs once their retention passes */
                g->st->lists_locked++;
                goto out;
        }
        if (r >= 0 && g->remote) { /* durable when the DELETE returns */
                r = bv_backend_remove(bv_repo_backend(g->repo), BV_KIND_CONDEMNED, l->name);
                if (r == -ENOENT)
                        r = 0;
        } else if (r >= 0 && unlinkat(g->gc_dirfd, l->name, 0) < 0 && errno != ENOENT)
                r = negative_errno();
        if (r >= 0 && !g->remote)
                r = bv_fsync_dir(g->gc_dirfd);
        if (r >= 0)
                g->st->lists_finalized++;
out:
        free(named.ids);
        return r;
}
