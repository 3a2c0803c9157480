/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Orphan packs of an interrupted backup recorded in the index (adopt.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adopt.h"
#include "buf.h"
#include "heal.h"
#include "index.h"
#include "lock.h"
#include "macro.h"
#include "pack.h"

typedef struct PackIds {
        uint8_t (*ids)[BV_PACK_ID_SIZE];
        size_t n, cap;
} PackIds;

typedef struct Adopt {
        BvRepo *repo;
        BvObjectCodec *codec;
        PackIds known; /* named by the index or by a condemned list: sorted */
        PackIds orphans;
        uint64_t packs, bytes; /* adopted */
} Adopt;

static int pack_id_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static int ids_add(PackIds *p, const uint8_t id[BV_PACK_ID_SIZE])
{
        if (BV_ARRAY_RESERVE(p->ids, p->cap, p->n + 1, 256) < 0)
                return -ENOMEM;
        memcpy(p->ids[p->n++], id, BV_PACK_ID_SIZE);
        return 0;
}

static int on_named(const uint8_t id[BV_PACK_ID_SIZE], void *userdata)
{
        return ids_add(userdata, id);
}

static int on_listed(const uint8_t id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        Adopt *a = userdata;
        if (a->known.n > 0 && bsearch(id, a->known.ids, a->known.n, BV_PACK_ID_SIZE, pack_id_cmp))
                return 0;
        return ids_add(&a->orphans, id);
}

/* Every pack the index or a condemned list names. The lists first: one finalized after this read
 * has deleted its packs before it went, so packs/ no longer shows them. */
static int known_collect(Adopt *a)
{
        BvIndexList **lists = NULL;
        size_t nlists = 0;
        int r = bv_condemned_lists_load(a->repo, &lists, &nlists);
        if (r == -ENOENT) /* no gc ever ran */
                r = 0;
        for (size_t i = 0; i < nlists && r >= 0; i++) {
                const uint8_t(*ids)[BV_PACK_ID_SIZE];
                size_t np = bv_index_list_packs(lists[i], &ids);
                for (size_t j = 0; j < np && r >= 0; j++)
                        r = ids_add(&a->known, ids[j]);
        }
        bv_condemned_lists_free(lists, nlists);
        if (r >= 0)
                r = bv_index_packs(bv_repo_index(a->repo), on_named, &a->known);
        if (r >= 0 && a->known.n > 1)
                qsort(a->known.ids, a->known.n, BV_PACK_ID_SIZE, pack_id_cmp);
        return r;
}

/* One orphan's own index into the index. A pack whose index does not read is left to gc. */
static int adopt_pack(Adopt *a, const uint8_t id[BV_PACK_ID_SIZE])
{
        _cleanup_free_ BvPackEntry *e = NULL;
        size_t n;
        int r = bv_packset_read_index(bv_repo_packs(a->repo), a->codec, id, &e, &n);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || n == 0)
                return 0;
        r = bv_index_add_pack(bv_repo_index(a->repo), id, e, n);
        if (r < 0)
                return r;
        a->packs++;
        for (size_t i = 0; i < n; i++)
                if (i == 0 || e[i].offset != e[i - 1].offset) /* a group's members share one object */
                        a->bytes += e[i].length;
        return 0;
}

static int adopt_locked(Adopt *a)
{
        int r = bv_index_refresh(bv_repo_index(a->repo)); /* segments written since the open */
        if (r >= 0)
                r = known_collect(a);
        if (r >= 0)
                r = bv_packset_list(bv_repo_packs(a->repo), on_listed, a);
        for (size_t i = 0; i < a->orphans.n && r >= 0; i++)
                r = adopt_pack(a, a->orphans.ids[i]);
        if (r >= 0 && a->packs > 0)
                r = bv_index_flush(bv_repo_index(a->repo));
        return r;
}

int bv_backup_adopt(BvRepo *repo, BvObjectCodec *codec, uint64_t *ret_packs, uint64_t *ret_bytes)
{
        Adopt a = { .repo = repo, .codec = codec };
        _cleanup_close_ int fd = bv_backend_lock(bv_repo_backend(repo), BV_LOCK_COMMIT, true);
        int r = fd < 0 ? fd : adopt_locked(&a);
        free(a.known.ids);
        free(a.orphans.ids);
        if (r >= 0)
                *ret_packs = a.packs, *ret_bytes = a.bytes;
        return r;
}
