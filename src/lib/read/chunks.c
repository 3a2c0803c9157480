/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pthread.h>
#include <string.h>

#include "chunks.h"
#include "dcache.h"
#include "group.h"
#include "macro.h"

/* Decoded groups of up to this size (all that a backup writes: 256 KiB of members and the
 * trailer) reuse freed buffers: fresh ones would be page-faulted in and trimmed away again. */
#define SPARE_CAP (256u * 1024 + 4096)
#define SPARES 16u
/* Groups whose every member byte was copied out (a sequential pass) are kept only up to a
 * sixteenth of the cache: kept longer, a whole-image copy would fault in the whole cache. */
#define READ_OUT_SHARE 16u

/* A group's key in the cache: its pack and offset. */
typedef struct GroupKey {
        uint8_t pack_id[BV_PACK_ID_SIZE];
        uint32_t offset;
} GroupKey;

struct BvGroupCache {
        BvDecodeCache *cache;

        /* The decode gate: slots for threads reading and decoding (0: no limit). */
        pthread_mutex_t gate_lock;
        pthread_cond_t gate_free;
        unsigned gate_slots, gate_used;
};

int bv_group_cache_new(size_t cap_bytes, unsigned max_decodes, BvGroupCache **ret)
{
        BvGroupCache *gc = calloc(1, sizeof(*gc));
        int r;

        if (!gc)
                return -ENOMEM;
        r = bv_dcache_new(&(BvDecodeCacheOptions){ .cap_bytes = cap_bytes,
                                                   .key_size = sizeof(GroupKey),
                                                   .read_out_share = READ_OUT_SHARE,
                                                   .spare_size = SPARE_CAP,
                                                   .spares = SPARES },
                          &gc->cache);
        if (r < 0) {
                free(gc);
                return r;
        }
        pthread_mutex_init(&gc->gate_lock, NULL);
        pthread_cond_init(&gc->gate_free, NULL);
        gc->gate_slots = max_decodes;
        *ret = gc;
        return 0;
}

void bv_group_cache_free(BvGroupCache *gc)
{
        if (!gc)
                return;
        bv_dcache_free(gc->cache);
        pthread_mutex_destroy(&gc->gate_lock);
        pthread_cond_destroy(&gc->gate_free);
        free(gc);
}

uint64_t bv_group_cache_decodes(BvGroupCache *gc)
{
        return gc ? bv_dcache_decodes(gc->cache) : 0;
}

size_t bv_group_cache_bytes(BvGroupCache *gc)
{
        return gc ? bv_dcache_bytes(gc->cache) : 0;
}

static void gate_enter(BvGroupCache *gc)
{
        if (!gc || gc->gate_slots == 0)
                return;
        BV_LOCK_GUARD(&gc->gate_lock);
        while (gc->gate_used >= gc->gate_slots)
                pthread_cond_wait(&gc->gate_free, &gc->gate_lock);
        gc->gate_used++;
}

static void gate_leave(BvGroupCache *gc)
{
        if (!gc || gc->gate_slots == 0)
                return;
        BV_LOCK_GUARD(&gc->gate_lock);
        gc->gate_used--;
        pthread_cond_signal(&gc->gate_free);
}

/* Decodes the group at loc and checks its trailer: into a spare buffer of SPARE_CAP bytes
 * when gc has one and the group fits, else into one of its own (malloc'd). */
static int group_decode(BvGroupCache *gc, BvRepo *r, BvObjectCodec *codec, const BvLocation *loc, BvDecoded *ret)
{
        uint8_t *buf = NULL;
        size_t len, cap = SPARE_CAP, data_len;
        void *enc;
        int rr;

        rr = bv_repo_read_encoded(r, codec, loc, &enc);
        if (rr < 0)
                return rr;
        if (gc) {
                buf = bv_dcache_buffer(gc->cache);
                if (!buf)
                        return -ENOMEM;
        }
        /* only the decode is gated: a read waiting for the disk holds no slot */
        gate_enter(gc);
        if (buf) {
                rr = bv_object_decode(codec, BV_OBJ_GROUP, bv_group_id, enc, loc->length, buf, SPARE_CAP, &len);
                if (rr == -ENOBUFS && gc) { /* larger than a backup writes: a buffer of its own */
                        bv_dcache_recycle(gc->cache, buf);
                        buf = NULL;
                }
        }
        if (!buf) {
                rr = bv_object_decode_alloc(codec, BV_OBJ_GROUP, bv_group_id, enc, loc->length, (void **)&buf, &len);
                cap = len;
        }
        gate_leave(gc);
        if (rr >= 0)
                rr = bv_group_parse(buf, len, NULL, &data_len);
        if (rr < 0) {
                if (gc && cap == SPARE_CAP)
                        bv_dcache_recycle(gc->cache, buf);
                else
                        free(buf);
                return rr;
        }
        *ret = (BvDecoded){ .data = buf, .len = len, .cap = cap, .full = data_len };
        return 0;
}

typedef struct GroupLoad {
        BvGroupCache *gc;
        BvRepo *repo;
        BvObjectCodec *codec;
        const BvLocation *loc;
} GroupLoad;

static int group_load(void *userdata, BvDecodeCache *c, BvDecoded *ret)
{
        GroupLoad *l = userdata;

        (void)c;
        return group_decode(l->gc, l->repo, l->codec, l->loc, ret);
}

/* Copies member loc->member of a decoded group into buf. */
static int member_copy(const uint8_t *data, size_t len, const BvLocation *loc, void *buf, size_t cap,
                       size_t *ret_len)
{
        size_t off, n;
        int rr;

        rr = bv_group_member(data, len, loc->member, &off, &n);
        if (rr < 0)
                return rr;
        if (n > cap)
                return -ENOBUFS;
        memcpy(buf, data + off, n);
        *ret_len = n;
        return 0;
}

static int read_member(BvRepo *r, BvObjectCodec *codec, BvGroupCache *gc, const BvLocation *loc, void *buf,
                       size_t cap, size_t *ret_len)
{
        size_t n = 0;
        int rr;

        if (gc) {
                GroupKey key = { .offset = loc->offset };
                BvDecodeEntry *e;
                size_t len;

                memcpy(key.pack_id, loc->pack_id, BV_PACK_ID_SIZE);
                rr = bv_dcache_get(gc->cache, &key, 0, group_load,
                                   &(GroupLoad){ .gc = gc, .repo = r, .codec = codec, .loc = loc }, &e);
                if (rr < 0)
                        return rr;
                const uint8_t *data = bv_dcache_data(e, &len);
                rr = member_copy(data, len, loc, buf, cap, &n);
                bv_dcache_put(gc->cache, e, n);
        } else {
                BvDecoded d;

                rr = group_decode(NULL, r, codec, loc, &d);
                if (rr < 0)
                        return rr;
                rr = member_copy(d.data, d.len, loc, buf, cap, &n);
                free(d.data);
        }
        if (rr < 0)
                return rr;
        *ret_len = n;
        return 0;
}

int bv_repo_read_chunk_at(BvRepo *r, BvObjectCodec *codec, BvGroupCache *gc, const uint8_t id[BV_ID_SIZE],
                          const BvLocation *loc, void *buf, size_t cap, size_t *ret_len)
{
        uint8_t check[BV_ID_SIZE];
        size_t n;
        int rr;

        if (!r || !codec || !id || !loc || !buf || !ret_len)
                return -EINVAL;
        if (loc->type == BV_OBJ_CHUNK) {
                void *enc;

                rr = bv_repo_read_encoded(r, codec, loc, &enc);
                if (rr < 0)
                        return rr;
                gate_enter(gc);
                rr = bv_object_decode(codec, BV_OBJ_CHUNK, id, enc, loc->length, buf, cap, ret_len);
                gate_leave(gc);
                return rr;
        }
        if (loc->type != BV_OBJ_GROUP)
                return -EBADMSG;
        rr = read_member(r, codec, gc, loc, buf, cap, &n);
        if (rr < 0)
                return rr;
        /* the group is authentic; that this member is the chunk asked for, its id tells */
        bv_keyring_id(bv_repo_keyring(r), BV_ID_CHUNK, buf, n, check);
        if (memcmp(check, id, BV_ID_SIZE) != 0)
                return -EBADMSG;
        *ret_len = n;
        return 0;
}

int bv_repo_read_chunk(BvRepo *r, BvObjectCodec *codec, BvGroupCache *gc, const uint8_t id[BV_ID_SIZE], void *buf,
                       size_t cap, size_t *ret_len)
{
        BvLocation loc;
        int rr;

        if (!r || !id)
                return -EINVAL;
        rr = bv_repo_locate(r, id, &loc);
        if (rr < 0)
                return rr;
        return bv_repo_read_chunk_at(r, codec, gc, id, &loc, buf, cap, ret_len);
}
