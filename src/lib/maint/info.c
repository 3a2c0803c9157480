/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Counts and sizes of a repository: snapshot sizes and data from the snapshot records, pack
 * sizes from the pack directory, raw chunk bytes from the packs' own indexes, and the index
 * from its segment headers. What a snapshot shares with its parent from both maps.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "info.h"
#include "macro.h"
#include "maptree.h"

typedef struct InfoPacks {
        BvRepo *repo;
        BvObjectCodec *codec;
        uint64_t packs, stored, unique_raw, groups, grouped_chunks;
} InfoPacks;

static int on_pack(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        InfoPacks *p = userdata;
        BvPackEntry *entries = NULL;
        size_t n = 0;
        int r;

        p->packs++;
        p->stored += size;
        r = bv_packset_read_index(bv_repo_packs(p->repo), p->codec, pack_id, &entries, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (entries[i].type == BV_OBJ_CHUNK || entries[i].type == BV_OBJ_GROUP)
                        p->unique_raw += entries[i].raw_length;
                if (entries[i].type == BV_OBJ_GROUP) {
                        p->grouped_chunks++;
                        if (entries[i].member == 0)
                                p->groups++;
                }
        }
        free(entries);
        return 0;
}

int bv_repo_info(BvRepo *r, BvRepoInfo *ret)
{
        BvSnapshot *const *list;
        InfoPacks packs = { .repo = r };
        BvIndexStats xs;
        BvRepoInfo info = {};
        size_t n;
        int rr;

        if (!r || !ret)
                return -EINVAL;
        rr = bv_repo_snapshots(r, &list, &n);
        if (rr < 0)
                return rr;
        info.snapshots = n;
        for (size_t i = 0; i < n; i++) {
                info.logical_bytes += list[i]->size;
                info.data_bytes += list[i]->stats.bytes_data;
        }

        rr = bv_object_codec_new(bv_repo_keyring(r), bv_repo_config(r)->zstd_level, &packs.codec);
        if (rr < 0)
                return rr;
        rr = bv_packset_list(bv_repo_packs(r), on_pack, &packs);
        bv_object_codec_free(packs.codec);
        if (rr < 0)
                return rr;
        info.packs = packs.packs;
        info.stored_bytes = packs.stored;
        info.unique_raw = packs.unique_raw;
        info.groups = packs.groups;
        info.grouped_chunks = packs.grouped_chunks;

        rr = bv_index_stats(bv_repo_index(r), &xs);
        if (rr < 0)
                return rr;
        info.chunks = xs.entries;
        info.index_segments = xs.segments;
        info.index_bytes = xs.bytes;

        info.dedup_ratio = info.unique_raw ? (double)info.data_bytes / (double)info.unique_raw : 0.0;
        info.compression_ratio = info.stored_bytes ? (double)info.unique_raw / (double)info.stored_bytes : 0.0;
        *ret = info;
        return 0;
}

/* ---- what a snapshot shares with its parent ---- */

typedef struct Shared {
        BvRepo *repo;
        BvObjectCodec *codec;
        uint8_t (*ids)[BV_ID_SIZE]; /* the parent's chunks, sorted once collected */
        size_t n, cap;
        uint64_t shared;
} Shared;

static int shared_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Shared *sh = userdata;
        return bv_repo_read_object_alloc(sh->repo, sh->codec, BV_OBJ_MAP, id, ret_node, ret_len);
}

static int id_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_ID_SIZE);
}

static int collect_parent(void *userdata, const BvMapExtent *e)
{
        Shared *sh = userdata;

        if (e->kind != BV_EXTENT_DATA)
                return 0;
        if (BV_ARRAY_RESERVE(sh->ids, sh->cap, sh->n + 1, 1024) < 0)
                return -ENOMEM;
        memcpy(sh->ids[sh->n++], e->id, BV_ID_SIZE);
        return 0;
}

static int count_shared(void *userdata, const BvMapExtent *e)
{
        Shared *sh = userdata;

        if (e->kind == BV_EXTENT_DATA && sh->n > 0 && bsearch(e->id, sh->ids, sh->n, BV_ID_SIZE, id_cmp))
                sh->shared += e->length;
        return 0;
}

int bv_snapshot_shared_bytes(BvRepo *r, const BvSnapshot *snap, const BvSnapshot *parent, uint64_t *ret)
{
        Shared sh = { .repo = r };
        int rr;

        if (!r || !snap || !ret)
                return -EINVAL;
        if (!parent) {
                *ret = 0;
                return 0;
        }
        rr = bv_object_codec_new(bv_repo_keyring(r), bv_repo_config(r)->zstd_level, &sh.codec);
        if (rr < 0)
                return rr;
        rr = bv_map_walk(parent->root, parent->height, parent->size, shared_fetch, &sh, NULL, collect_parent, &sh);
        if (rr >= 0) {
                /* a parent without data: sh.ids is NULL, which qsort and bsearch must not get */
                if (sh.n > 0)
                        qsort(sh.ids, sh.n, BV_ID_SIZE, id_cmp);
                rr = bv_map_walk(snap->root, snap->height, snap->size, shared_fetch, &sh, NULL, count_shared, &sh);
        }
        bv_object_codec_free(sh.codec);
        free(sh.ids);
        if (rr < 0)
                return rr;
        *ret = sh.shared;
        return 0;
}
