/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "macro.h"
#include "parent-map.h"

#define PARENT_MAP_CACHE_NODES 64
/* Decoded groups kept for edge chunks: the two edges of a dirty run mostly lie in one group or
 * in neighbours, and a pass over the image never comes back. */
#define PARENT_GROUP_CACHE (2u * 1024 * 1024)

struct BvParentMap {
        BvRepo *repo;
        BvObjectCodec *codec; /* its own: the pipeline's codecs belong to other threads */
        BvMapReader *map;
        BvGroupCache *groups;
        uint8_t chunk_id[BV_ID_SIZE]; /* of the chunk in chunk_buf, when chunk_len > 0 */
        uint8_t *chunk_buf;
        size_t chunk_len, chunk_cap;
};

static int fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        BvParentMap *p = userdata;

        return bv_repo_read_object_alloc(p->repo, p->codec, BV_OBJ_MAP, id, ret_node, ret_len);
}

void bv_parent_map_free(BvParentMap *p)
{
        if (!p)
                return;
        bv_map_reader_free(p->map);
        bv_group_cache_free(p->groups);
        free(p->chunk_buf);
        bv_object_codec_free(p->codec);
        free(p);
}

int bv_parent_map_open(BvRepo *r, const BvSnapshot *parent, BvParentMap **ret)
{
        BvParentMap *p = calloc(1, sizeof(*p));
        int rr;

        if (!p)
                return -ENOMEM;
        p->repo = r;
        rr = bv_object_codec_new(bv_repo_keyring(r), bv_repo_config(r)->zstd_level, &p->codec);
        if (rr >= 0)
                rr = bv_map_reader_new(parent->root, parent->height, parent->size, fetch, p, PARENT_MAP_CACHE_NODES,
                                       &p->map);
        if (rr >= 0)
                rr = bv_group_cache_new(PARENT_GROUP_CACHE, 0, &p->groups);
        if (rr < 0) {
                bv_parent_map_free(p);
                return rr;
        }
        *ret = p;
        return 0;
}

int bv_parent_map_lookup(BvParentMap *p, uint64_t offset, BvMapExtent *ret)
{
        int r = bv_map_reader_lookup(p->map, offset, ret);

        if (r >= 0 && (ret->offset > offset || ret->length == 0 || offset - ret->offset >= ret->length))
                return -EBADMSG;
        return r;
}

int bv_parent_map_chunk(BvParentMap *p, const BvMapExtent *e, const BvLocation *loc, const uint8_t **ret)
{
        size_t len;
        int r;

        if (e->kind != BV_EXTENT_DATA || e->length == 0 || e->length > BV_CHUNK_MAX_LIMIT)
                return -EINVAL;
        if (p->chunk_len == e->length && memcmp(p->chunk_id, e->id, BV_ID_SIZE) == 0) {
                *ret = p->chunk_buf;
                return 0;
        }
        p->chunk_len = 0;
        if (p->chunk_cap < e->length) {
                uint8_t *nb = realloc(p->chunk_buf, e->length);
                if (!nb)
                        return -ENOMEM;
                p->chunk_buf = nb;
                p->chunk_cap = e->length;
        }
        r = bv_repo_read_chunk_at(p->repo, p->codec, p->groups, e->id, loc, p->chunk_buf, e->length, &len);
        if (r < 0)
                return r;
        if (len != e->length)
                return -EBADMSG; /* authentic, but not the length the parent's map gives it */
        memcpy(p->chunk_id, e->id, BV_ID_SIZE);
        p->chunk_len = len;
        *ret = p->chunk_buf;
        return 0;
}
