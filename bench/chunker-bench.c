/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Chunk layer speed on cached data: the zero check, zero check + block print, and the three
 * splitters on random data, plus the mean chunk size over the whole buffer.
 * Usage: chunker-bench [MiB]   (default 256)
 *
 * Every figure is timed in short bursts (1 MiB or less) and reported as the median and the
 * best burst, so that other processes on a shared machine disturb it less than a total.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockscan.h"
#include "chunker.h"

#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* Sorts n burst times of `bytes` each and prints the median and best rates. */
static void report(const char *what, double *t, size_t n, size_t bytes)
{
        qsort(t, n, sizeof(double), cmp_double);
        printf("%-34s median %6.2f GB/s, best %6.2f GB/s\n", what, (double)bytes / t[n / 2] / 1e9,
               (double)bytes / t[0] / 1e9);
}

static void fill(uint8_t *b, size_t len, uint64_t x)
{
        for (size_t i = 0; i + 8 <= len; i += 8) {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                uint64_t w = x * 0x2545F4914F6CDD1Dull;
                memcpy(b + i, &w, 8);
        }
}

typedef struct Count {
        uint64_t chunks, bytes;
} Count;

static int count_cb(const BvExtent *e, void *userdata)
{
        Count *c = userdata;
        c->chunks += e->kind == BV_EXTENT_DATA;
        c->bytes += e->length;
        return 0;
}

static void bench_splitter(BvChunkerKind kind, const uint8_t *buf, size_t len, int rounds)
{
        BvChunkerParams p = { .kind = kind, .min = BV_CHUNK_MIN_DEFAULT, .avg = BV_CHUNK_AVG_DEFAULT,
                              .max = BV_CHUNK_MAX_DEFAULT };
        size_t n = len >> 20, k = 0;
        double *times = calloc(n * (size_t)rounds, sizeof(double));
        Count c = { 0 };
        char what[64];

        for (unsigned i = 0; i < 32; i++)
                p.key[i] = (uint8_t)(i * 7);
        for (int r = 0; r < rounds; r++) {
                BvSplitter *s = NULL;
                if (bv_splitter_new(&p, &s) < 0)
                        exit(1);
                c = (Count){ 0 };
                for (size_t off = 0; off < len; off += 1u << 20) {
                        double t = now();
                        if (bv_splitter_feed(s, off, buf + off, 1u << 20, count_cb, &c) < 0)
                                exit(1);
                        times[k++] = now() - t;
                }
                if (bv_splitter_finish(s, count_cb, &c) < 0)
                        exit(1);
                bv_splitter_free(s);
        }
        snprintf(what, sizeof(what), "splitter %s (1 MiB feeds)", bv_chunker_kind_name(kind));
        report(what, times, k, 1u << 20);
        printf("%-34s mean chunk %.1f KiB over %zu MiB\n", "", (double)c.bytes / (double)c.chunks / 1024,
               len >> 20);
        free(times);
}

int main(int argc, char **argv)
{
        size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 256;
        size_t len = mib << 20;
        uint8_t *buf = malloc(len), key[32] = { 1, 2, 3 };
        uint8_t *zeros = calloc(1, 1u << 20);
        const size_t burst = 256u << 10; /* stays in L2 */
        double times[2000];
        volatile uint64_t sink = 0;

        if (!buf || !zeros || len < (1u << 20))
                return 1;
        fill(buf, len, 0x1234567);

        for (size_t r = 0; r < ELEMENTS(times); r++) {
                double t = now();
                for (size_t off = 0; off < burst; off += BV_BLOCK_SIZE)
                        sink += bv_is_zero(zeros + off, BV_BLOCK_SIZE);
                times[r] = now() - t;
        }
        report("is_zero (zero blocks)", times, ELEMENTS(times), burst);

        for (size_t r = 0; r < ELEMENTS(times); r++) {
                double t = now();
                for (size_t off = 0; off < burst; off += BV_BLOCK_SIZE)
                        if (!bv_is_zero(buf + off, BV_BLOCK_SIZE))
                                sink += bv_block_print(key, buf + off);
                times[r] = now() - t;
        }
        report("is_zero + print (random blocks)", times, ELEMENTS(times), burst);

        bench_splitter(BV_CHUNKER_HYBRID, buf, len, 3);
        bench_splitter(BV_CHUNKER_CDC, buf, len, 2);
        bench_splitter(BV_CHUNKER_FIXED, buf, len, 3);
        (void)sink;
        free(buf);
        free(zeros);
        return 0;
}
