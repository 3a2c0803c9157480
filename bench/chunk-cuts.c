/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Prints the data chunks a chunker cuts from a file, one "offset length" line each, with the
 * repository defaults (16K:64K:256K) or the sizes given, under a fixed key. Zero blocks and
 * holes are skipped as a backup skips them. For analysis (bench/compression-units.py), not
 * for timing.
 * Usage: chunk-cuts FILE [hybrid|cdc|fixed] [MIN:AVG:MAX in KiB]
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunker.h"

static int print_chunk(const BvExtent *e, void *userdata)
{
        if (e->kind == BV_EXTENT_DATA)
                printf("%llu %llu\n", (unsigned long long)e->offset, (unsigned long long)e->length);
        return 0;
}

int main(int argc, char **argv)
{
        BvChunkerParams p = { .kind = BV_CHUNKER_HYBRID, .min = BV_CHUNK_MIN_DEFAULT, .avg = BV_CHUNK_AVG_DEFAULT,
                              .max = BV_CHUNK_MAX_DEFAULT };
        static unsigned char buf[1u << 20];
        unsigned long long offset = 0;
        unsigned kmin, kavg, kmax;
        BvSplitter *s = NULL;
        ssize_t n;
        int fd, r;

        if (argc < 2 || argc > 4) {
                fprintf(stderr, "usage: chunk-cuts FILE [hybrid|cdc|fixed] [MIN:AVG:MAX in KiB]\n");
                return 2;
        }
        if (argc > 2 && bv_chunker_kind_from_name(argv[2], &p.kind) < 0) {
                fprintf(stderr, "unknown chunker '%s'\n", argv[2]);
                return 2;
        }
        if (argc > 3) {
                if (sscanf(argv[3], "%u:%u:%u", &kmin, &kavg, &kmax) != 3) {
                        fprintf(stderr, "sizes are MIN:AVG:MAX in KiB\n");
                        return 2;
                }
                p.min = kmin * 1024;
                p.avg = kavg * 1024;
                p.max = kmax * 1024;
        }
        for (unsigned i = 0; i < sizeof(p.key); i++)
                p.key[i] = (uint8_t)(i * 7);
        r = bv_chunker_params_check(&p);
        if (r < 0 || bv_splitter_new(&p, &s) < 0) {
                fprintf(stderr, "invalid chunker parameters\n");
                return 2;
        }
        fd = open(argv[1], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "cannot open '%s': %s\n", argv[1], strerror(errno));
                return 1;
        }
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
                if (bv_splitter_feed(s, offset, buf, (size_t)n, print_chunk, NULL) < 0)
                        return 1;
                offset += (unsigned long long)n;
        }
        if (n < 0 || bv_splitter_finish(s, print_chunk, NULL) < 0) {
                fprintf(stderr, "reading '%s' failed\n", argv[1]);
                return 1;
        }
        bv_splitter_free(s);
        close(fd);
        return 0;
}
