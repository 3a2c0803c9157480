/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "queue.h"

int bv_queue_init(BvQueue *q, size_t item_size, size_t capacity)
{
        *q = (BvQueue){ .item_size = item_size, .capacity = capacity };
        q->items = calloc(capacity, item_size);
        if (!q->items)
                return -ENOMEM;
        pthread_mutex_init(&q->lock, NULL);
        pthread_cond_init(&q->not_empty, NULL);
        pthread_cond_init(&q->not_full, NULL);
        return 0;
}

void bv_queue_done(BvQueue *q)
{
        if (!q->items)
                return;
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->not_empty);
        pthread_cond_destroy(&q->not_full);
        free(q->items);
        q->items = NULL;
}

static void put_locked(BvQueue *q, const void *item)
{
        memcpy(q->items + ((q->head + q->count) % q->capacity) * q->item_size, item, q->item_size);
        q->count++;
        pthread_cond_signal(&q->not_empty);
}

int bv_queue_push(BvQueue *q, const void *item)
{
        BV_LOCK_GUARD(&q->lock);

        while (q->count == q->capacity && !q->closed && !q->cancelled)
                pthread_cond_wait(&q->not_full, &q->lock);
        if (q->closed || q->cancelled)
                return -ECANCELED;
        put_locked(q, item);
        return 0;
}

bool bv_queue_try_push(BvQueue *q, const void *item)
{
        BV_LOCK_GUARD(&q->lock);

        if (q->count == q->capacity || q->closed || q->cancelled)
                return false;
        put_locked(q, item);
        return true;
}

int bv_queue_pop(BvQueue *q, void *item)
{
        BV_LOCK_GUARD(&q->lock);

        while (q->count == 0 && !q->closed && !q->cancelled)
                pthread_cond_wait(&q->not_empty, &q->lock);
        if (q->cancelled || q->count == 0)
                return 0;
        memcpy(item, q->items + q->head * q->item_size, q->item_size);
        q->head = (q->head + 1) % q->capacity;
        q->count--;
        pthread_cond_signal(&q->not_full);
        return 1;
}

void bv_queue_close(BvQueue *q)
{
        BV_LOCK_GUARD(&q->lock);

        q->closed = true;
        pthread_cond_broadcast(&q->not_empty);
        pthread_cond_broadcast(&q->not_full);
}

bool bv_queue_peek(BvQueue *q, void *item)
{
        BV_LOCK_GUARD(&q->lock);

        if (q->count == 0)
                return false;
        memcpy(item, q->items + q->head * q->item_size, q->item_size);
        return true;
}

void bv_queue_cancel(BvQueue *q)
{
        BV_LOCK_GUARD(&q->lock);

        q->cancelled = true;
        q->count = 0;
        pthread_cond_broadcast(&q->not_empty);
        pthread_cond_broadcast(&q->not_full);
}
