/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Windows of an object read from S3 as a stream (s3-window.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "s3-window.h"

/* Reads that miss within this of the last miss make a stream. */
#define S3_READ_AROUND (2u << 20)

void s3_windows_init(S3Windows *ws)
{
        *ws = (S3Windows){};
        pthread_mutex_init(&ws->mutex, NULL);
        pthread_cond_init(&ws->fetched, NULL);
}

void s3_windows_done(S3Windows *ws)
{
        for (size_t i = 0; i < S3_WINDOWS; i++)
                free(ws->w[i].data);
        pthread_cond_destroy(&ws->fetched);
        pthread_mutex_destroy(&ws->mutex);
}

static S3Window *find(S3Windows *ws, uint64_t k)
{
        for (size_t i = 0; i < S3_WINDOWS; i++)
                if (ws->w[i].state != S3_WIN_EMPTY && ws->w[i].k == k)
                        return &ws->w[i];
        return NULL;
}

/* An empty slot, else the least recently used window held; NULL when all are being fetched. */
static S3Window *victim(S3Windows *ws)
{
        S3Window *v = NULL;
        for (size_t i = 0; i < S3_WINDOWS; i++) {
                S3Window *w = &ws->w[i];
                if (w->state == S3_WIN_EMPTY)
                        return w;
                if (w->state == S3_WIN_READY && (!v || w->tick < v->tick))
                        v = w;
        }
        return v;
}

static void drop(S3Window *w)
{
        free(w->data);
        *w = (S3Window){};
}

/* Window k into a slot, fetched by this thread (mutex held; released during the GET). The
 * slot, or NULL when there is no room or the GET failed (the caller reads by itself). */
static S3Window *fetch_locked(S3Windows *ws, uint64_t k, uint64_t size, s3_fetch_fn fetch, void *userdata)
{
        S3Window *w = victim(ws);
        if (!w)
                return NULL;
        uint64_t len = MIN((uint64_t)S3_WIN, size - k * S3_WIN);
        drop(w);
        *w = (S3Window){ .k = k, .state = S3_WIN_FETCHING };
        pthread_mutex_unlock(&ws->mutex);
        uint8_t *data = malloc(len);
        ssize_t n = data ? fetch(userdata, k * S3_WIN, len, data) : -ENOMEM;
        pthread_mutex_lock(&ws->mutex);
        if (n >= 0 && (uint64_t)n == len) {
                w->data = data;
                w->len = len;
                w->state = S3_WIN_READY;
        } else {
                free(data);
                *w = (S3Window){};
        }
        pthread_cond_broadcast(&ws->fetched);
        return w->state == S3_WIN_READY ? w : NULL;
}

/* Window k held (waiting while it is fetched), fetched first when may_fetch; NULL otherwise. */
static S3Window *get_locked(S3Windows *ws, uint64_t k, uint64_t size, bool may_fetch, s3_fetch_fn fetch,
                            void *userdata)
{
        for (;;) {
                S3Window *w = find(ws, k);
                if (w && w->state == S3_WIN_READY)
                        return w;
                if (w) {
                        pthread_cond_wait(&ws->fetched, &ws->mutex);
                        continue;
                }
                return may_fetch ? fetch_locked(ws, k, size, fetch, userdata) : NULL;
        }
}

/* Whether a read of [off, off+len) belongs to a stream: announced, or near the last read that
 * missed (which it then becomes). */
static bool streaming_locked(S3Windows *ws, uint64_t off, size_t len)
{
        uint64_t last = ws->miss_end;
        if (off + len <= ws->stream_end)
                return true;
        ws->miss_end = off + len;
        return last > 0 && off + S3_READ_AROUND >= last && off <= last + S3_READ_AROUND;
}

size_t s3_windows_read(S3Windows *ws, uint64_t size, void *buf, size_t len, uint64_t off, s3_fetch_fn fetch,
                       void *userdata)
{
        size_t done = 0;
        BV_LOCK_GUARD(&ws->mutex);
        bool stream = streaming_locked(ws, off, len);
        while (done < len) {
                uint64_t at = off + done, k = at / S3_WIN;
                S3Window *w = get_locked(ws, k, size, stream, fetch, userdata);
                if (!w)
                        break;
                size_t n = (size_t)MIN((uint64_t)(len - done), w->len - (at - k * S3_WIN));
                memcpy((uint8_t *)buf + done, w->data + (at - k * S3_WIN), n);
                done += n;
                w->tick = ++ws->tick;
                w->used += n;
                if (w->used >= w->len)
                        drop(w);
        }
        return done;
}

void s3_windows_advise(S3Windows *ws, uint64_t size, uint64_t off, uint64_t len, s3_fetch_fn fetch, void *userdata)
{
        if (off >= size)
                return;
        uint64_t end = MIN(size, off + len);
        BV_LOCK_GUARD(&ws->mutex);
        ws->stream_end = MAX(ws->stream_end, end);
        for (uint64_t k = off / S3_WIN; k * S3_WIN < end; k++)
                if (!find(ws, k)) {
                        (void)fetch_locked(ws, k, size, fetch, userdata);
                        return;
                }
}
