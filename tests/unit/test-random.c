/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nonce pool: every byte handed out once, across refills, and never the same in a forked
 * child as in its parent. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bvtest.h"
#include "random.h"

#define NONCE 12
#define TAKES 1000 /* ~3 pages of nonces: the pool refills twice */

static int cmp_nonce(const void *a, const void *b)
{
        return memcmp(a, b, NONCE);
}

TEST(pool_distinct)
{
        static uint8_t got[TAKES][NONCE];
        BvRandomPool *p = NULL;

        ASSERT_OK(bv_random_pool_new(&p));
        for (size_t i = 0; i < TAKES; i++)
                ASSERT_OK(bv_random_pool_take(p, got[i], NONCE));
        qsort(got, TAKES, NONCE, cmp_nonce);
        for (size_t i = 1; i < TAKES; i++)
                ASSERT_TRUE(memcmp(got[i - 1], got[i], NONCE) != 0);
        bv_random_pool_free(p);
}

/* A child forked with the pool half used draws bytes of its own. */
TEST(pool_fork)
{
        uint8_t mine[NONCE], theirs[NONCE];
        BvRandomPool *p = NULL;
        int fds[2], status;
        pid_t pid;

        ASSERT_OK(bv_random_pool_new(&p));
        ASSERT_OK(bv_random_pool_take(p, mine, NONCE));
        ASSERT_OK(pipe(fds));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                close(fds[0]);
                if (bv_random_pool_take(p, theirs, NONCE) < 0 || write(fds[1], theirs, NONCE) != NONCE)
                        _exit(1);
                _exit(0);
        }
        close(fds[1]);
        ASSERT_OK(bv_random_pool_take(p, mine, NONCE));
        ASSERT_EQ(read(fds[0], theirs, NONCE), NONCE);
        close(fds[0]);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ASSERT_TRUE(memcmp(mine, theirs, NONCE) != 0);
        bv_random_pool_free(p);
}

TEST(pool_errors)
{
        uint8_t big[BV_RANDOM_POOL_TAKE_MAX + 1];
        BvRandomPool *p = NULL;

        ASSERT_ERROR(bv_random_pool_new(NULL), EINVAL);
        ASSERT_OK(bv_random_pool_new(&p));
        ASSERT_ERROR(bv_random_pool_take(p, big, sizeof(big)), EINVAL);
        ASSERT_ERROR(bv_random_pool_take(p, NULL, 1), EINVAL);
        ASSERT_ERROR(bv_random_pool_take(NULL, big, 1), EINVAL);
        ASSERT_OK(bv_random_pool_take(p, big, BV_RANDOM_POOL_TAKE_MAX));
        bv_random_pool_free(p);
        bv_random_pool_free(NULL);
}

int main(void)
{
        RUN(pool_distinct);
        RUN(pool_fork);
        RUN(pool_errors);
        return 0;
}
