/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzz target for index segment files (docs/FORMAT.md, "Index"): the input becomes the only
 * segment of an index directory, with its header checksum and body SHA-256 repaired so that
 * mutations reach the parser. Opening, lookups, stats, check and a compaction must return
 * 0 or a negative errno and never read out of bounds.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "endian.h"
#include "fileio.h"
#include "hash.h"
#include "index.h"
#include "index-segment-sums.h"
#include "macro.h"

#define H_COUNT 16
#define H_ENTRIES_OFF 72

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[64];

static void fuzz_dir_remove(void)
{
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fuzz_dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s, ignoring\n", fuzz_dir);
}

static int fuzz_dirfd(void)
{
        static int fd = -1;
        const char *base = getenv("TMPDIR");

        if (fd >= 0)
                return fd;
        snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/fuzz-index-XXXXXX", base && strlen(base) < 40 ? base : "/tmp");
        if (!mkdtemp(fuzz_dir))
                abort();
        atexit(fuzz_dir_remove);
        fd = open(fuzz_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                abort();
        return fd;
}

/* Removes every file of the directory (the segment and whatever a compaction wrote). */
static void fuzz_dir_clean(int dfd)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fdopendir(fd);
        struct dirent *de;

        if (!d)
                abort();
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' || strlen(de->d_name) > 2)
                        (void)unlinkat(dfd, de->d_name, 0);
        closedir(d);
}

static int count_cb(const uint8_t id[BV_ID_SIZE], const BvLocation *loc, void *ud)
{
        (*(uint64_t *)ud)++;
        return 0;
}

static void exercise(BvIndex *x, const uint8_t *seg, size_t size)
{
        uint64_t n = 0, count = get_le64(seg + H_COUNT), off = get_le64(seg + H_ENTRIES_OFF);
        uint8_t absent[BV_ID_SIZE];
        BvIndexStats st;
        BvLocation loc;
        int r;

        /* The ids the file claims to hold, as far as they are inside it, and one absent id. */
        for (uint64_t i = 0; i < MIN(count, (uint64_t)64); i++) {
                if (off > size || (i + 1) * 48 > size - off)
                        break;
                r = bv_index_lookup(x, seg + off + i * 48, &loc);
                if (r < 0 && r != -ENOENT && r != -EBADMSG)
                        abort();
        }
        memset(absent, 0xa5, sizeof(absent));
        r = bv_index_lookup(x, absent, &loc);
        if (r < 0 && r != -ENOENT && r != -EBADMSG)
                abort();
        if (bv_index_stats(x, &st) < 0 || st.segments != 1)
                abort();
        r = bv_index_check(x, count_cb, &n);
        if (r < 0 && r != -EBADMSG)
                abort();
        if (r == 0 && n != st.entries)
                abort();
        /* A second segment, then a merge of both. */
        if (bv_index_claim(x, absent) == 1) {
                BvPackEntry e = { .type = 1, .offset = 1, .length = 2 };
                uint8_t pack[BV_PACK_ID_SIZE] = { 7 };

                memcpy(e.id, absent, sizeof(e.id));
                if (bv_index_add_pack(x, pack, &e, 1) < 0 || bv_index_flush(x) < 0)
                        abort();
                r = bv_index_compact(x, 1);
                if (r < 0 && r != -EBADMSG)
                        abort();
                /* Found (here or, with an equal id, in the input), unless a merge refused it. */
                r = bv_index_lookup(x, absent, &loc);
                if (r < 0 && r != -EBADMSG)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int dfd = fuzz_dirfd();
        uint8_t *seg = malloc(size ? size : 1);
        BvIndex *x = NULL;
        BvIndexDamage *damaged = NULL;
        size_t n_damaged = 0;
        int fd, r;

        if (!seg)
                return 0;
        memcpy(seg, data, size);
        index_segment_fix_sums(seg, size, true, true);
        /* No fsync: the file only has to outlive this process's page cache. */
        fd = openat(dfd, "0123456789abcdef.idx", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || bv_write_all(fd, seg, size) < 0)
                abort();
        safe_close(fd);

        /* A segment that does not parse is left out of the index and named as damaged. */
        r = bv_index_open(dfd, &x);
        if (r < 0)
                abort();
        if (bv_index_damaged(x, &damaged, &n_damaged) < 0 || n_damaged > 1)
                abort();
        if (n_damaged == 0)
                exercise(x, seg, size);
        else if (damaged[0].error != -EBADMSG && damaged[0].error != -EPROTONOSUPPORT)
                abort();
        free(damaged);
        bv_index_free(x);
        fuzz_dir_clean(dfd);
        free(seg);
        return 0;
}
