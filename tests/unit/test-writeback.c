/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writeback behind a writer: a file written in steps leaves the page cache's dirty pages on
 * their way to the disk while it is written, instead of all of them for the final fsync. The
 * page cache's count of dirty pages comes from cachestat(2) (Linux 6.5). */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bvtest.h"
#include "macro.h"
#include "writeback.h"

#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

#define MIB (1024ull * 1024)
#define FILE_MIB 64u
#define STEP (4 * MIB)

struct cachestat_range_ {
        uint64_t off, len;
};
struct cachestat_ {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* The file's dirty pages, or -1 when the kernel cannot tell. */
static long dirty_pages(int fd)
{
        struct cachestat_range_ range = { 0, 0 };
        struct cachestat_ cs;

        if (syscall(__NR_cachestat, fd, &range, &cs, 0) < 0)
                return -1;
        return (long)cs.nr_dirty;
}

TEST(dirty_pages_leave_while_written)
{
        char *dir = bvtest_tmpdir(), path[4096];
        _cleanup_free_ uint8_t *buf = malloc(MIB);
        BvWriteback *wb;
        int fd;

        ASSERT_TRUE(buf != NULL);
        bvtest_fill_random(buf, MIB, 26);
        snprintf(path, sizeof(path), "%s/file", dir);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        if (dirty_pages(fd) < 0) {
                fprintf(stderr, "SKIP: cachestat(2) is missing (%m): no count of dirty pages\n");
                exit(77);
        }
        ASSERT_OK(bv_writeback_start(fd, STEP, &wb));
        for (unsigned i = 0; i < FILE_MIB; i++) {
                ASSERT_EQ(pwrite(fd, buf, MIB, (off_t)i * MIB), (ssize_t)MIB);
                bv_writeback_add(wb, MIB);
        }
        /* the thread, a little behind the writer, started writeback of each step (of several at
         * once when it lagged), and free of the rest: no page is left dirty. Without it all 16384
         * would be (the kernel's own writeback starts at a tenth of the memory, or after 30 s). */
        uint64_t rounds = bv_writeback_rounds(wb);
        bv_writeback_free(wb);
        long dirty = dirty_pages(fd);
        fprintf(stderr, "dirty pages after the writer: %ld of %llu, in %llu rounds and a last\n", dirty,
                FILE_MIB * MIB / 4096, (unsigned long long)rounds);
        ASSERT_EQ(dirty, 0);
        ASSERT_TRUE(rounds >= 1 && rounds <= FILE_MIB * MIB / STEP);
        ASSERT_OK(fsync(fd) < 0 ? negative_errno() : 0);
        close(fd);
        bvtest_rm_rf(dir);
        free(dir);
}

TEST(arguments_and_null)
{
        BvWriteback *wb = NULL;

        ASSERT_ERROR(bv_writeback_start(-1, 0, &wb), EINVAL);
        ASSERT_ERROR(bv_writeback_start(0, 0, NULL), EINVAL);
        bv_writeback_add(NULL, 1);
        bv_writeback_free(NULL);
}

int main(void)
{
        RUN(arguments_and_null);
        RUN(dirty_pages_leave_while_written);
        return 0;
}
