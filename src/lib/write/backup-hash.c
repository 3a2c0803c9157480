/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A batch's chunk ids on two cores (backup-hash.h). The helper waits on a condition variable
 * for a share [from, to) of the current batch, hashes it and signals back; the caller hashes
 * the first share meanwhile. Batches of an incremental are almost all stored chunks, so hashing
 * is most of the reading thread's work there; splitting it halves that thread's time.
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "backup-hash.h"
#include "chunker.h"
#include "macro.h"

struct BvBatchHasher {
        const BvKeyring *keyring;
        bool helper; /* the thread runs */
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop, busy; /* busy: a share is given and not yet done */
        const BvExtent *e;
        size_t from, to;
        uint8_t (*ids)[BV_ID_SIZE]; /* the batch's prefix ids, chunk after chunk */
        size_t first[BV_SPLITTER_BATCH_MAX + 1]; /* where each chunk's ids start */
};

static void hash_share(const BvKeyring *k, const BvExtent *e, size_t from, size_t to, uint8_t (*ids)[BV_ID_SIZE],
                       const size_t *first)
{
        for (size_t i = from; i < to; i++)
                bv_keyring_id_prefixes(k, BV_ID_CHUNK, e[i].data, (size_t)e[i].length, BV_BLOCK_SIZE, ids + first[i]);
}

static void *hasher_main(void *userdata)
{
        BvBatchHasher *h = userdata;

        pthread_mutex_lock(&h->lock);
        for (;;) {
                while (!h->busy && !h->stop)
                        pthread_cond_wait(&h->cond, &h->lock);
                if (!h->busy)
                        break;
                pthread_mutex_unlock(&h->lock);
                hash_share(h->keyring, h->e, h->from, h->to, h->ids, h->first);
                pthread_mutex_lock(&h->lock);
                h->busy = false;
                pthread_cond_broadcast(&h->cond);
        }
        pthread_mutex_unlock(&h->lock);
        return NULL;
}

int bv_batch_hasher_new(const BvKeyring *k, size_t bytes, bool helper, BvBatchHasher **ret)
{
        BvBatchHasher *h = calloc(1, sizeof(*h));
        int r;

        if (!h)
                return -ENOMEM;
        /* < bytes + one chunk, and a partial block per chunk at most */
        h->ids = calloc((bytes + BV_CHUNK_MAX_LIMIT) / BV_BLOCK_SIZE + BV_SPLITTER_BATCH_MAX, BV_ID_SIZE);
        if (!h->ids) {
                free(h);
                return -ENOMEM;
        }
        h->keyring = k;
        h->helper = helper;
        pthread_mutex_init(&h->lock, NULL);
        pthread_cond_init(&h->cond, NULL);
        r = helper ? -pthread_create(&h->thread, NULL, hasher_main, h) : 0;
        if (r < 0) {
                pthread_cond_destroy(&h->cond);
                pthread_mutex_destroy(&h->lock);
                free(h->ids);
                free(h);
                return r;
        }
        *ret = h;
        return 0;
}

void bv_batch_hasher_free(BvBatchHasher *h)
{
        if (!h)
                return;
        if (h->helper) {
                pthread_mutex_lock(&h->lock);
                h->stop = true;
                pthread_cond_broadcast(&h->cond);
                pthread_mutex_unlock(&h->lock);
                (void)pthread_join(h->thread, NULL);
        }
        pthread_cond_destroy(&h->cond);
        pthread_mutex_destroy(&h->lock);
        free(h->ids);
        free(h);
}

uint8_t (*bv_batch_hasher_ids(BvBatchHasher *h, size_t i))[BV_ID_SIZE]
{
        return h->ids + h->first[i];
}

void bv_batch_hasher_run(BvBatchHasher *h, const BvExtent *e, size_t n)
{
        uint8_t (*ids)[BV_ID_SIZE] = h->ids;
        size_t *first = h->first;
        uint64_t total = 0, half = 0;
        size_t mid = 0;

        first[0] = 0;
        for (size_t i = 0; i < n; i++) {
                first[i + 1] = first[i] + DIV_ROUND_UP((size_t)e[i].length, BV_BLOCK_SIZE);
                total += e[i].length;
        }
        /* the caller's share ends at the first chunk edge at or past half the bytes */
        while (mid < n && half * 2 < total)
                half += e[mid++].length;
        if (!h->helper || mid == n) {
                hash_share(h->keyring, e, 0, n, ids, first);
                return;
        }

        pthread_mutex_lock(&h->lock);
        h->e = e, h->from = mid, h->to = n;
        h->busy = true;
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);

        hash_share(h->keyring, e, 0, mid, ids, first);

        pthread_mutex_lock(&h->lock);
        while (h->busy)
                pthread_cond_wait(&h->cond, &h->lock);
        pthread_mutex_unlock(&h->lock);
}
