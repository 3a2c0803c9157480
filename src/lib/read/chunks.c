/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "chunks.h"
#include "group.h"
#include "list.h"
#include "macro.h"

#define BUCKETS 64u
/* Decoded groups of up to this size (all that a backup writes: 256 KiB of members and the
 * trailer) reuse freed buffers: fresh ones would be page-faulted in and trimmed away again. */
#define SPARE_CAP (256u * 1024 + 4096)
#define SPARES 16u
/* Groups whose every member byte was copied out (a sequential pass) are kept only up to a
 * sixteenth of the cache: kept longer, a whole-image copy would fault in the whole cache. */
#define READ_OUT_SHARE 16u

typedef struct Group {
        uint8_t pack_id[BV_PACK_ID_SIZE];
        uint32_t offset;
        uint8_t *data; /* NULL while a thread decodes it */
        size_t len, cap;
        size_t data_len; /* the members' bytes (len without the trailer) */
        size_t taken;    /* member bytes copied out */
        bool read_out;   /* taken >= data_len: moved to the cold end */
        size_t bucket;
        unsigned refs; /* readers copying out of data */
        struct Group *hnext;
        BvLink lru;
} Group;

struct BvGroupCache {
        pthread_mutex_t lock;
        pthread_cond_t loaded;
        Group *buckets[BUCKETS];
        BvList lru; /* decoded groups: head most recently used */
        size_t bytes, cap;
        size_t read_out_bytes, read_out_cap;
        uint8_t *spare[SPARES]; /* freed buffers of SPARE_CAP bytes */
        size_t n_spare;
        _Atomic uint64_t decodes;

        /* The decode gate: slots for threads reading and decoding (0: no limit). */
        pthread_mutex_t gate_lock;
        pthread_cond_t gate_free;
        unsigned gate_slots, gate_used;
};

int bv_group_cache_new(size_t cap_bytes, unsigned max_decodes, BvGroupCache **ret)
{
        BvGroupCache *gc = calloc(1, sizeof(*gc));

        if (!gc)
                return -ENOMEM;
        pthread_mutex_init(&gc->lock, NULL);
        pthread_cond_init(&gc->loaded, NULL);
        pthread_mutex_init(&gc->gate_lock, NULL);
        pthread_cond_init(&gc->gate_free, NULL);
        gc->gate_slots = max_decodes;
        gc->cap = cap_bytes;
        gc->read_out_cap = cap_bytes / READ_OUT_SHARE;
        atomic_init(&gc->decodes, 0);
        *ret = gc;
        return 0;
}

void bv_group_cache_free(BvGroupCache *gc)
{
        if (!gc)
                return;
        for (size_t b = 0; b < BUCKETS; b++)
                while (gc->buckets[b]) {
                        Group *g = gc->buckets[b];
                        gc->buckets[b] = g->hnext;
                        free(g->data);
                        free(g);
                }
        for (size_t i = 0; i < gc->n_spare; i++)
                free(gc->spare[i]);
        pthread_mutex_destroy(&gc->lock);
        pthread_cond_destroy(&gc->loaded);
        pthread_mutex_destroy(&gc->gate_lock);
        pthread_cond_destroy(&gc->gate_free);
        free(gc);
}

uint64_t bv_group_cache_decodes(BvGroupCache *gc)
{
        return gc ? atomic_load(&gc->decodes) : 0;
}

size_t bv_group_cache_bytes(BvGroupCache *gc)
{
        if (!gc)
                return 0;
        BV_LOCK_GUARD(&gc->lock);
        return gc->bytes;
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

static size_t bucket_of(const BvLocation *loc)
{
        /* pack ids are random */
        return (loc->pack_id[0] ^ loc->pack_id[1] ^ loc->offset ^ (loc->offset >> 12)) % BUCKETS;
}

static Group *find(BvGroupCache *gc, const BvLocation *loc)
{
        for (Group *g = gc->buckets[bucket_of(loc)]; g; g = g->hnext)
                if (g->offset == loc->offset && memcmp(g->pack_id, loc->pack_id, BV_PACK_ID_SIZE) == 0)
                        return g;
        return NULL;
}

static void unhash(BvGroupCache *gc, Group *g)
{
        for (Group **p = &gc->buckets[g->bucket]; *p; p = &(*p)->hnext)
                if (*p == g) {
                        *p = g->hnext;
                        return;
                }
}

static void set_read_out(BvGroupCache *gc, Group *g, bool read_out)
{
        if (g->read_out == read_out)
                return;
        g->read_out = read_out;
        if (read_out)
                gc->read_out_bytes += g->len;
        else
                gc->read_out_bytes -= g->len;
}

/* Frees cold groups beyond the cap, and read-out groups beyond theirs; groups being read are
 * skipped. */
static void evict(BvGroupCache *gc)
{
        Group *g = bv_list_entry_or_null(gc->lru.tail, Group, lru);

        while ((gc->bytes > gc->cap || gc->read_out_bytes > gc->read_out_cap) && g) {
                Group *prev = bv_list_entry_or_null(g->lru.prev, Group, lru);
                if (g->refs == 0 && (gc->bytes > gc->cap || g->read_out)) {
                        bv_list_unlink(&gc->lru, &g->lru);
                        unhash(gc, g);
                        set_read_out(gc, g, false);
                        gc->bytes -= g->len;
                        if (g->cap == SPARE_CAP && gc->n_spare < SPARES)
                                gc->spare[gc->n_spare++] = g->data;
                        else
                                free(g->data);
                        free(g);
                }
                g = prev;
        }
}

/* Decodes the group at loc and checks its trailer: into a spare buffer of SPARE_CAP bytes
 * when gc has one and the group fits, else into one of its own (malloc'd). ret_cap gets the
 * buffer's size, ret_data_len the length of the members' bytes. */
static int group_decode(BvGroupCache *gc, BvRepo *r, BvObjectCodec *codec, const BvLocation *loc, uint8_t **ret,
                        size_t *ret_len, size_t *ret_cap, size_t *ret_data_len)
{
        uint8_t *buf = NULL;
        size_t len, cap = SPARE_CAP;
        void *enc;
        int rr;

        rr = bv_repo_read_encoded(r, codec, loc, &enc);
        if (rr < 0)
                return rr;
        if (gc) {
                pthread_mutex_lock(&gc->lock);
                if (gc->n_spare > 0)
                        buf = gc->spare[--gc->n_spare];
                pthread_mutex_unlock(&gc->lock);
                if (!buf)
                        buf = malloc(SPARE_CAP);
                if (!buf)
                        return -ENOMEM;
        }
        /* only the decode is gated: a read waiting for the disk holds no slot */
        gate_enter(gc);
        if (buf) {
                rr = bv_object_decode(codec, BV_OBJ_GROUP, bv_group_id, enc, loc->length, buf, SPARE_CAP, &len);
                if (rr == -ENOBUFS) { /* larger than a backup writes: a buffer of its own */
                        free(buf);
                        buf = NULL;
                }
        }
        if (!buf) {
                rr = bv_object_decode_alloc(codec, BV_OBJ_GROUP, bv_group_id, enc, loc->length, (void **)&buf, &len);
                cap = len;
        }
        gate_leave(gc);
        if (rr >= 0)
                rr = bv_group_parse(buf, len, NULL, ret_data_len);
        if (rr < 0) {
                free(buf);
                return rr;
        }
        *ret = buf;
        *ret_len = len;
        *ret_cap = cap;
        return 0;
}

/* The decoded group at loc, referenced (group_put drops the reference): cached, decoded by
 * another thread (waited for), or decoded here. */
static int group_get(BvGroupCache *gc, BvRepo *r, BvObjectCodec *codec, const BvLocation *loc, Group **ret)
{
        uint8_t *data = NULL;
        size_t len = 0, cap = 0, data_len = 0;
        Group *g;
        int rr;

        pthread_mutex_lock(&gc->lock);
        for (;;) {
                g = find(gc, loc);
                if (!g)
                        break;
                if (g->data) {
                        g->refs++;
                        if (g->read_out) { /* read again: it is being reused */
                                set_read_out(gc, g, false);
                                g->taken = 0;
                        }
                        bv_list_unlink(&gc->lru, &g->lru);
                        bv_list_push_front(&gc->lru, &g->lru);
                        pthread_mutex_unlock(&gc->lock);
                        *ret = g;
                        return 0;
                }
                pthread_cond_wait(&gc->loaded, &gc->lock);
        }
        g = calloc(1, sizeof(*g));
        if (!g) {
                pthread_mutex_unlock(&gc->lock);
                return -ENOMEM;
        }
        memcpy(g->pack_id, loc->pack_id, BV_PACK_ID_SIZE);
        g->offset = loc->offset;
        g->bucket = bucket_of(loc);
        g->hnext = gc->buckets[g->bucket];
        gc->buckets[g->bucket] = g;
        pthread_mutex_unlock(&gc->lock);

        rr = group_decode(gc, r, codec, loc, &data, &len, &cap, &data_len);

        pthread_mutex_lock(&gc->lock);
        if (rr < 0) {
                unhash(gc, g);
                free(g);
                g = NULL;
        } else {
                atomic_fetch_add_explicit(&gc->decodes, 1, memory_order_relaxed);
                g->data = data;
                g->len = len;
                g->cap = cap;
                g->data_len = data_len;
                g->refs = 1;
                gc->bytes += len;
                bv_list_push_front(&gc->lru, &g->lru);
                evict(gc);
        }
        pthread_cond_broadcast(&gc->loaded);
        pthread_mutex_unlock(&gc->lock);
        *ret = g;
        return rr;
}

/* Drops a reference after n member bytes were taken out. */
static void group_put(BvGroupCache *gc, Group *g, size_t n)
{
        BV_LOCK_GUARD(&gc->lock);
        g->refs--;
        g->taken += n;
        if (!g->read_out && g->taken >= g->data_len) {
                /* every member was read (most likely): to the cold end, under the read-out cap */
                set_read_out(gc, g, true);
                bv_list_unlink(&gc->lru, &g->lru);
                bv_list_push_back(&gc->lru, &g->lru);
        }
        evict(gc);
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
                Group *g;

                rr = group_get(gc, r, codec, loc, &g);
                if (rr < 0)
                        return rr;
                rr = member_copy(g->data, g->len, loc, buf, cap, &n);
                group_put(gc, g, n);
        } else {
                _cleanup_free_ uint8_t *data = NULL;
                size_t len, data_cap, data_len;

                rr = group_decode(NULL, r, codec, loc, &data, &len, &data_cap, &data_len);
                if (rr < 0)
                        return rr;
                rr = member_copy(data, len, loc, buf, cap, &n);
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
