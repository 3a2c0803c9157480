/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The windows of an object read from S3 as a stream (s3-window.h), over an object in memory that
 * counts the ranged fetches made of it: reads are exact across window edges and at the short
 * last window; a lone read fetches no window; a stream fetches each aligned window once (not a
 * GET per read), announced or found by reads near one another; threads reading one object fetch
 * its windows in parallel; a failed fetch leaves the read to the caller. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bvtest.h"
#include "s3-window.h"

typedef struct Obj {
        uint8_t *data;
        uint64_t size;
        unsigned fetches;
        unsigned in_flight, most_in_flight;
        bool fail;
        pthread_mutex_t mutex;
} Obj;

static ssize_t obj_fetch(void *userdata, uint64_t off, size_t len, void *buf)
{
        Obj *o = userdata;
        pthread_mutex_lock(&o->mutex);
        o->fetches++;
        o->in_flight++;
        if (o->in_flight > o->most_in_flight)
                o->most_in_flight = o->in_flight;
        bool fail = o->fail;
        pthread_mutex_unlock(&o->mutex);
        usleep(20000); /* a GET's latency: fetches of several threads overlap */
        if (!fail)
                memcpy(buf, o->data + off, len);
        pthread_mutex_lock(&o->mutex);
        o->in_flight--;
        pthread_mutex_unlock(&o->mutex);
        return fail ? -EIO : (ssize_t)len;
}

static void obj_init(Obj *o, uint64_t size)
{
        *o = (Obj){ .size = size, .data = malloc(size) };
        ASSERT_TRUE(o->data != NULL);
        bvtest_fill_random(o->data, size, size);
        pthread_mutex_init(&o->mutex, NULL);
}

static void obj_done(Obj *o)
{
        pthread_mutex_destroy(&o->mutex);
        free(o->data);
}

/* What a reader does: the windows, then a fetch of the rest. */
static void read_at(S3Windows *ws, Obj *o, uint8_t *buf, size_t len, uint64_t off)
{
        size_t done = s3_windows_read(ws, o->size, buf, len, off, obj_fetch, o);
        if (done < len)
                ASSERT_EQ(obj_fetch(o, off + done, len - done, buf + done), (ssize_t)(len - done));
        ASSERT_MEMEQ(buf, o->data + off, len);
}

TEST(lone_read_fetches_no_window)
{
        Obj o;
        S3Windows ws;
        uint8_t buf[4096];
        obj_init(&o, 3 * S3_WIN);
        s3_windows_init(&ws);
        read_at(&ws, &o, buf, sizeof(buf), S3_WIN + 100);
        ASSERT_EQ(o.fetches, 1u); /* the read's own bytes */
        read_at(&ws, &o, buf, sizeof(buf), 2 * S3_WIN + 3 * S3_WIN / 4); /* far from it */
        ASSERT_EQ(o.fetches, 2u);
        s3_windows_done(&ws);
        obj_done(&o);
}

TEST(stream_fetches_each_window_once)
{
        Obj o;
        S3Windows ws;
        uint64_t size = 3 * S3_WIN + 12345; /* a short last window */
        static uint8_t buf[300000];
        obj_init(&o, size);
        s3_windows_init(&ws);
        s3_windows_advise(&ws, size, 0, size, obj_fetch, &o);
        ASSERT_EQ(o.fetches, 1u);
        for (uint64_t off = 0; off < size;) {
                size_t len = (size_t)(size - off < sizeof(buf) ? size - off : sizeof(buf)); /* crosses edges */
                read_at(&ws, &o, buf, len, off);
                off += len;
        }
        ASSERT_EQ(o.fetches, 4u);
        s3_windows_done(&ws);
        obj_done(&o);
}

TEST(reads_near_one_another_make_a_stream)
{
        Obj o;
        S3Windows ws;
        static uint8_t buf[100000];
        obj_init(&o, 2 * S3_WIN);
        s3_windows_init(&ws);
        read_at(&ws, &o, buf, sizeof(buf), 0); /* a miss: its own GET */
        for (uint64_t off = sizeof(buf); off + sizeof(buf) <= 2 * S3_WIN; off += sizeof(buf))
                read_at(&ws, &o, buf, sizeof(buf), off);
        ASSERT_TRUE(o.fetches <= 3u); /* the first read, then the two windows */
        s3_windows_done(&ws);
        obj_done(&o);
}

typedef struct Worker {
        S3Windows *ws;
        Obj *o;
        unsigned index, n;
} Worker;

static void *worker(void *userdata)
{
        Worker *w = userdata;
        static __thread uint8_t buf[1 << 20];
        /* window index, index + n...: in pieces, as a restore worker reads its jobs */
        for (uint64_t k = w->index; (k + 1) * S3_WIN <= w->o->size; k += w->n)
                for (uint64_t off = k * S3_WIN; off < (k + 1) * S3_WIN; off += sizeof(buf))
                        read_at(w->ws, w->o, buf, sizeof(buf), off);
        return NULL;
}

TEST(threads_fetch_windows_in_parallel)
{
        enum { N = 4 };
        Obj o;
        S3Windows ws;
        pthread_t t[N];
        Worker w[N];
        obj_init(&o, 8 * S3_WIN);
        s3_windows_init(&ws);
        s3_windows_advise(&ws, o.size, 0, o.size, obj_fetch, &o);
        for (unsigned i = 0; i < N; i++) {
                w[i] = (Worker){ .ws = &ws, .o = &o, .index = i, .n = N };
                ASSERT_EQ(pthread_create(&t[i], NULL, worker, &w[i]), 0);
        }
        for (unsigned i = 0; i < N; i++)
                pthread_join(t[i], NULL);
        ASSERT_TRUE(o.most_in_flight >= 2u);
        ASSERT_EQ(o.fetches, 8u); /* each window once */
        s3_windows_done(&ws);
        obj_done(&o);
}

TEST(failed_fetch_leaves_the_read)
{
        Obj o;
        S3Windows ws;
        uint8_t buf[4096];
        obj_init(&o, 2 * S3_WIN);
        s3_windows_init(&ws);
        o.fail = true;
        s3_windows_advise(&ws, o.size, 0, o.size, obj_fetch, &o);
        ASSERT_EQ(s3_windows_read(&ws, o.size, buf, sizeof(buf), 0, obj_fetch, &o), 0u);
        o.fail = false;
        read_at(&ws, &o, buf, sizeof(buf), 0);
        s3_windows_done(&ws);
        obj_done(&o);
}

int main(void)
{
        RUN(lone_read_fetches_no_window);
        RUN(stream_fetches_each_window_once);
        RUN(reads_near_one_another_make_a_stream);
        RUN(threads_fetch_windows_in_parallel);
        RUN(failed_fetch_leaves_the_read);
        return 0;
}
