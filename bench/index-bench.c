/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * index-bench: inserts N random ids the way a backup does (claim, add_pack per 512-object
 * pack, flush every batch), optionally compacts, reopens, then measures lookups of present
 * and absent ids and reports memory (peak RSS, anonymous vs file-backed) and bytes per chunk.
 * With -g LIVE, then the index side of a gc (docs/LIFECYCLE.md) with LIVE percent of the packs
 * in use: the mark (one bit per index position, set by a lookup of each live id), the walk that
 * counts live entries per pack, and the compaction that drops the other packs into a condemned
 * list; it reports each phase's time and the anonymous memory gc adds.
 *
 *   index-bench [-n ENTRIES] [-b BATCH] [-q LOOKUPS] [-c MAX_SEGMENTS] [-g LIVE] [-d DIR]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index.h"
#include "macro.h"
#include "timeutil.h"

#define PACK_OBJECTS 512 /* 32 MiB packs of 64 KiB chunks */

static uint64_t splitmix64(uint64_t *s)
{
        uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

/* Id number i of stream seed: uniformly random bytes, as keyed ids are. */
static void make_id(uint8_t id[BV_ID_SIZE], uint64_t seed, uint64_t i)
{
        uint64_t s = seed * 0x100000000ull + i * 4;

        for (int k = 0; k < 4; k++) {
                uint64_t v = splitmix64(&s);
                memcpy(id + 8 * k, &v, 8);
        }
}

static uint64_t status_kb(const char *field)
{
        char line[256];
        uint64_t v = 0;
        size_t n = strlen(field);
        FILE *f = fopen("/proc/self/status", "re");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, n) == 0 && line[n] == ':')
                        v = strtoull(line + n + 1, NULL, 10);
        fclose(f);
        return v;
}

static double secs_since(uint64_t t0)
{
        return (double)(bv_now_monotonic_ns() - t0) / 1e9;
}

static int insert_all(BvIndex *x, uint64_t n, uint64_t batch, uint64_t *ret_pending_rss_kb)
{
        BvPackEntry *e = calloc(PACK_OBJECTS, sizeof(*e));
        uint8_t pack[BV_PACK_ID_SIZE] = {};
        uint64_t packs = 0, base_kb = status_kb("RssAnon");
        size_t k = 0;
        int r;

        if (!e)
                return -ENOMEM;
        for (uint64_t i = 0; i < n; i++) {
                make_id(e[k].id, 1, i);
                r = bv_index_claim(x, e[k].id);
                if (r != 1) {
                        fprintf(stderr, "claim of new id %" PRIu64 " returned %d\n", i, r);
                        free(e);
                        return r < 0 ? r : -EEXIST;
                }
                e[k].type = 1;
                e[k].offset = (uint32_t)(k * 65536);
                e[k].length = 65536;
                e[k].raw_length = 65536;
                if (++k == PACK_OBJECTS || i + 1 == n) {
                        packs++;
                        memcpy(pack, &packs, sizeof(packs));
                        r = bv_index_add_pack(x, pack, e, k);
                        if (r < 0)
                                break;
                        k = 0;
                }
                if ((i + 1) % batch == 0 || i + 1 == n) {
                        if (*ret_pending_rss_kb == 0)
                                *ret_pending_rss_kb = status_kb("RssAnon") - base_kb;
                        r = bv_index_flush(x);
                        if (r < 0)
                                break;
                }
        }
        free(e);
        return r < 0 ? r : 0;
}

static int lookups(BvIndex *x, uint64_t seed, uint64_t n, uint64_t q, bool present, double *ret_rate)
{
        uint64_t s = 42, t0 = bv_now_monotonic_ns();
        uint8_t id[BV_ID_SIZE];
        BvLocation loc;

        for (uint64_t j = 0; j < q; j++) {
                int r;

                make_id(id, seed, splitmix64(&s) % n);
                r = bv_index_lookup(x, id, &loc);
                if (present ? r != 0 : r != -ENOENT) {
                        fprintf(stderr, "lookup returned %d\n", r);
                        return r < 0 ? r : -EEXIST;
                }
        }
        *ret_rate = (double)q / secs_since(t0);
        return 0;
}

/* ---- -g: the index side of gc ---- */

typedef struct GcBench {
        uint8_t *bits;
        struct { uint32_t live, total; uint8_t rest[32]; } *packs; /* gc keeps 40 B per pack */
        uint64_t npacks, seen, peak_kb, base_kb;
} GcBench;

static void gc_sample(GcBench *g)
{
        uint64_t kb = status_kb("RssAnon");
        g->peak_kb = MAX(g->peak_kb, kb > g->base_kb ? kb - g->base_kb : 0);
}

static int gc_count(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, uint64_t pos, bool winner, void *ud)
{
        GcBench *g = ud;
        uint64_t p = 0;
        memcpy(&p, loc->pack_id, sizeof(p));
        if (p == 0 || p > g->npacks)
                return -EBADMSG;
        g->packs[p - 1].total++;
        g->packs[p - 1].live += winner && (g->bits[pos >> 3] & (1u << (pos & 7)));
        if (++g->seen % 1000000 == 0)
                gc_sample(g);
        return 0;
}

static int pack_id_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static int gc_bench(BvIndex *x, int dfd, uint64_t n, unsigned live)
{
        GcBench g = { .base_kb = status_kb("RssAnon"), .npacks = (n + PACK_OBJECTS - 1) / PACK_OBJECTS };
        uint64_t npos = bv_index_positions(x), t0 = bv_now_monotonic_ns(), pos, ndead = 0, list_max = 0;
        uint8_t id[BV_ID_SIZE];
        char name[BV_INDEX_NAME_MAX];
        BvLocation loc;
        int r = 0;

        g.bits = calloc(npos / 8 + 1, 1);
        g.packs = calloc(g.npacks, sizeof(*g.packs));
        uint8_t(*dead)[BV_PACK_ID_SIZE] = calloc(g.npacks, BV_PACK_ID_SIZE);
        if (!g.bits || !g.packs || !dead)
                return -ENOMEM;
        for (uint64_t i = 0; i < n && r >= 0; i++) {
                if ((i / PACK_OBJECTS) % 100 >= live)
                        continue;
                make_id(id, 1, i);
                r = bv_index_lookup_position(x, id, &loc, &pos);
                if (r >= 0)
                        g.bits[pos >> 3] |= (uint8_t)(1u << (pos & 7));
        }
        gc_sample(&g);
        printf("gc mark: %" PRIu64 " positions, %.2f s\n", npos, secs_since(t0));
        t0 = bv_now_monotonic_ns();
        if (r >= 0)
                r = bv_index_walk(x, gc_count, &g);
        printf("gc walk: %.2f s\n", secs_since(t0));
        for (uint64_t p = 0; p < g.npacks; p++)
                if (g.packs[p].live == 0) {
                        uint64_t v = p + 1;
                        memcpy(dead[ndead++], &v, sizeof(v));
                        list_max += g.packs[p].total;
                }
        qsort(dead, ndead, BV_PACK_ID_SIZE, pack_id_cmp);
        t0 = bv_now_monotonic_ns();
        if (r >= 0 && (mkdirat(dfd, "gc", 0700) == 0 || errno == EEXIST)) {
                int gfd = openat(dfd, "gc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                r = gfd < 0 ? -errno : bv_index_compact_drop(x, (const uint8_t(*)[BV_PACK_ID_SIZE])dead, ndead,
                                                             list_max, gfd, 1, name);
                if (gfd >= 0)
                        close(gfd);
        }
        gc_sample(&g);
        printf("gc compact without %" PRIu64 " of %" PRIu64 " packs: %.2f s\n", ndead, g.npacks, secs_since(t0));
        printf("gc memory: %.1f MiB anonymous at peak above the open index (%.2f B/chunk); RssFile %.1f MiB\n",
               g.peak_kb / 1024.0, g.peak_kb * 1024.0 / (double)n, status_kb("RssFile") / 1024.0);
        free(g.bits);
        free(g.packs);
        free(dead);
        return r;
}

int main(int argc, char **argv)
{
        uint64_t n = 10000000, batch = 1000000, q = 2000000, pending_kb = 0, t0;
        int compact = -1, gc_live = -1, c, dfd, r;
        const char *dir = NULL;
        char tmpl[] = "/var/tmp/index-bench-XXXXXX";
        BvIndex *x = NULL;
        BvIndexStats st;
        double rate_present, rate_absent;

        while ((c = getopt(argc, argv, "n:b:q:c:g:d:")) >= 0) {
                switch (c) {
                case 'n': n = strtoull(optarg, NULL, 0); break;
                case 'b': batch = strtoull(optarg, NULL, 0); break;
                case 'q': q = strtoull(optarg, NULL, 0); break;
                case 'c': compact = atoi(optarg); break;
                case 'g': gc_live = atoi(optarg); break;
                case 'd': dir = optarg; break;
                default:
                        fprintf(stderr, "usage: %s [-n N] [-b BATCH] [-q LOOKUPS] [-c MAX_SEGMENTS] [-g LIVE] [-d DIR]\n",
                                argv[0]);
                        return 2;
                }
        }
        if (n == 0 || batch == 0) {
                fprintf(stderr, "error: -n and -b must be positive\n");
                return 2;
        }
        if (!dir && !(dir = mkdtemp(tmpl))) {
                perror("mkdtemp");
                return 1;
        }
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || (r = bv_index_open(dfd, &x)) < 0) {
                fprintf(stderr, "error: cannot open index in '%s'\n", dir);
                return 1;
        }

        t0 = bv_now_monotonic_ns();
        r = insert_all(x, n, batch, &pending_kb);
        if (r < 0) {
                fprintf(stderr, "error: insert: %s\n", strerror(-r));
                return 1;
        }
        printf("insert: %" PRIu64 " ids in %.2f s (%.0f/s, claim + add_pack + flush every %" PRIu64 ")\n", n,
               secs_since(t0), (double)n / secs_since(t0), batch);
        printf("pending table: %.1f MiB anonymous for %" PRIu64 " entries (%.0f B/entry)\n", pending_kb / 1024.0,
               MIN(batch, n), pending_kb * 1024.0 / (double)MIN(batch, n));
        if (compact >= 0) {
                t0 = bv_now_monotonic_ns();
                r = bv_index_compact(x, (unsigned)compact);
                if (r < 0) {
                        fprintf(stderr, "error: compact: %s\n", strerror(-r));
                        return 1;
                }
                printf("compact: %.2f s\n", secs_since(t0));
        }
        printf("after insert: VmHWM %.1f MiB, RssAnon %.1f MiB, RssFile %.1f MiB\n", status_kb("VmHWM") / 1024.0,
               status_kb("RssAnon") / 1024.0, status_kb("RssFile") / 1024.0);
        bv_index_free(x);

        /* A fresh handle, as a restore or an NBD export opens it. */
        t0 = bv_now_monotonic_ns();
        r = bv_index_open(dfd, &x);
        if (r < 0) {
                fprintf(stderr, "error: reopen: %s\n", strerror(-r));
                return 1;
        }
        printf("open: %.3f ms\n", secs_since(t0) * 1e3);
        if (lookups(x, 1, n, q, true, &rate_present) < 0 || lookups(x, 2, UINT64_MAX, q, false, &rate_absent) < 0)
                return 1;
        bv_index_stats(x, &st);
        printf("lookups: present %.0f/s, absent %.0f/s (%" PRIu64 " each, %" PRIu64 " segments)\n", rate_present,
               rate_absent, q, st.segments);
        printf("on disk: %" PRIu64 " entries, %.1f MiB (%.1f B/chunk), filters %.1f MiB (%.2f B/chunk)\n",
               st.entries, st.bytes / 1048576.0, (double)st.bytes / (double)st.entries, st.filter_bytes / 1048576.0,
               (double)st.filter_bytes / (double)st.entries);
        printf("end: VmHWM %.1f MiB, RssAnon %.1f MiB, RssFile %.1f MiB\n", status_kb("VmHWM") / 1024.0,
               status_kb("RssAnon") / 1024.0, status_kb("RssFile") / 1024.0);
        if (gc_live >= 0 && (r = gc_bench(x, dfd, n, (unsigned)gc_live)) < 0) {
                fprintf(stderr, "error: gc: %s\n", strerror(-r));
                return 1;
        }
        bv_index_free(x);
        close(dfd);
        if (dir == tmpl) {
                char cmd[64];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
                if (system(cmd) != 0)
                        fprintf(stderr, "could not remove %s, ignoring\n", tmpl);
        }
        return 0;
}
