/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Windows of objects read from S3 as streams (backend-s3.c's readers): an object is cut in
 * aligned pieces of S3_WIN bytes, each fetched whole by one ranged GET. One S3Windows holds the
 * windows of every object of a backend, at most its n slots (S3_WINDOWS for a backend: 128 MiB),
 * so that a restore whose reads go back and forth between packs (a snapshot that deduplicates
 * against older ones reads them out of storage order) finds a window it fetched still there
 * instead of fetching it again. A read inside a window held is a copy; inside one being fetched
 * it waits for it; inside none, while the object is read as a stream (the range announced by
 * s3_windows_advise, or reads that miss near one another: S3Stream, one per reader), the
 * reading thread fetches that window: threads reading one pack (restore's workers) then fetch
 * its windows in parallel, instead of one GET at a time. A window all of whose bytes were read
 * is dropped at once (a stream reads each byte once), else the least recently used one makes
 * room.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define S3_WIN (4u << 20)
#define S3_WINDOWS 32u
/* Windows announced by s3_windows_advise are fetched by these threads of the backend's own, while
 * the readers decode what they hold: a restore then has GETs in flight beyond its readers' (one
 * each). At most S3_QUEUED wait for one of them. */
#define S3_PREFETCHERS 4u
#define S3_QUEUED 16u
/* An announced stream is fetched at least this far ahead of the read that announced it. */
#define S3_AHEAD (4u * S3_WIN)

typedef enum { S3_WIN_EMPTY, S3_WIN_FETCHING, S3_WIN_READY } S3WinState;

typedef struct S3Window {
        uint8_t *data;
        char *obj;     /* which object (its key and ETag) */
        uint64_t k;    /* [k * S3_WIN, k * S3_WIN + len) of the object */
        uint64_t len;
        uint64_t used; /* bytes read from it */
        uint64_t tick; /* last use */
        S3WinState state;
} S3Window;

/* A window announced, waiting for a prefetcher: what fetch_locked needs of its object. */
typedef struct S3Pending {
        char *obj;
        uint64_t k, size;
        ssize_t (*fetch)(void *userdata, uint64_t off, size_t len, void *buf);
        void *userdata;
} S3Pending;

typedef struct S3Windows {
        pthread_mutex_t mutex;
        pthread_cond_t fetched;
        S3Window *w;
        size_t n;
        uint64_t tick;
        /* the prefetchers (started at the first advise) and what waits for them */
        pthread_cond_t wake;
        pthread_t threads[S3_PREFETCHERS];
        size_t nthreads, max_threads; /* S3_PREFETCHERS (0: the reader fetches, the tests') */
        bool stopping;
        S3Pending queue[S3_QUEUED];
        size_t nqueued;
} S3Windows;

/* What one reader of an object read so far (under the windows' mutex). */
typedef struct S3Stream {
        uint64_t stream_end; /* reads below this were announced */
        uint64_t miss_end;   /* where the last read that no window held ended (0: none yet) */
} S3Stream;

/* One object: its name among the windows (unique per backend: key and ETag), its size, the
 * reader's stream, and how to fetch [off, off+len) of it into buf (the bytes read, or a
 * negative errno). */
typedef ssize_t (*s3_fetch_fn)(void *userdata, uint64_t off, size_t len, void *buf);
typedef struct S3Object {
        const char *name;
        uint64_t size;
        S3Stream *stream;
        s3_fetch_fn fetch;
        void *userdata;
} S3Object;

/* n slots (0: S3_WINDOWS). -ENOMEM. */
int s3_windows_init(S3Windows *ws, size_t n);
void s3_windows_done(S3Windows *ws);
/* Copies what the windows hold (or, for a stream, fetch) of [off, off+len) of the object
 * (off + len <= size) into buf, from its start: how many bytes, the rest for the caller. */
size_t s3_windows_read(S3Windows *ws, const S3Object *o, void *buf, size_t len, uint64_t off);
/* [off, off+len) will be read as a stream: the windows of it that are neither held nor being
 * fetched are handed to the prefetchers (the first fetched now by the caller's thread when no
 * prefetcher can be started). o->userdata must stay valid until s3_windows_forget(o->name). */
void s3_windows_advise(S3Windows *ws, const S3Object *o, uint64_t off, uint64_t len);
/* The object's windows held are dropped and those announced forgotten, once no prefetcher fetches
 * one of them any more (its reader closes). */
void s3_windows_forget(S3Windows *ws, const char *name);
