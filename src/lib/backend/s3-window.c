/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Windows of objects read from S3 as streams (s3-window.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "s3-window.h"

/* Reads that miss within this of the last miss make a stream. */
#define S3_READ_AROUND (2u << 20)

int s3_windows_init(S3Windows *ws, size_t n)
{
        *ws = (S3Windows){ .n = n ? n : S3_WINDOWS, .max_threads = S3_PREFETCHERS };
        ws->w = calloc(ws->n, sizeof(*ws->w));
        if (!ws->w)
                return -ENOMEM;
        pthread_mutex_init(&ws->mutex, NULL);
        pthread_cond_init(&ws->fetched, NULL);
        pthread_cond_init(&ws->wake, NULL);
        return 0;
}

static void drop(S3Window *w)
{
        free(w->data);
        free(w->obj);
        *w = (S3Window){};
}

void s3_windows_done(S3Windows *ws)
{
        if (!ws->w)
                return;
        pthread_mutex_lock(&ws->mutex);
        ws->stopping = true;
        pthread_cond_broadcast(&ws->wake);
        pthread_mutex_unlock(&ws->mutex);
        for (size_t i = 0; i < ws->nthreads; i++)
                pthread_join(ws->threads[i], NULL);
        for (size_t i = 0; i < ws->nqueued; i++)
                free(ws->queue[i].obj);
        for (size_t i = 0; i < ws->n; i++)
                drop(&ws->w[i]);
        free(ws->w);
        ws->w = NULL;
        pthread_cond_destroy(&ws->wake);
        pthread_cond_destroy(&ws->fetched);
        pthread_mutex_destroy(&ws->mutex);
}

static S3Window *find(S3Windows *ws, const char *name, uint64_t k)
{
        for (size_t i = 0; i < ws->n; i++)
                if (ws->w[i].state != S3_WIN_EMPTY && ws->w[i].k == k && strcmp(ws->w[i].obj, name) == 0)
                        return &ws->w[i];
        return NULL;
}

/* An empty slot, else the least recently used window held; NULL when all are being fetched. */
static S3Window *victim(S3Windows *ws)
{
        S3Window *v = NULL;
        for (size_t i = 0; i < ws->n; i++) {
                S3Window *w = &ws->w[i];
                if (w->state == S3_WIN_EMPTY)
                        return w;
                if (w->state == S3_WIN_READY && (!v || w->tick < v->tick))
                        v = w;
        }
        return v;
}

/* Window k into a slot, fetched by this thread (mutex held; released during the GET). The
 * slot, or NULL when there is no room or the GET failed (the caller reads by itself). */
static S3Window *fetch_locked(S3Windows *ws, const S3Object *o, uint64_t k)
{
        S3Window *w = victim(ws);
        if (!w)
                return NULL;
        uint64_t len = MIN((uint64_t)S3_WIN, o->size - k * S3_WIN);
        char *name = strdup(o->name);
        if (!name)
                return NULL;
        drop(w);
        *w = (S3Window){ .obj = name, .k = k, .state = S3_WIN_FETCHING, .tick = ++ws->tick };
        pthread_mutex_unlock(&ws->mutex);
        uint8_t *data = malloc(len);
        ssize_t n = data ? o->fetch(o->userdata, k * S3_WIN, len, data) : -ENOMEM;
        pthread_mutex_lock(&ws->mutex);
        if (n >= 0 && (uint64_t)n == len) {
                w->data = data;
                w->len = len;
                w->state = S3_WIN_READY;
        } else {
                free(data);
                drop(w);
        }
        pthread_cond_broadcast(&ws->fetched);
        return w->state == S3_WIN_READY ? w : NULL;
}

/* Window k held (waiting while it is fetched), fetched first when may_fetch; NULL otherwise. */
static S3Window *get_locked(S3Windows *ws, const S3Object *o, uint64_t k, bool may_fetch)
{
        for (;;) {
                S3Window *w = find(ws, o->name, k);
                if (w && w->state == S3_WIN_READY)
                        return w;
                if (w) {
                        pthread_cond_wait(&ws->fetched, &ws->mutex);
                        continue;
                }
                return may_fetch ? fetch_locked(ws, o, k) : NULL;
        }
}

/* Whether a read of [off, off+len) belongs to a stream: announced, or near the last read of this
 * reader that missed (which it then becomes). */
static bool streaming_locked(S3Stream *s, uint64_t off, size_t len)
{
        uint64_t last = s->miss_end;
        if (off + len <= s->stream_end)
                return true;
        s->miss_end = off + len;
        return last > 0 && off + S3_READ_AROUND >= last && off <= last + S3_READ_AROUND;
}

size_t s3_windows_read(S3Windows *ws, const S3Object *o, void *buf, size_t len, uint64_t off)
{
        size_t done = 0;
        BV_LOCK_GUARD(&ws->mutex);
        bool stream = streaming_locked(o->stream, off, len);
        while (done < len) {
                uint64_t at = off + done, k = at / S3_WIN;
                S3Window *w = get_locked(ws, o, k, stream);
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

static bool queued(const S3Windows *ws, const char *name, uint64_t k)
{
        for (size_t i = 0; i < ws->nqueued; i++)
                if (ws->queue[i].k == k && strcmp(ws->queue[i].obj, name) == 0)
                        return true;
        return false;
}

/* A prefetcher: fetches the windows announced, oldest first, until the windows are done. */
static void *prefetcher(void *userdata)
{
        S3Windows *ws = userdata;
        BV_LOCK_GUARD(&ws->mutex);
        for (;;) {
                while (!ws->stopping && ws->nqueued == 0)
                        pthread_cond_wait(&ws->wake, &ws->mutex);
                if (ws->stopping)
                        return NULL;
                S3Pending p = ws->queue[0];
                memmove(ws->queue, ws->queue + 1, --ws->nqueued * sizeof(*ws->queue));
                /* announced again meanwhile, or read by a reader itself: held or under way */
                if (!find(ws, p.obj, p.k)) {
                        S3Object o = { .name = p.obj, .size = p.size, .fetch = p.fetch, .userdata = p.userdata };
                        (void)fetch_locked(ws, &o, p.k);
                }
                free(p.obj);
        }
}

/* Window k of o to a prefetcher (mutex held): false when none can take it (the queue is full, or
 * no thread could be started). */
static bool prefetch_locked(S3Windows *ws, const S3Object *o, uint64_t k)
{
        if (ws->nthreads < ws->max_threads && ws->nthreads <= ws->nqueued &&
            pthread_create(&ws->threads[ws->nthreads], NULL, prefetcher, ws) == 0)
                ws->nthreads++;
        if (ws->nthreads == 0 || ws->nqueued == S3_QUEUED)
                return false;
        char *name = strdup(o->name);
        if (!name)
                return false;
        ws->queue[ws->nqueued++] = (S3Pending){ .obj = name, .k = k, .size = o->size, .fetch = o->fetch,
                                                .userdata = o->userdata };
        pthread_cond_signal(&ws->wake);
        return true;
}

void s3_windows_advise(S3Windows *ws, const S3Object *o, uint64_t off, uint64_t len)
{
        if (off >= o->size)
                return;
        uint64_t ahead = MAX((uint64_t)len, (uint64_t)S3_AHEAD), end = MIN(o->size, off + ahead);
        BV_LOCK_GUARD(&ws->mutex);
        o->stream->stream_end = MAX(o->stream->stream_end, end);
        for (uint64_t k = off / S3_WIN; k * S3_WIN < end; k++) {
                if (find(ws, o->name, k) || queued(ws, o->name, k))
                        continue;
                if (!prefetch_locked(ws, o, k)) {
                        (void)fetch_locked(ws, o, k); /* as before there were prefetchers */
                        return;
                }
        }
}

static bool fetching(const S3Windows *ws, const char *name)
{
        for (size_t i = 0; i < ws->n; i++)
                if (ws->w[i].state == S3_WIN_FETCHING && strcmp(ws->w[i].obj, name) == 0)
                        return true;
        return false;
}

void s3_windows_forget(S3Windows *ws, const char *name)
{
        BV_LOCK_GUARD(&ws->mutex);
        size_t kept = 0;
        for (size_t i = 0; i < ws->nqueued; i++) {
                if (strcmp(ws->queue[i].obj, name) == 0)
                        free(ws->queue[i].obj);
                else
                        ws->queue[kept++] = ws->queue[i];
        }
        ws->nqueued = kept;
        while (fetching(ws, name)) /* a prefetcher's GET uses the reader that closes */
                pthread_cond_wait(&ws->fetched, &ws->mutex);
        for (size_t i = 0; i < ws->n; i++)
                if (ws->w[i].state == S3_WIN_READY && strcmp(ws->w[i].obj, name) == 0)
                        drop(&ws->w[i]);
}
