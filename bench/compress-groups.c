/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * compress-groups IMAGE...: what compression earns and costs, group by group, on real images.
 * The data regions of each image (SEEK_DATA) are cut into groups as a backup makes them: 256 KiB
 * of non-zero 4 KiB blocks (all-zero blocks are never stored). For each group one CSV row: its
 * raw length, the compressed length and the thread CPU time (ns) of zstd at levels -1, 1, 2 and
 * 3, then the cheap estimates an automatic choice could use and what each cost: the order-0
 * entropy (bits per byte) of a sample of 4 x 4 KiB spread over the group, and the compressed
 * length of that sample at level 1. bench/compress-policy.py simulates choices from the rows.
 */
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define BLOCK 4096u
#define GROUP (256u * 1024)
#define SAMPLE_PIECES 4u
#define READ_SIZE (4u << 20)

/* Settings to measure: a level, or a level with parameters over it (COMPRESS_GROUPS_SETTINGS,
 * e.g. "3 2 2/h15 1/h16/c16": h hashLog, c chainLog, m minMatch, w windowLog, s strategy). */
#define MAX_SETTINGS 16
static const char *settings[MAX_SETTINGS] = { "-1", "1", "2", "3" };
static size_t N_LEVELS = 4;

static uint64_t cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool block_zero(const uint8_t *p)
{
        static const uint8_t zero[BLOCK];
        return memcmp(p, zero, BLOCK) == 0;
}

static double entropy(const uint8_t *p, size_t len)
{
        uint32_t h[256] = { 0 };
        double e = 0;

        for (size_t i = 0; i < len; i++)
                h[p[i]]++;
        for (unsigned i = 0; i < 256; i++)
                if (h[i]) {
                        double q = (double)h[i] / (double)len;
                        e -= q * log2(q);
                }
        return e;
}

typedef struct Ctx {
        ZSTD_CCtx *cctx[MAX_SETTINGS];
        ZSTD_CCtx *sample_cctx;
        uint8_t *out;
        size_t out_cap;
} Ctx;

static void group_row(Ctx *c, const char *image, uint8_t *g, size_t len)
{
        uint8_t sample[SAMPLE_PIECES * BLOCK];
        size_t slen = 0, n;
        uint64_t t;

        /* a group's trailer follows its members: 4 bytes per member and the count (64 KiB chunks) */
        size_t trailer = getenv("COMPRESS_GROUPS_NO_TRAILER") ? 0 : 4 * (len / 65536) + 4;
        memset((uint8_t *)g + len, 0, trailer);
        len += trailer;
        printf("%s,%zu", image, len);
        for (size_t i = 0; i < N_LEVELS; i++) {
                t = cpu_ns();
                n = ZSTD_compress2(c->cctx[i], c->out, c->out_cap, g, len);
                t = cpu_ns() - t;
                if (ZSTD_isError(n))
                        exit(2);
                printf(",%zu,%llu", n, (unsigned long long)t);
        }
        /* SAMPLE_PIECES blocks spread evenly over the group */
        t = cpu_ns();
        for (size_t k = 0; k < SAMPLE_PIECES && len >= BLOCK; k++) {
                size_t at = (len / BLOCK - 1) * k / (SAMPLE_PIECES - 1) * BLOCK;
                memcpy(sample + slen, g + at, BLOCK);
                slen += BLOCK;
        }
        double e = entropy(sample, slen);
        uint64_t te = cpu_ns() - t;
        t = cpu_ns();
        n = ZSTD_compress2(c->sample_cctx, c->out, c->out_cap, sample, slen);
        uint64_t ts = cpu_ns() - t;
        printf(",%.4f,%llu,%zu,%zu,%llu\n", e, (unsigned long long)te, slen, n, (unsigned long long)ts);
}

static int image_groups(Ctx *c, const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint8_t *buf = malloc(READ_SIZE), *g = malloc(GROUP + 4096);
        size_t glen = 0;
        off_t pos = 0, end;

        if (fd < 0 || !buf || !g)
                return -1;
        end = lseek(fd, 0, SEEK_END);
        while (pos < end) {
                off_t data = lseek(fd, pos, SEEK_DATA), hole;
                if (data < 0)
                        break;
                hole = lseek(fd, data, SEEK_HOLE);
                for (pos = data; pos < hole;) {
                        ssize_t r = pread(fd, buf, READ_SIZE, pos);
                        if (r <= 0)
                                return -1;
                        if (pos + r > hole)
                                r = hole - pos;
                        for (size_t i = 0; i + BLOCK <= (size_t)r; i += BLOCK) {
                                if (block_zero(buf + i))
                                        continue;
                                memcpy(g + glen, buf + i, BLOCK);
                                glen += BLOCK;
                                if (glen == GROUP) {
                                        group_row(c, path, g, glen);
                                        glen = 0;
                                }
                        }
                        pos += r;
                }
        }
        if (glen)
                group_row(c, path, g, glen);
        free(buf);
        free(g);
        close(fd);
        return 0;
}

int main(int argc, char **argv)
{
        Ctx c = { .out_cap = ZSTD_compressBound(GROUP) };

        c.out = malloc(c.out_cap);
        char *env = getenv("COMPRESS_GROUPS_SETTINGS");
        if (env) {
                N_LEVELS = 0;
                for (char *tok = strtok(strdup(env), " "); tok && N_LEVELS < MAX_SETTINGS; tok = strtok(NULL, " "))
                        settings[N_LEVELS++] = tok;
        }
        for (size_t i = 0; i < N_LEVELS; i++) {
                char *spec = strdup(settings[i]), *part = strchr(spec, '/');
                c.cctx[i] = ZSTD_createCCtx();
                ZSTD_CCtx_setParameter(c.cctx[i], ZSTD_c_compressionLevel, atoi(spec));
                ZSTD_CCtx_setParameter(c.cctx[i], ZSTD_c_contentSizeFlag, 1);
                while (part) {
                        static const struct { char k; ZSTD_cParameter p; } map[] = {
                                { 'h', ZSTD_c_hashLog }, { 'c', ZSTD_c_chainLog }, { 'm', ZSTD_c_minMatch },
                                { 'w', ZSTD_c_windowLog }, { 's', ZSTD_c_strategy }, { 'l', ZSTD_c_searchLog },
                        };
                        part++;
                        for (size_t k = 0; k < sizeof(map) / sizeof(map[0]); k++)
                                if (map[k].k == part[0])
                                        ZSTD_CCtx_setParameter(c.cctx[i], map[k].p, atoi(part + 1));
                        part = strchr(part, '/');
                }
        }
        c.sample_cctx = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(c.sample_cctx, ZSTD_c_compressionLevel, 1);
        printf("image,raw");
        for (size_t i = 0; i < N_LEVELS; i++)
                printf(",z%s,t%s", settings[i], settings[i]);
        printf(",entropy,t_entropy,sample,sample_z1,t_sample\n");
        for (int i = 1; i < argc; i++)
                if (image_groups(&c, argv[i]) < 0) {
                        fprintf(stderr, "compress-groups: cannot read %s\n", argv[i]);
                        return 1;
                }
        return 0;
}
