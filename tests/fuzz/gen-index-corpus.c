/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writes the seed corpus of fuzz-index-segment (tests/fuzz/corpus/index-segment/), which
 * test-index also reads as golden files. Not part of the build; run from the source root:
 *
 *   cc -D_GNU_SOURCE -Isrc/lib/util -Isrc/lib/codec -Isrc/lib/chunk -Isrc/lib/source \
 *      -Isrc/lib/store -Itests/unit tests/fuzz/gen-index-corpus.c -o /tmp/gen-index-corpus \
 *      build-index-rel/src/lib/store/libbv-store.a build-index-rel/src/lib/codec/libbv-codec.a \
 *      build-index-rel/src/lib/util/libbv-util.a -lcrypto -lzstd -lpthread
 *   /tmp/gen-index-corpus tests/fuzz/corpus/index-segment
 *
 * Seeds: seed-1, seed-3, seed-100 (ids as test-index's make_id(0..n-1), all in pack
 * make_pack(1), offset 7*i, length i%1000+1, type 1) and seed-3-packs (three packs).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "bvtest.h"
#include "fileio.h"
#include "index.h"
#include "macro.h"

static void make_id(uint8_t id[BV_ID_SIZE], uint64_t n)
{
        bvtest_fill_random(id, BV_ID_SIZE, n * 0x9e3779b97f4a7c15ull + 1);
}

static void make_pack(uint8_t pack[BV_PACK_ID_SIZE], uint64_t n)
{
        bvtest_fill_random(pack, BV_PACK_ID_SIZE, n + 0x5151);
}

/* Writes ids [0, n) spread over npacks packs into a fresh index and copies the segment out. */
static int write_seed(int outfd, const char *name, size_t n, unsigned npacks)
{
        char *dir = bvtest_tmpdir(), seg[32] = "";
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        BvIndex *x = NULL;
        struct dirent *de;
        void *data;
        size_t len;
        DIR *d;

        if (dfd < 0 || bv_index_open(dfd, &x) < 0)
                return -1;
        for (unsigned p = 0; p < npacks; p++) {
                BvPackEntry e[128] = {};
                uint8_t pid[BV_PACK_ID_SIZE];
                size_t k = 0;

                for (size_t i = p; i < n; i += npacks, k++) {
                        make_id(e[k].id, i);
                        e[k].type = 1;
                        e[k].offset = (uint32_t)i * 7;
                        e[k].length = (uint32_t)i % 1000 + 1;
                }
                make_pack(pid, p + 1);
                if (bv_index_add_pack(x, pid, e, k) < 0)
                        return -1;
        }
        if (bv_index_flush(x) < 0)
                return -1;
        bv_index_free(x);

        d = fdopendir(dup(dfd));
        while (d && (de = readdir(d)))
                if (strlen(de->d_name) == 20)
                        snprintf(seg, sizeof(seg), "%s", de->d_name);
        if (d)
                closedir(d);
        if (!seg[0] || bv_read_file(dfd, seg, 1 << 20, &data, &len) < 0)
                return -1;
        (void)unlinkat(outfd, name, 0);
        if (bv_write_file_durable(outfd, name, data, len, false) < 0)
                return -1;
        free(data);
        close(dfd);
        bvtest_rm_rf(dir);
        free(dir);
        return 0;
}

int main(int argc, char **argv)
{
        int outfd;

        if (argc != 2) {
                fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
                return 2;
        }
        outfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (outfd < 0 || write_seed(outfd, "seed-1", 1, 1) < 0 || write_seed(outfd, "seed-3", 3, 1) < 0 ||
            write_seed(outfd, "seed-100", 100, 1) < 0 || write_seed(outfd, "seed-3-packs", 40, 3) < 0) {
                fprintf(stderr, "failed\n");
                return 1;
        }
        return 0;
}
