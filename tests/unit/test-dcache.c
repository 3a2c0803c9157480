/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "bvtest.h"
#include "dcache.h"
#include "macro.h"

/* A decoder that delivers `len` bytes of the key's first byte and counts its calls. */
typedef struct Decoder {
        _Atomic unsigned calls;
        size_t len, full;
        int fail;            /* -errno to return instead */
        useconds_t delay_us; /* how long a decode takes */
        bool spare;          /* into a buffer of the cache's spare size */
        uint8_t *last_buf;   /* the buffer the last decode delivered */
} Decoder;

static uint8_t key_byte;

static int decode(void *userdata, BvDecodeCache *c, BvDecoded *ret)
{
        Decoder *d = userdata;
        uint8_t *buf;

        atomic_fetch_add(&d->calls, 1);
        if (d->delay_us)
                usleep(d->delay_us);
        if (d->fail)
                return d->fail;
        buf = d->spare ? bv_dcache_buffer(c) : malloc(d->len);
        if (!buf)
                return -ENOMEM;
        memset(buf, key_byte, d->len);
        d->last_buf = buf;
        *ret = (BvDecoded){ .data = buf, .len = d->len, .cap = d->spare ? 4096 : d->len, .full = d->full };
        return 0;
}

/* Gets key k (a 32-byte key of k) through d, copies n bytes out and checks them. */
static int get_take(BvDecodeCache *c, Decoder *d, uint8_t k, size_t n, unsigned flags)
{
        uint8_t key[32];
        BvDecodeEntry *e;
        size_t len;
        int r;

        memset(key, k, sizeof(key));
        key_byte = k;
        r = bv_dcache_get(c, key, flags, decode, d, &e);
        if (r < 0)
                return r;
        if (!e)
                return 0;
        const uint8_t *data = bv_dcache_data(e, &len);
        ASSERT_EQ(len, d->len);
        for (size_t i = 0; i < len; i++)
                ASSERT_EQ(data[i], k);
        bv_dcache_put(c, e, n);
        return 1;
}

static BvDecodeCache *cache(size_t cap, unsigned shards, unsigned read_out_share)
{
        BvDecodeCache *c;

        ASSERT_OK(bv_dcache_new(&(BvDecodeCacheOptions){ .cap_bytes = cap, .key_size = 32, .shards = shards,
                                                         .read_out_share = read_out_share },
                                &c));
        return c;
}

TEST(decodes_once_and_evicts_lru)
{
        BvDecodeCache *c = cache(400, 1, 0);
        Decoder d = { .len = 100 };

        for (uint8_t k = 1; k <= 4; k++)
                ASSERT_EQ(get_take(c, &d, k, 10, 0), 1);
        ASSERT_EQ(d.calls, 4);
        ASSERT_EQ(bv_dcache_bytes(c), 400);
        ASSERT_EQ(get_take(c, &d, 1, 10, 0), 1); /* cached: no decode; now the most recent */
        ASSERT_EQ(d.calls, 4);
        ASSERT_EQ(get_take(c, &d, 5, 10, 0), 1); /* evicts 2, the least recently used */
        ASSERT_EQ(d.calls, 5);
        ASSERT_EQ(bv_dcache_bytes(c), 400);
        ASSERT_EQ(get_take(c, &d, 1, 10, 0), 1);
        ASSERT_EQ(d.calls, 5);
        ASSERT_EQ(get_take(c, &d, 2, 10, 0), 1); /* decoded again */
        ASSERT_EQ(d.calls, 6);
        ASSERT_EQ(bv_dcache_decodes(c), 6);
        bv_dcache_free(c);
}

TEST(referenced_entries_stay)
{
        BvDecodeCache *c = cache(100, 1, 0);
        Decoder d = { .len = 100 };
        BvDecodeEntry *held;
        uint8_t key[32];

        memset(key, 7, sizeof(key));
        key_byte = 7;
        ASSERT_OK(bv_dcache_get(c, key, 0, decode, &d, &held));
        ASSERT_EQ(get_take(c, &d, 8, 0, 0), 1); /* over the cap, but 7 is being read */
        ASSERT_EQ(bv_dcache_data(held, NULL)[99], 7);
        bv_dcache_put(c, held, 0);
        ASSERT_EQ(bv_dcache_bytes(c), 100); /* 8 went when it was released: 7 was still held */
        ASSERT_EQ(get_take(c, &d, 7, 0, 0), 1);
        ASSERT_EQ(d.calls, 2);
        bv_dcache_free(c);
}

TEST(drop_behind)
{
        /* read-out entries are kept up to 1000 / 4 = 250 bytes: two of 100 */
        BvDecodeCache *c = cache(1000, 1, 4);
        Decoder d = { .len = 100, .full = 60 };

        ASSERT_EQ(get_take(c, &d, 1, 10, 0), 1); /* read in part: stays */
        for (uint8_t k = 2; k <= 6; k++)
                ASSERT_EQ(get_take(c, &d, k, 60, 0), 1); /* read out */
        ASSERT_EQ(bv_dcache_read_out_bytes(c), 200);
        ASSERT_EQ(bv_dcache_bytes(c), 300);
        ASSERT_EQ(get_take(c, &d, 1, 0, 0), 1); /* still there */
        ASSERT_EQ(get_take(c, &d, 2, 0, 0), 1); /* the first read-out ones too; taking resets it */
        ASSERT_EQ(d.calls, 6);
        ASSERT_EQ(bv_dcache_read_out_bytes(c), 100);
        /* each read-out entry beyond the share went as soon as it was read out */
        ASSERT_EQ(get_take(c, &d, 6, 0, 0), 1);
        ASSERT_EQ(d.calls, 7);
        /* taking 60 more of 2 after its reuse makes it read out again */
        ASSERT_EQ(get_take(c, &d, 2, 60, 0), 1);
        ASSERT_EQ(bv_dcache_read_out_bytes(c), 200);
        bv_dcache_free(c);
}

TEST(peek_nowait_and_errors)
{
        BvDecodeCache *c = cache(1000, 4, 0);
        Decoder d = { .len = 10 };

        ASSERT_EQ(get_take(c, &d, 1, 0, BV_DCACHE_PEEK), 0); /* absent: not decoded */
        ASSERT_EQ(d.calls, 0);
        d.fail = -EBADMSG;
        ASSERT_ERROR(get_take(c, &d, 1, 0, 0), EBADMSG);
        ASSERT_EQ(bv_dcache_bytes(c), 0); /* nothing cached: the next caller tries again */
        d.fail = 0;
        ASSERT_EQ(get_take(c, &d, 1, 0, 0), 1);
        ASSERT_EQ(d.calls, 2);
        ASSERT_EQ(get_take(c, &d, 1, 0, BV_DCACHE_PEEK | BV_DCACHE_NOWAIT), 1);
        ASSERT_EQ(d.calls, 2);
        ASSERT_EQ(bv_dcache_decodes(c), 1);
        ASSERT_ERROR(bv_dcache_new(&(BvDecodeCacheOptions){ .key_size = 33 }, &c), EINVAL);
        bv_dcache_free(c);
}

static BvDecodeCache *shared;
static Decoder slow = { .len = 4096, .delay_us = 50000 };

static void *reader(void *arg)
{
        (void)arg;
        ASSERT_EQ(get_take(shared, &slow, 9, 1, 0), 1);
        return NULL;
}

TEST(concurrent_readers_share_one_decode)
{
        pthread_t t[8];

        shared = cache(1 << 20, 2, 0);
        key_byte = 9;
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                ASSERT_EQ(pthread_create(&t[i], NULL, reader, NULL), 0);
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                ASSERT_EQ(pthread_join(t[i], NULL), 0);
        ASSERT_EQ(slow.calls, 1);
        ASSERT_EQ(bv_dcache_decodes(shared), 1);

        /* a thread that does not wait leaves a decode in progress to its decoder */
        pthread_t one;
        uint8_t key[32];
        BvDecodeEntry *e = NULL;

        bv_dcache_free(shared);
        shared = cache(1 << 20, 2, 0);
        slow.calls = 0;
        ASSERT_EQ(pthread_create(&one, NULL, reader, NULL), 0);
        while (atomic_load(&slow.calls) == 0)
                usleep(1000);
        memset(key, 9, sizeof(key));
        ASSERT_OK(bv_dcache_get(shared, key, BV_DCACHE_NOWAIT, decode, &slow, &e));
        ASSERT_TRUE(e == NULL);
        ASSERT_EQ(pthread_join(one, NULL), 0);
        ASSERT_EQ(slow.calls, 1);
        bv_dcache_free(shared);
}

TEST(spare_buffers_are_recycled)
{
        BvDecodeCache *c;
        Decoder d = { .len = 100, .spare = true };

        ASSERT_OK(bv_dcache_new(&(BvDecodeCacheOptions){ .cap_bytes = 100, .key_size = 32, .spare_size = 4096,
                                                         .spares = 2 },
                                &c));
        ASSERT_EQ(get_take(c, &d, 1, 0, 0), 1);
        uint8_t *first = d.last_buf;
        ASSERT_EQ(get_take(c, &d, 2, 0, 0), 1); /* evicts 1: its buffer becomes a spare */
        ASSERT_EQ(get_take(c, &d, 3, 0, 0), 1); /* ... and is delivered again */
        ASSERT_TRUE(d.last_buf == first);
        bv_dcache_free(c);
}

int main(void)
{
        RUN(decodes_once_and_evicts_lru);
        RUN(referenced_entries_stay);
        RUN(drop_behind);
        RUN(peek_nowait_and_errors);
        RUN(concurrent_readers_share_one_decode);
        RUN(spare_buffers_are_recycled);
        return 0;
}
