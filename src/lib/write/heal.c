/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A backup's map checked against the index after a concurrent gc (heal.h): ids the index no
 * longer names are taken from the condemned lists and written back as a new index segment.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "heal.h"
#include "lease.h"
#include "macro.h"
#include "maptree.h"

typedef struct Revived {
        uint8_t id[BV_ID_SIZE];
        BvLocation loc;
} Revived;

typedef struct Heal {
        BvRepo *repo;         /* bv_backup_heal's: map nodes read there */
        BvObjectCodec *codec;
        BvIndex *index;
        bv_heal_fetch_fn fetch; /* else */
        void *userdata;
        BvIndexList **lists;
        size_t nlists;
        Revived *found; /* ids to put back, with their locations in the lists */
        size_t n, cap;
        uint64_t missing;
} Heal;

typedef struct ListLoad {
        BvBackend *b;
        BvIndexList ***lists;
        size_t *n;
} ListLoad;

/* One condemned list met by the backend's listing of gc/ (a remote repository's). */
static int list_load_one(const BvObjEntry *e, void *userdata)
{
        ListLoad *ll = userdata;
        if (!bv_index_name_valid(e->name))
                return 0; /* gc/epoch */
        BvIndexList **p = reallocarray(*ll->lists, *ll->n + 1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *ll->lists = p;
        int r = bv_index_list_open_backend(ll->b, e->name, &p[*ll->n]);
        if (r == -ENOENT) /* finalized meanwhile: its entries are indexed again */
                return 0;
        if (r >= 0)
                (*ll->n)++;
        return r;
}

int bv_condemned_lists_load_backend(BvBackend *b, BvIndexList ***ret, size_t *ret_n)
{
        ListLoad ll = { b, ret, ret_n };
        int r = bv_backend_list(ll.b, BV_KIND_CONDEMNED, list_load_one, &ll);
        return MIN(r, 0);
}

int bv_condemned_lists_load(BvRepo *repo, BvIndexList ***ret, size_t *ret_n)
{
        if (bv_repo_dirfd(repo, "") < 0)
                return bv_condemned_lists_load_backend(bv_repo_backend(repo), ret, ret_n);
        DIR *d;
        int r = bv_opendir_beneath(bv_repo_dirfd(repo, ""), "gc", &d);
        if (r < 0)
                return r;
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                if (!bv_index_name_valid(de->d_name))
                        continue;
                BvIndexList **p = reallocarray(*ret, *ret_n + 1, sizeof(*p));
                if (!p) {
                        r = -ENOMEM;
                        break;
                }
                *ret = p;
                r = bv_index_list_open(dirfd(d), de->d_name, &p[*ret_n]);
                if (r == -ENOENT) /* finalized meanwhile: its entries are indexed again */
                        r = 0;
                else if (r >= 0)
                        (*ret_n)++;
        }
        if (r >= 0 && errno)
                r = negative_errno();
        closedir(d);
        return r;
}

void bv_condemned_lists_free(BvIndexList **lists, size_t n)
{
        for (size_t i = 0; i < n; i++)
                bv_index_list_free(lists[i]);
        free(lists);
}

static int list_find(Heal *h, const uint8_t id[BV_ID_SIZE], BvLocation *ret)
{
        uint64_t entry;
        for (size_t i = 0; i < h->nlists; i++)
                if (bv_index_list_find(h->lists[i], id, ret, &entry) == 0)
                        return 0;
        return -ENOENT;
}

static int check_id(Heal *h, const uint8_t id[BV_ID_SIZE])
{
        BvLocation loc;
        int r = bv_index_lookup(h->index, id, &loc);
        if (r != -ENOENT)
                return r;
        if (list_find(h, id, &loc) < 0) {
                h->missing++;
                return 0;
        }
        if (BV_ARRAY_RESERVE(h->found, h->cap, h->n + 1, 256) < 0)
                return -ENOMEM;
        memcpy(h->found[h->n].id, id, BV_ID_SIZE);
        h->found[h->n++].loc = loc;
        return 0;
}

static int heal_node(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        return check_id(userdata, id);
}

static int heal_extent(void *userdata, const BvMapExtent *e)
{
        return e->kind == BV_EXTENT_DATA ? check_id(userdata, e->id) : 0;
}

/* A map node from the index, or from a condemned list that holds it. */
static int heal_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Heal *h = userdata;
        BvLocation loc;
        void *enc;
        if (h->fetch)
                return h->fetch(h->userdata, id, ret_node, ret_len);
        int r = bv_repo_read_object_alloc(h->repo, h->codec, BV_OBJ_MAP, id, ret_node, ret_len);
        if (r != -EUCLEAN || list_find(h, id, &loc) < 0)
                return r;
        r = bv_repo_read_encoded(h->repo, h->codec, &loc, &enc);
        if (r < 0)
                return r;
        return bv_object_decode_alloc(h->codec, BV_OBJ_MAP, id, enc, loc.length, ret_node, ret_len);
}

static int revived_cmp(const void *a, const void *b)
{
        const Revived *x = a, *y = b;
        int c = memcmp(x->loc.pack_id, y->loc.pack_id, BV_PACK_ID_SIZE);
        return c ? c : memcmp(x->id, y->id, BV_ID_SIZE);
}

/* The found ids, once each, into the index (grouped by pack), then a durable segment. */
static int heal_write(Heal *h)
{
        BvIndex *index = h->index;
        size_t n = 0;
        if (h->n > 1)
                qsort(h->found, h->n, sizeof(Revived), revived_cmp);
        for (size_t i = 0; i < h->n; i++)
                if (n == 0 || revived_cmp(&h->found[n - 1], &h->found[i]) != 0)
                        h->found[n++] = h->found[i];
        for (size_t i = 0, j; i < n; i = j) {
                for (j = i; j < n && memcmp(h->found[j].loc.pack_id, h->found[i].loc.pack_id, BV_PACK_ID_SIZE) == 0; j++)
                        ;
                _cleanup_free_ BvPackEntry *e = calloc(j - i, sizeof(BvPackEntry));
                if (!e)
                        return -ENOMEM;
                for (size_t k = i; k < j; k++) {
                        const BvLocation *l = &h->found[k].loc;
                        e[k - i] = (BvPackEntry){ .type = l->type, .member = l->member, .offset = l->offset,
                                                  .length = l->length };
                        memcpy(e[k - i].id, h->found[k].id, BV_ID_SIZE);
                }
                int r = bv_index_add_pack(index, h->found[i].loc.pack_id, e, j - i);
                if (r < 0)
                        return r;
        }
        int r = n > 0 ? bv_index_flush(index) : 0;
        return r < 0 ? r : (int)MIN(n, (size_t)INT_MAX);
}

/* Whether a condemned list waits for an epoch after the lease's: gc condemned since the lease was
 * taken, whatever gc/epoch says now (it may have been rolled back to the lease's own epoch). */
static bool list_after(const Heal *h, uint64_t lease)
{
        for (size_t i = 0; i < h->nlists; i++)
                if (bv_index_list_generation(h->lists[i]) > lease)
                        return true;
        return false;
}

/* The walk, then the write of what it found (the index refreshed before). */
static int heal_walk(Heal *h, const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size)
{
        int r = bv_map_walk(root, height, size, heal_fetch, h, heal_node, heal_extent, h);
        if (r >= 0 && h->missing > 0)
                r = -EUCLEAN;
        return r < 0 ? r : heal_write(h);
}

int bv_heal_map(BvIndex *index, BvIndexList **lists, size_t nlists, bv_heal_fetch_fn fetch, void *userdata,
                const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size)
{
        Heal h = { .index = index, .fetch = fetch, .userdata = userdata, .lists = lists, .nlists = nlists };
        int r = heal_walk(&h, root, height, size);
        free(h.found);
        return r;
}

int bv_backup_heal(BvRepo *repo, BvObjectCodec *codec, const uint8_t root[BV_ID_SIZE], uint32_t height,
                   uint64_t size)
{
        Heal h = { .repo = repo, .codec = codec, .index = bv_repo_index(repo) };
        uint64_t lease, epoch;
        int r = bv_repo_lease_epoch(repo, &lease);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        r = bv_gc_epoch_read(bv_repo_backend(repo), &epoch);
        if (r < 0)
                return r;
        /* The epoch cannot go back (docs/LIFECYCLE.md): any epoch but the lease's, lower too (gc/epoch
         * removed or rolled back), or a list that waits for a later one, means a gc may have
         * condemned since the lease. Only an unchanged epoch and no such list skip the walk: the
         * common path reads gc/epoch and lists gc/. */
        r = bv_condemned_lists_load(repo, &h.lists, &h.nlists);
        if (r == -ENOENT) /* no gc/: no list */
                r = 0;
        if (r >= 0 && (epoch != lease || list_after(&h, lease))) {
                r = bv_index_refresh(bv_repo_index(repo)); /* the index as gc left it */
                if (r >= 0)
                        r = heal_walk(&h, root, height, size);
        }
        bv_condemned_lists_free(h.lists, h.nlists);
        free(h.found);
        return r == -ENOENT ? -EUCLEAN : r;
}
