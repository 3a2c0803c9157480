/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "macro.h"
#include "writeback.h"

#define STEP_DEFAULT (8u * 1024 * 1024)

struct BvWriteback {
        int fd;
        uint64_t step;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        uint64_t written, started_at; /* bytes reported; reported when writeback last started */
        uint64_t rounds;
        bool stop;
};

static void *writeback_thread(void *userdata)
{
        BvWriteback *wb = userdata;

        pthread_mutex_lock(&wb->lock);
        for (;;) {
                while (!wb->stop && wb->written - wb->started_at < wb->step)
                        pthread_cond_wait(&wb->wake, &wb->lock);
                if (wb->stop && wb->written == wb->started_at)
                        break;
                wb->started_at = wb->written;
                wb->rounds++;
                pthread_mutex_unlock(&wb->lock);
                /* the whole file: pages already clean or under writeback are passed over, so
                 * this costs what is dirty; the writers' final fsync reports errors */
                (void)sync_file_range(wb->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
                pthread_mutex_lock(&wb->lock);
        }
        pthread_mutex_unlock(&wb->lock);
        return NULL;
}

int bv_writeback_start(int fd, uint64_t step, BvWriteback **ret)
{
        BvWriteback *wb;
        int r;

        if (fd < 0 || !ret)
                return -EINVAL;
        wb = calloc(1, sizeof(*wb));
        if (!wb)
                return -ENOMEM;
        wb->fd = fd;
        wb->step = step ? step : STEP_DEFAULT;
        pthread_mutex_init(&wb->lock, NULL);
        pthread_cond_init(&wb->wake, NULL);
        r = pthread_create(&wb->thread, NULL, writeback_thread, wb);
        if (r != 0) {
                pthread_cond_destroy(&wb->wake);
                pthread_mutex_destroy(&wb->lock);
                free(wb);
                return -r;
        }
        *ret = wb;
        return 0;
}

void bv_writeback_add(BvWriteback *wb, uint64_t n)
{
        if (!wb)
                return;
        BV_LOCK_GUARD(&wb->lock);
        wb->written += n;
        if (wb->written - wb->started_at >= wb->step)
                pthread_cond_signal(&wb->wake);
}

uint64_t bv_writeback_rounds(BvWriteback *wb)
{
        BV_LOCK_GUARD(&wb->lock);
        return wb->rounds;
}

void bv_writeback_free(BvWriteback *wb)
{
        if (!wb)
                return;
        pthread_mutex_lock(&wb->lock);
        wb->stop = true;
        pthread_cond_signal(&wb->wake);
        pthread_mutex_unlock(&wb->lock);
        pthread_join(wb->thread, NULL);
        pthread_cond_destroy(&wb->wake);
        pthread_mutex_destroy(&wb->lock);
        free(wb);
}
