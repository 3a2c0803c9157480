/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The windows of an object read from S3 as a stream (s3-window.h), over an object in memory that
 * counts the ranged fetches made of it: reads are exact across window edges and at the short
 * last window; a lone read fetches no window; a stream fetches each aligned window once (not a
 * GET per read), announced or found by reads near one another; threads reading one object fetch
 * its windows in parallel; a failed fetch leaves the read to the caller; the windows are shared
 * by all objects, so reads that go back and forth between objects fetch each window once (as
 * many as the slots hold); a closed reader's windows go. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bvtest.h"
#include "s3-window.h"

typedef struct Obj {
        char name[16];
        S3Stream stream;
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

static unsigned n_objs;

static void obj_init(Obj *o, uint64_t size)
{
        *o = (Obj){ .size = size, .data = malloc(size) };
        snprintf(o->name, sizeof(o->name), "obj-%u", n_objs++);
        ASSERT_TRUE(o->data != NULL);
        bvtest_fill_random(o->data, size, size);
        pthread_mutex_init(&o->mutex, NULL);
}

static void obj_done(Obj *o)
{
        pthread_mutex_destroy(&o->mutex);
        free(o->data);
}

#define OBJ(o) (&(S3Object){ .name = (o)->name, .size = (o)->size, .stream = &(o)->stream, .fetch = obj_fetch, .userdata = (o) })

/* What a reader does: the windows, then a fetch of the rest. */
static void read_at(S3Windows *ws, Obj *o, uint8_t *buf, size_t len, uint64_t off)
{
        size_t done = s3_windows_read(ws, OBJ(o), buf, len, off);
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
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
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
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
        s3_windows_advise(&ws, OBJ(&o), 0, size);
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
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
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
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
        s3_windows_advise(&ws, OBJ(&o), 0, o.size);
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
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
        o.fail = true;
        s3_windows_advise(&ws, OBJ(&o), 0, o.size);
        ASSERT_EQ(s3_windows_read(&ws, OBJ(&o), buf, sizeof(buf), 0), 0u);
        o.fail = false;
        read_at(&ws, &o, buf, sizeof(buf), 0);
        s3_windows_done(&ws);
        obj_done(&o);
}

/* The first halves of k windows of a and b in turn, then their second halves. */
static void back_and_forth(S3Windows *ws, Obj *a, Obj *b, uint64_t k_max)
{
        static uint8_t buf[S3_WIN / 2];
        s3_windows_advise(ws, OBJ(a), 0, a->size);
        s3_windows_advise(ws, OBJ(b), 0, b->size);
        for (unsigned half = 0; half < 2; half++)
                for (uint64_t k = 0; k < k_max; k++) {
                        read_at(ws, a, buf, sizeof(buf), k * S3_WIN + half * sizeof(buf));
                        read_at(ws, b, buf, sizeof(buf), k * S3_WIN + half * sizeof(buf));
                }
}

/* A restore of a snapshot that deduplicates against older ones reads its packs out of storage
 * order, going back to windows it read part of: the windows are shared by every object of the
 * backend, so each is still held when the reads come back (4 per object before: 12 fetches here
 * instead of 6 per object), until the slots run out (then least recently used goes). */
TEST(streams_going_back_and_forth_fetch_each_window_once)
{
        enum { K = 6 };
        Obj a, b;
        S3Windows ws;
        obj_init(&a, K * S3_WIN);
        obj_init(&b, K * S3_WIN);
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
        back_and_forth(&ws, &a, &b, K);
        ASSERT_EQ(a.fetches, (unsigned)K);
        ASSERT_EQ(b.fetches, (unsigned)K);
        s3_windows_done(&ws);

        /* two slots: the same reads fetch again what was pushed out, and never hold more */
        a.fetches = b.fetches = 0;
        a.stream = b.stream = (S3Stream){};
        ASSERT_EQ(s3_windows_init(&ws, 2), 0);
        ws.max_threads = 0;
        back_and_forth(&ws, &a, &b, K);
        ASSERT_EQ(a.fetches + b.fetches, 4u * K);
        s3_windows_done(&ws);
        obj_done(&a);
        obj_done(&b);
}

/* A reader that closes takes its windows with it; another object's stay. */
TEST(forget_drops_one_object)
{
        Obj a, b;
        S3Windows ws;
        static uint8_t buf[4096];
        obj_init(&a, 2 * S3_WIN);
        obj_init(&b, 2 * S3_WIN);
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        ws.max_threads = 0;
        s3_windows_advise(&ws, OBJ(&a), 0, a.size);
        s3_windows_advise(&ws, OBJ(&b), 0, b.size);
        ASSERT_EQ(a.fetches + b.fetches, 2u);
        s3_windows_forget(&ws, a.name);
        read_at(&ws, &a, buf, sizeof(buf), 100);
        read_at(&ws, &b, buf, sizeof(buf), 100);
        ASSERT_EQ(a.fetches, 2u); /* window 0 again */
        ASSERT_EQ(b.fetches, 1u);
        s3_windows_done(&ws);
        obj_done(&a);
        obj_done(&b);
}

/* With prefetchers (as the backend has them): the windows announced are fetched by them, several
 * at once, each once; a reader that closes while one is fetched waits for it. */
TEST(prefetchers_fetch_announced_windows_in_parallel)
{
        Obj o;
        S3Windows ws;
        static uint8_t buf[S3_WIN / 2];
        obj_init(&o, 8 * S3_WIN);
        ASSERT_EQ(s3_windows_init(&ws, 0), 0);
        s3_windows_advise(&ws, OBJ(&o), 0, o.size);
        for (uint64_t off = 0; off < o.size; off += sizeof(buf))
                read_at(&ws, &o, buf, sizeof(buf), off);
        ASSERT_EQ(o.fetches, 8u); /* each window once, by a prefetcher or the reader */
        ASSERT_TRUE(o.most_in_flight >= 2u);
        o.stream = (S3Stream){};
        s3_windows_forget(&ws, o.name);
        s3_windows_advise(&ws, OBJ(&o), 0, o.size);
        s3_windows_forget(&ws, o.name); /* while they fetch: waits, then nothing of o is left */
        unsigned after = o.fetches;
        usleep(100000);
        ASSERT_EQ(o.fetches, after);
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
        RUN(streams_going_back_and_forth_fetch_each_window_once);
        RUN(forget_drops_one_object);
        RUN(prefetchers_fetch_announced_windows_in_parallel);
        return 0;
}
