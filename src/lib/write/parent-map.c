/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "macro.h"
#include "parent-map.h"

#define PARENT_MAP_CACHE_NODES 64

struct BvParentMap {
        BvRepo *repo;
        BvObjectCodec *codec; /* its own: the pipeline's codecs belong to other threads */
        BvMapReader *map;
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
