/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Counts and sizes of a repository: snapshot sizes and data from the snapshot records, pack
 * sizes from the pack directory, raw chunk bytes from the packs' own indexes, and the index
 * from its segment headers.
 */
#include <json-c/json.h>
#include <stdlib.h>

#include "info.h"
#include "macro.h"

typedef struct InfoPacks {
        BvRepo *repo;
        BvObjectCodec *codec;
        uint64_t packs, stored, unique_raw, groups, grouped_chunks;
} InfoPacks;

static uint64_t stat_u64(struct json_object *stats, const char *key)
{
        struct json_object *v;

        if (!stats || !json_object_object_get_ex(stats, key, &v) || !json_object_is_type(v, json_type_int))
                return 0;
        return json_object_get_uint64(v);
}

/* The data (non-zero, non-hole) bytes of a snapshot: what was read minus the zero blocks found
 * in it (the stored stats have no "bytes_data"; only `backup --json` prints that counter). */
static uint64_t snapshot_data_bytes(const BvSnapshot *s)
{
        uint64_t read = stat_u64(s->stats, "bytes_read"), zero = stat_u64(s->stats, "bytes_zero");

        return read > zero ? read - zero : 0;
}

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
                info.data_bytes += snapshot_data_bytes(list[i]);
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
