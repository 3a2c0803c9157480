/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dcache.h"
#include "list.h"
#include "macro.h"

#define BUCKETS 256u
#define SHARDS_MAX 256u

struct BvDecodeEntry {
        uint8_t *data; /* NULL while a thread decodes it */
        size_t len, cap;
        size_t full;   /* taken >= full: read out */
        size_t taken;  /* bytes copied out since it was decoded or reused */
        bool read_out; /* at the cold end, counted in read_out_bytes */
        unsigned refs;
        uint64_t hash;
        struct BvDecodeEntry *hnext;
        BvLink lru; /* only when decoded */
        uint8_t key[];
};

typedef struct Shard {
        pthread_mutex_t lock;
        pthread_cond_t loaded;
        BvDecodeEntry *buckets[BUCKETS];
        BvList lru; /* head: most recently used; read-out entries at the tail */
        size_t bytes, cap;
        size_t read_out_bytes, read_out_cap;
} Shard;

struct BvDecodeCache {
        size_t key_size;
        size_t spare_size;
        unsigned n_shards, max_spares;
        _Atomic uint64_t decodes;
        pthread_mutex_t spare_lock;
        uint8_t **spare;
        size_t n_spare;
        Shard shards[];
};

int bv_dcache_new(const BvDecodeCacheOptions *opts, BvDecodeCache **ret)
{
        unsigned n = opts && opts->shards ? opts->shards : 1;
        BvDecodeCache *c;

        if (!opts || !ret || opts->key_size == 0 || opts->key_size > BV_DCACHE_KEY_MAX || n > SHARDS_MAX)
                return -EINVAL;
        c = calloc(1, sizeof(*c) + n * sizeof(Shard));
        if (!c)
                return -ENOMEM;
        c->key_size = opts->key_size;
        c->n_shards = n;
        c->spare_size = opts->spares ? opts->spare_size : 0;
        c->max_spares = c->spare_size ? opts->spares : 0;
        if (c->max_spares) {
                c->spare = calloc(c->max_spares, sizeof(*c->spare));
                if (!c->spare) {
                        free(c);
                        return -ENOMEM;
                }
        }
        pthread_mutex_init(&c->spare_lock, NULL);
        atomic_init(&c->decodes, 0);
        for (unsigned i = 0; i < n; i++) {
                Shard *s = &c->shards[i];
                pthread_mutex_init(&s->lock, NULL);
                pthread_cond_init(&s->loaded, NULL);
                s->cap = opts->cap_bytes / n;
                s->read_out_cap = opts->read_out_share ? s->cap / opts->read_out_share : s->cap;
        }
        *ret = c;
        return 0;
}

void bv_dcache_free(BvDecodeCache *c)
{
        if (!c)
                return;
        for (unsigned i = 0; i < c->n_shards; i++) {
                Shard *s = &c->shards[i];
                for (size_t b = 0; b < BUCKETS; b++)
                        while (s->buckets[b]) {
                                BvDecodeEntry *e = s->buckets[b];
                                s->buckets[b] = e->hnext;
                                free(e->data);
                                free(e);
                        }
                pthread_mutex_destroy(&s->lock);
                pthread_cond_destroy(&s->loaded);
        }
        for (size_t i = 0; i < c->n_spare; i++)
                free(c->spare[i]);
        free(c->spare);
        pthread_mutex_destroy(&c->spare_lock);
        free(c);
}

uint8_t *bv_dcache_buffer(BvDecodeCache *c)
{
        uint8_t *buf = NULL;

        if (!c || c->spare_size == 0)
                return NULL;
        pthread_mutex_lock(&c->spare_lock);
        if (c->n_spare > 0)
                buf = c->spare[--c->n_spare];
        pthread_mutex_unlock(&c->spare_lock);
        return buf ? buf : malloc(c->spare_size);
}

void bv_dcache_recycle(BvDecodeCache *c, uint8_t *buf)
{
        if (buf && c && c->spare_size) {
                BV_LOCK_GUARD(&c->spare_lock);
                if (c->n_spare < c->max_spares) {
                        c->spare[c->n_spare++] = buf;
                        return;
                }
        }
        free(buf);
}

/* FNV-1a: keys of random bytes (ids) and keys that are not (a pack id and an offset) alike. */
static uint64_t key_hash(const BvDecodeCache *c, const uint8_t *key)
{
        uint64_t h = 0xcbf29ce484222325ull;

        for (size_t i = 0; i < c->key_size; i++)
                h = (h ^ key[i]) * 0x100000001b3ull;
        return h ^ (h >> 29);
}

static Shard *shard_of(BvDecodeCache *c, uint64_t hash)
{
        return &c->shards[hash % c->n_shards];
}

static BvDecodeEntry **bucket_of(Shard *s, uint64_t hash)
{
        return &s->buckets[(hash >> 16) % BUCKETS];
}

static BvDecodeEntry *find(BvDecodeCache *c, Shard *s, uint64_t hash, const uint8_t *key)
{
        for (BvDecodeEntry *e = *bucket_of(s, hash); e; e = e->hnext)
                if (e->hash == hash && memcmp(e->key, key, c->key_size) == 0)
                        return e;
        return NULL;
}

static void unhash(Shard *s, BvDecodeEntry *e)
{
        for (BvDecodeEntry **p = bucket_of(s, e->hash); *p; p = &(*p)->hnext)
                if (*p == e) {
                        *p = e->hnext;
                        return;
                }
}

static void set_read_out(Shard *s, BvDecodeEntry *e, bool read_out)
{
        if (e->read_out == read_out)
                return;
        e->read_out = read_out;
        if (read_out)
                s->read_out_bytes += e->len;
        else
                s->read_out_bytes -= e->len;
}

/* Frees cold entries beyond the cap, and read-out ones beyond theirs; referenced entries stay. */
static void evict(BvDecodeCache *c, Shard *s)
{
        BvDecodeEntry *e = bv_list_entry_or_null(s->lru.tail, BvDecodeEntry, lru);

        while ((s->bytes > s->cap || s->read_out_bytes > s->read_out_cap) && e) {
                BvDecodeEntry *prev = bv_list_entry_or_null(e->lru.prev, BvDecodeEntry, lru);
                if (e->refs == 0 && (s->bytes > s->cap || e->read_out)) {
                        bv_list_unlink(&s->lru, &e->lru);
                        unhash(s, e);
                        set_read_out(s, e, false);
                        s->bytes -= e->len;
                        if (e->cap == c->spare_size)
                                bv_dcache_recycle(c, e->data);
                        else
                                free(e->data);
                        free(e);
                }
                e = prev;
        }
}

/* Under the shard's lock: references a decoded entry and makes it the most recently used. */
static BvDecodeEntry *take(Shard *s, BvDecodeEntry *e)
{
        e->refs++;
        if (e->read_out) { /* taken from again: reused */
                set_read_out(s, e, false);
                e->taken = 0;
        }
        bv_list_unlink(&s->lru, &e->lru);
        bv_list_push_front(&s->lru, &e->lru);
        return e;
}

/* Decodes into the placeholder e (hashed, not decoded) and publishes it, or unhashes it. */
static int decode(BvDecodeCache *c, Shard *s, BvDecodeEntry *e, BvDecodeFn fn, void *userdata)
{
        BvDecoded d = {};
        int r = fn(userdata, c, &d);

        if (r >= 0 && !d.data)
                r = -EINVAL; /* a decoder delivers a buffer, even for no bytes */

        pthread_mutex_lock(&s->lock);
        if (r < 0) {
                unhash(s, e);
                free(e);
        } else {
                atomic_fetch_add_explicit(&c->decodes, 1, memory_order_relaxed);
                e->data = d.data;
                e->len = d.len;
                e->cap = d.cap;
                e->full = d.full ? d.full : d.len;
                e->refs = 1;
                s->bytes += e->len;
                bv_list_push_front(&s->lru, &e->lru);
                evict(c, s);
        }
        pthread_cond_broadcast(&s->loaded);
        pthread_mutex_unlock(&s->lock);
        return r;
}

int bv_dcache_get(BvDecodeCache *c, const void *key, unsigned flags, BvDecodeFn fn, void *userdata,
                  BvDecodeEntry **ret)
{
        uint64_t hash;
        Shard *s;
        BvDecodeEntry *e;
        int r;

        if (!c || !key || !ret || (!fn && !(flags & BV_DCACHE_PEEK)))
                return -EINVAL;
        hash = key_hash(c, key);
        s = shard_of(c, hash);
        *ret = NULL;
        pthread_mutex_lock(&s->lock);
        for (;;) {
                e = find(c, s, hash, key);
                if (!e)
                        break;
                if (e->data) {
                        *ret = take(s, e);
                        pthread_mutex_unlock(&s->lock);
                        return 0;
                }
                if (flags & BV_DCACHE_NOWAIT) {
                        pthread_mutex_unlock(&s->lock);
                        return 0;
                }
                pthread_cond_wait(&s->loaded, &s->lock);
        }
        if (flags & BV_DCACHE_PEEK) {
                pthread_mutex_unlock(&s->lock);
                return 0;
        }
        /* Not cached: a placeholder tells others that this thread decodes it. */
        e = calloc(1, sizeof(*e) + c->key_size);
        if (!e) {
                pthread_mutex_unlock(&s->lock);
                return -ENOMEM;
        }
        memcpy(e->key, key, c->key_size);
        e->hash = hash;
        e->hnext = *bucket_of(s, hash);
        *bucket_of(s, hash) = e;
        pthread_mutex_unlock(&s->lock);

        r = decode(c, s, e, fn, userdata);
        if (r < 0)
                return r;
        *ret = e;
        return 0;
}

void bv_dcache_put(BvDecodeCache *c, BvDecodeEntry *e, size_t taken)
{
        Shard *s;

        if (!c || !e)
                return;
        s = shard_of(c, e->hash);
        BV_LOCK_GUARD(&s->lock);
        e->refs--;
        e->taken += taken;
        if (!e->read_out && e->taken >= e->full) {
                /* every byte was taken (most likely a stream): to the cold end, under its cap */
                set_read_out(s, e, true);
                bv_list_unlink(&s->lru, &e->lru);
                bv_list_push_back(&s->lru, &e->lru);
        }
        evict(c, s);
}

const uint8_t *bv_dcache_data(const BvDecodeEntry *e, size_t *ret_len)
{
        if (ret_len)
                *ret_len = e->len;
        return e->data;
}

uint64_t bv_dcache_decodes(BvDecodeCache *c)
{
        return c ? atomic_load(&c->decodes) : 0;
}

static size_t sum_shards(BvDecodeCache *c, bool read_out)
{
        size_t n = 0;

        for (unsigned i = 0; c && i < c->n_shards; i++) {
                BV_LOCK_GUARD(&c->shards[i].lock);
                n += read_out ? c->shards[i].read_out_bytes : c->shards[i].bytes;
        }
        return n;
}

size_t bv_dcache_bytes(BvDecodeCache *c)
{
        return sum_shards(c, false);
}

size_t bv_dcache_read_out_bytes(BvDecodeCache *c)
{
        return sum_shards(c, true);
}
