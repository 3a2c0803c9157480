/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The decode-once cache: an LRU of decoded objects (chunks, compression groups) under a cap in
 * bytes, sharded by key, in which each key is decoded once even when several threads ask for
 * it at the same time (the others wait for the first). Entries are handed out referenced, and
 * a referenced entry is never evicted.
 *
 * Drop-behind: an entry whose every byte was taken out (a sequential pass going through) moves
 * to the cold end, and such "read out" entries are kept only up to a share of the cap: a
 * whole-image copy then recycles a few buffers instead of filling the cache, while entries read
 * in parts (random reads, a filesystem's metadata) stay. Taking from a read-out entry again
 * starts its count anew (it is being reused).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BV_DCACHE_KEY_MAX 32u

typedef struct BvDecodeCache BvDecodeCache;
typedef struct BvDecodeEntry BvDecodeEntry;

typedef struct BvDecodeCacheOptions {
        size_t cap_bytes;        /* decoded bytes held (entries being read are kept beyond it) */
        size_t key_size;         /* 1 to BV_DCACHE_KEY_MAX bytes */
        unsigned shards;         /* each with its own lock and a share of the cap; 0: one */
        unsigned read_out_share; /* read-out entries are kept up to the cap / this; 0: the cap */
        size_t spare_size;       /* freed buffers of exactly this size are recycled; 0: none */
        unsigned spares;         /* how many of them are kept at the most */
} BvDecodeCacheOptions;

/* What a decoder delivers: the cache owns data afterwards (and frees or recycles it). */
typedef struct BvDecoded {
        uint8_t *data; /* malloc'd, or from bv_dcache_buffer */
        size_t len;    /* bytes of data (what counts against the cap) */
        size_t cap;    /* the buffer's size: spare_size makes it a recyclable one */
        size_t full;   /* bytes taken out that make the entry read out; 0: len */
} BvDecoded;

/* Decodes the object of the key that bv_dcache_get was asked for: 0, or -errno (then nothing
 * is cached and the next caller tries again). Runs without any of the cache's locks. */
typedef int (*BvDecodeFn)(void *userdata, BvDecodeCache *c, BvDecoded *ret);

enum {
        BV_DCACHE_NOWAIT = 1 << 0, /* a key another thread is decoding: not waited for, *ret NULL */
        BV_DCACHE_PEEK = 1 << 1,   /* an absent key is not decoded: *ret NULL */
};

int bv_dcache_new(const BvDecodeCacheOptions *opts, BvDecodeCache **ret);
void bv_dcache_free(BvDecodeCache *c);

/* The entry of key, referenced (bv_dcache_put drops the reference): cached, decoded by another
 * thread (waited for), or decoded here by fn. *ret is NULL (and 0 returned) only as flags say. */
int bv_dcache_get(BvDecodeCache *c, const void *key, unsigned flags, BvDecodeFn fn, void *userdata,
                  BvDecodeEntry **ret);
/* Drops a reference; taken: how many more bytes of the entry were copied out meanwhile. */
void bv_dcache_put(BvDecodeCache *c, BvDecodeEntry *e, size_t taken);
/* The decoded bytes of a referenced entry. */
const uint8_t *bv_dcache_data(const BvDecodeEntry *e, size_t *ret_len);

/* A buffer of spare_size bytes for a decoder (a recycled one if any); NULL when out of memory.
 * bv_dcache_recycle takes back one the decoder did not deliver. */
uint8_t *bv_dcache_buffer(BvDecodeCache *c);
void bv_dcache_recycle(BvDecodeCache *c, uint8_t *buf);

uint64_t bv_dcache_decodes(BvDecodeCache *c); /* objects decoded so far */
size_t bv_dcache_bytes(BvDecodeCache *c);     /* decoded bytes held now */
size_t bv_dcache_read_out_bytes(BvDecodeCache *c); /* of which read out */
