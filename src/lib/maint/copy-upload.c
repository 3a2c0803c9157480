/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Packs in flight to a remote DST (copy-internal.h, CopyUploads): each pack's bytes, read into
 * memory by the copy, are checked (a whole SRC pack's objects: the bytes about to be sent) and PUT
 * by a thread of their own while the copy reads the next ones. At most COPY_UPLOADS_MAX puts run at once and at most COPY_UPLOADS_BYTES of packs
 * wait in memory for theirs (one pack more is being read), so a copy of 32 MiB packs holds at most
 * 4 x 32 MiB + 32 MiB. A finished put is handed back to the copy's thread (copy_uploads_reap), which
 * alone touches DST's index: so a segment names only packs whose PUT returned.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "copy-internal.h"
#include "macro.h"

struct CopyUploads {
        BvBackend *b;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        CopyUpload *slot[COPY_UPLOADS_MAX]; /* in flight or done, not yet reaped */
        size_t n;
        uint64_t bytes;
        /* pack buffers of reaped puts, for the next packs (the copy's thread alone) */
        CopyBuf spare[COPY_UPLOADS_MAX + 1];
        size_t n_spare;
};

int copy_uploads_new(BvBackend *b, CopyUploads **ret)
{
        CopyUploads *q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->b = b;
        pthread_mutex_init(&q->lock, NULL);
        pthread_cond_init(&q->cond, NULL);
        *ret = q;
        return 0;
}

/* A pack's buffer serves pack after pack: a fresh 32 MiB malloc is a new mapping, and reading a
 * pack into it cost 8,192 page faults (memory cgroup charges, zeroing), more CPU than the read.
 * Sizes are rounded up to a MiB, so that packs of about the target size fit each other's. */
#define COPY_BUF_STEP ((size_t)1 << 20)
int copy_uploads_buf(CopyUploads *q, CopyUpload *u)
{
        size_t pick = SIZE_MAX; /* the smallest spare that holds the pack, else the largest */
        for (size_t i = 0; i < q->n_spare; i++) {
                bool fits = q->spare[i].cap >= u->size;
                if (pick == SIZE_MAX ||
                    (fits ? q->spare[pick].cap < u->size || q->spare[i].cap < q->spare[pick].cap
                          : q->spare[pick].cap < u->size && q->spare[i].cap > q->spare[pick].cap))
                        pick = i;
        }
        CopyBuf b = {};
        if (pick != SIZE_MAX) {
                b = q->spare[pick];
                q->spare[pick] = q->spare[--q->n_spare];
        }
        if (b.cap < u->size) { /* grown in place where it can be (mremap): its pages stay */
                size_t cap = DIV_ROUND_UP(MAX((size_t)u->size, (size_t)1), COPY_BUF_STEP) * COPY_BUF_STEP;
                void *p = realloc(b.p, cap);
                if (!p) {
                        free(b.p);
                        return -ENOMEM;
                }
                b = (CopyBuf){ .p = p, .cap = cap };
        }
        u->buf = b;
        u->data = b.p;
        return 0;
}

/* u's buffer kept for the next pack (the largest ones when the spares are full). */
static void buf_keep(CopyUploads *q, CopyUpload *u)
{
        if (!u->buf.p)
                return;
        if (q->n_spare == ELEMENTSOF(q->spare)) {
                size_t small = 0;
                for (size_t i = 1; i < q->n_spare; i++)
                        if (q->spare[i].cap < q->spare[small].cap)
                                small = i;
                if (q->spare[small].cap >= u->buf.cap)
                        return;
                free(q->spare[small].p);
                q->spare[small] = q->spare[--q->n_spare];
        }
        q->spare[q->n_spare++] = u->buf;
        u->buf = (CopyBuf){};
        u->data = NULL;
}

void copy_upload_free(CopyUpload *u)
{
        if (!u)
                return;
        free(u->e);
        free(u->data);
        free(u);
}

/* The check of a whole SRC pack, here: the decoding and hashing of the packs in flight spread
 * over their threads (a codec of its own: one is not shared between threads). */
static int check(CopyUpload *u)
{
        BvObjectCodec *codec;
        int r = bv_object_codec_new(u->check, 0, &codec);
        if (r < 0)
                return r;
        r = copy_check_pack_mem(codec, u->check, u->data, u->size, u->e, u->n, &u->bad_offset);
        u->bad = r == -EBADMSG;
        bv_object_codec_free(codec);
        return r;
}

static void *upload_thread(void *userdata)
{
        CopyUpload *u = userdata;
        CopyUploads *q = u->q;
        char name[64];
        bv_pack_path(u->id, name);
        int r = u->check ? check(u) : 0;
        if (r >= 0)
                r = bv_backend_put(q->b, BV_KIND_PACK, name, u->data, (size_t)u->size, BV_PUT_CREATE);
        BV_LOCK_GUARD(&q->lock);
        u->r = r;
        u->done = true;
        pthread_cond_broadcast(&q->cond);
        return NULL;
}

/* Waits for one put to end and takes it out of the slots (the caller joins and frees it). */
static CopyUpload *take_done(CopyUploads *q)
{
        BV_LOCK_GUARD(&q->lock);
        for (;;) {
                for (size_t i = 0; i < q->n; i++) {
                        CopyUpload *u = q->slot[i];
                        if (!u->done)
                                continue;
                        q->slot[i] = q->slot[--q->n];
                        q->bytes -= u->size;
                        return u;
                }
                pthread_cond_wait(&q->cond, &q->lock);
        }
}

int copy_uploads_reap(CopyUploads *q, copy_upload_done_fn done, void *userdata)
{
        CopyUpload *u = take_done(q);
        if (u->started)
                (void)pthread_join(u->thread, NULL);
        int r = done(userdata, u, u->r);
        buf_keep(q, u);
        copy_upload_free(u);
        return r;
}

int copy_uploads_drain(CopyUploads *q, copy_upload_done_fn done, void *userdata)
{
        int r = 0;
        while (q && q->n > 0) {
                int k = copy_uploads_reap(q, done, userdata);
                if (r >= 0)
                        r = k; /* every put is waited for, the first failure kept */
        }
        return r;
}

int copy_uploads_submit(CopyUploads *q, CopyUpload *u, copy_upload_done_fn done, void *userdata)
{
        int r = 0;
        while (r >= 0 && q->n > 0 && (q->n == COPY_UPLOADS_MAX || q->bytes + u->size > COPY_UPLOADS_BYTES))
                r = copy_uploads_reap(q, done, userdata);
        if (r < 0) {
                copy_upload_free(u);
                return r;
        }
        u->q = q;
        {
                BV_LOCK_GUARD(&q->lock);
                q->slot[q->n++] = u;
                q->bytes += u->size;
        }
        u->started = pthread_create(&u->thread, NULL, upload_thread, u) == 0;
        if (!u->started) /* no thread to be had: the put runs here */
                upload_thread(u);
        return 0;
}

size_t copy_uploads_pending(CopyUploads *q)
{
        BV_LOCK_GUARD(&q->lock);
        return q->n;
}

void copy_uploads_free(CopyUploads *q)
{
        if (!q)
                return;
        while (q->n > 0) { /* after a failure: the puts under way end (their packs are adopted later) */
                CopyUpload *u = take_done(q);
                if (u->started)
                        (void)pthread_join(u->thread, NULL);
                copy_upload_free(u);
        }
        for (size_t i = 0; i < q->n_spare; i++)
                free(q->spare[i].p);
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        free(q);
}
