/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Windows of an object read from S3 as a stream (backend-s3.c's readers): the object is cut in
 * aligned pieces of S3_WIN bytes, each fetched whole by one ranged GET, at most S3_WINDOWS of
 * them held per object. A read inside a window held is a copy; inside one being fetched it
 * waits for it; inside none, while the object is read as a stream (the range announced by
 * s3_windows_advise, or reads that miss near one another), the reading thread fetches that
 * window: threads reading one pack (restore's workers) then fetch its windows in parallel,
 * instead of one GET at a time. A window all of whose bytes were read is dropped at once (a
 * stream reads each byte once), else the least recently used one makes room.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define S3_WIN (4u << 20)
#define S3_WINDOWS 4u

typedef enum { S3_WIN_EMPTY, S3_WIN_FETCHING, S3_WIN_READY } S3WinState;

typedef struct S3Window {
        uint8_t *data;
        uint64_t k;    /* [k * S3_WIN, k * S3_WIN + len) of the object */
        uint64_t len;
        uint64_t used; /* bytes read from it */
        uint64_t tick; /* last use */
        S3WinState state;
} S3Window;

typedef struct S3Windows {
        pthread_mutex_t mutex;
        pthread_cond_t fetched;
        S3Window w[S3_WINDOWS];
        uint64_t tick;
        uint64_t stream_end; /* reads below this were announced */
        uint64_t miss_end;   /* where the last read that no window held ended (0: none yet) */
} S3Windows;

/* Fetches [off, off+len) of the object into buf: the bytes read, or a negative errno. */
typedef ssize_t (*s3_fetch_fn)(void *userdata, uint64_t off, size_t len, void *buf);

void s3_windows_init(S3Windows *ws);
void s3_windows_done(S3Windows *ws);
/* Copies what the windows hold (or, for a stream, fetch) of [off, off+len) of an object of size
 * bytes (off + len <= size) into buf, from its start: how many bytes, the rest for the caller. */
size_t s3_windows_read(S3Windows *ws, uint64_t size, void *buf, size_t len, uint64_t off, s3_fetch_fn fetch,
                       void *userdata);
/* [off, off+len) will be read as a stream: the first window of it that is neither held nor being
 * fetched is fetched now, by the caller's thread. */
void s3_windows_advise(S3Windows *ws, uint64_t size, uint64_t off, uint64_t len, s3_fetch_fn fetch, void *userdata);
