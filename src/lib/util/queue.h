/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A bounded work queue: a ring of fixed-size items between producers and worker threads.
 * push blocks while the queue is full, pop while it is empty; close lets the workers drain
 * what is queued and then see the end; cancel (on an error) wakes everyone at once and drops
 * what is left. One mutex and two condition variables, nothing allocated after init.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct BvQueue {
        pthread_mutex_t lock;
        pthread_cond_t not_empty, not_full;
        unsigned char *items;
        size_t item_size, capacity, head, count;
        bool closed, cancelled;
} BvQueue;

/* 0 or -ENOMEM. */
int bv_queue_init(BvQueue *q, size_t item_size, size_t capacity);
void bv_queue_done(BvQueue *q);

/* Copies item in, waiting while the queue is full: 0, or -ECANCELED once cancelled or closed. */
int bv_queue_push(BvQueue *q, const void *item);
/* The same without waiting: false when the queue is full, closed or cancelled. */
bool bv_queue_try_push(BvQueue *q, const void *item);
/* Copies the oldest item out, waiting while the queue is empty: 1, or 0 at the end (closed and
 * drained, or cancelled). */
int bv_queue_pop(BvQueue *q, void *item);

/* Copies the oldest item out without taking it: false when the queue is empty. */
bool bv_queue_peek(BvQueue *q, void *item);

/* No more pushes; pops drain the queue, then return 0. */
void bv_queue_close(BvQueue *q);
/* No more pushes or pops: everyone waiting wakes up, queued items are dropped. */
void bv_queue_cancel(BvQueue *q);
