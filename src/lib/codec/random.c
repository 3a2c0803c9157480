/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <openssl/rand.h>
#include <string.h>
#include <sys/mman.h>

#include "macro.h"
#include "random.h"

int bv_random_bytes(void *buf, size_t len)
{
        uint8_t *p = buf;

        if (!buf && len > 0)
                return -EINVAL;
        for (size_t off = 0; off < len; off += INT_MAX)
                if (RAND_bytes(p + off, (int)MIN(len - off, (size_t)INT_MAX)) != 1)
                        return -EIO;
        return 0;
}

#define POOL_PAGE 4096u

/* One page of its own, so that MADV_WIPEONFORK covers exactly it. A forked child sees it all
 * zero: wipe_on_fork false, nothing left. */
struct BvRandomPool {
        bool wipe_on_fork; /* the madvise took: the pool may hand out bytes */
        uint32_t left;     /* unused bytes, at the end of bytes[] */
        uint8_t bytes[POOL_PAGE - 2 * sizeof(uint32_t)];
};
_Static_assert(sizeof(BvRandomPool) == POOL_PAGE, "the pool is one page");

int bv_random_pool_new(BvRandomPool **ret)
{
        BvRandomPool *p;

        if (!ret)
                return -EINVAL;
        p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return -ENOMEM;
        /* Without it (Linux < 4.14) a child could repeat the parent's bytes: no pooling. */
        p->wipe_on_fork = madvise(p, sizeof(*p), MADV_WIPEONFORK) == 0;
        *ret = p;
        return 0;
}

void bv_random_pool_free(BvRandomPool *p)
{
        if (p)
                (void)munmap(p, sizeof(*p));
}

int bv_random_pool_take(BvRandomPool *p, void *buf, size_t len)
{
        int r;

        if (!p || !buf || len > BV_RANDOM_POOL_TAKE_MAX)
                return -EINVAL;
        if (!p->wipe_on_fork)
                return bv_random_bytes(buf, len);
        if (p->left < len) {
                r = bv_random_bytes(p->bytes, sizeof(p->bytes));
                if (r < 0) {
                        p->left = 0;
                        return r;
                }
                p->left = sizeof(p->bytes);
        }
        memcpy(buf, p->bytes + sizeof(p->bytes) - p->left, len);
        p->left -= (uint32_t)len;
        return 0;
}
