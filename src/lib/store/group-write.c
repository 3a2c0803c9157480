/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "group-write.h"
#include "macro.h"

struct BvGroupEncoder {
        BvObjectCodec *codec;
        bool compress; /* zstd_level != 0 */
        bool auto_choice;
        uint8_t *out;
        size_t out_cap;
};

void bv_group_buf_clear(BvGroupBuf *g, BvObjectType type)
{
        g->type = type;
        g->n_members = 0;
        g->len = 0;
}

bool bv_group_buf_fits(const BvGroupBuf *g, size_t len)
{
        return g->n_members < BV_GROUP_TARGET_MEMBERS && g->len + len <= BV_GROUP_TARGET_BYTES;
}

static void buf_put(BvGroupBuf *g, const uint8_t id[BV_ID_SIZE], const void *data, size_t len)
{
        memcpy(g->data + g->len, data, len);
        g->len += len;
        memcpy(g->members[g->n_members].id, id, BV_ID_SIZE);
        g->members[g->n_members].length = (uint32_t)len;
        g->n_members++;
}

int bv_group_buf_add(BvGroupBuf *g, const uint8_t id[BV_ID_SIZE], const void *data, size_t len)
{
        if (g->n_members >= BV_GROUP_TARGET_MEMBERS)
                return -EINVAL;
        /* room for the group at its largest, and its trailer, once for all its members */
        if (bv_buf_reserve(&g->data, &g->cap,
                           MAX(g->len + len, (size_t)BV_GROUP_TARGET_BYTES) +
                                   bv_group_trailer_size(BV_GROUP_TARGET_MEMBERS)) < 0)
                return -ENOMEM;
        buf_put(g, id, data, len);
        return 0;
}

int bv_group_buf_set(BvGroupBuf *g, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data,
                     size_t len)
{
        bv_group_buf_clear(g, type);
        if (bv_buf_reserve(&g->data, &g->cap, len) < 0)
                return -ENOMEM;
        buf_put(g, id, data, len);
        return 0;
}

void bv_group_buf_done(BvGroupBuf *g)
{
        free(g->data);
        g->data = NULL;
        g->cap = 0;
        bv_group_buf_clear(g, g->type);
}

int bv_group_encoder_new(const BvKeyring *k, int zstd_level, BvGroupEncoder **ret)
{
        BvGroupEncoder *e;
        int r;

        if (!k || !ret)
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        r = bv_object_codec_new(k, zstd_level, &e->codec);
        if (r < 0) {
                free(e);
                return r;
        }
        e->compress = zstd_level != 0;
        *ret = e;
        return 0;
}

void bv_group_encoder_free(BvGroupEncoder *e)
{
        if (!e)
                return;
        bv_object_codec_free(e->codec);
        free(e->out);
        free(e);
}

void bv_group_encoder_set_auto(BvGroupEncoder *e, bool on)
{
        if (e)
                e->auto_choice = on && e->compress;
}

/* Whether to compress the data of g (of type, after the trailer is in place): with auto, as
 * bv_zstd_choose says for its members' bytes, with the settings it chose; a map node at the
 * encoder's level, whatever the data before it chose. */
static int encode_choose(BvGroupEncoder *e, const BvGroupBuf *g, BvObjectType type, bool *ret_compress)
{
        BvZstdChoice choice;

        *ret_compress = true;
        if (!e->auto_choice)
                return 0;
        if (type == BV_OBJ_MAP)
                return bv_object_codec_set_choice(e->codec, BV_ZSTD_RAW);
        choice = bv_zstd_choose(g->data, g->len);
        if (choice == BV_ZSTD_RAW) {
                *ret_compress = false;
                return 0;
        }
        return bv_object_codec_set_choice(e->codec, choice);
}

/* A group that did not compress: its members are stored as raw chunks. */
static int encode_members(BvGroupEncoder *e, const BvGroupBuf *g, BvGroupSink sink, void *userdata)
{
        const uint8_t *data = g->data;
        size_t len;
        int r;

        for (size_t i = 0; i < g->n_members; i++) {
                const BvGroupMember *m = &g->members[i];

                r = bv_object_encode_as(e->codec, BV_OBJ_CHUNK, m->id, data, m->length, false, e->out, &len,
                                        NULL);
                if (r < 0)
                        return r;
                r = sink(userdata, BV_OBJ_CHUNK, m, 1, e->out, len);
                if (r < 0)
                        return r;
                data += m->length;
        }
        return 0;
}

int bv_group_encode(BvGroupEncoder *e, BvGroupBuf *g, BvGroupSink sink, void *userdata)
{
        BvObjectType type;
        size_t raw, len;
        bool compress, compressed = true;
        int r;

        if (!e || !g || !sink || g->n_members == 0 || g->n_members > BV_GROUP_TARGET_MEMBERS)
                return -EINVAL;
        type = g->n_members > 1 ? BV_OBJ_GROUP : g->type;
        raw = g->len;
        if (type == BV_OBJ_GROUP) {
                bv_group_put_trailer(g->data + g->len, g->members, g->n_members);
                raw += bv_group_trailer_size(g->n_members);
        }
        r = bv_buf_reserve(&e->out, &e->out_cap, bv_object_bound(raw));
        if (r < 0)
                return r;
        r = encode_choose(e, g, type, &compress);
        if (r < 0)
                return r;
        if (type == BV_OBJ_GROUP && !compress)
                return encode_members(e, g, sink, userdata); /* incompressible: raw at once */
        r = bv_object_encode_as(e->codec, type, type == BV_OBJ_GROUP ? bv_group_id : g->members[0].id, g->data,
                                raw, compress, e->out, &len, &compressed);
        if (r < 0)
                return r;
        if (type == BV_OBJ_GROUP && !compressed)
                return encode_members(e, g, sink, userdata);
        return sink(userdata, type, g->members, g->n_members, e->out, len);
}

int bv_group_append(BvPackWriter *w, BvObjectType type, const BvGroupMember *members, size_t n,
                    const void *encoded, size_t len)
{
        if (type == BV_OBJ_GROUP)
                return bv_pack_writer_append_group(w, members, n, encoded, len);
        return bv_pack_writer_append(w, type, members[0].id, members[0].length, encoded, len);
}
