/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Growing buffers and arrays (util/buf.h): contents survive, and an array's capacity doubles
 * from its first size, or becomes what is needed when that is more. */
#include <stdint.h>

#include "bvtest.h"
#include "buf.h"
#include "macro.h"

TEST(buf_reserve)
{
        _cleanup_free_ uint8_t *b = NULL;
        size_t cap = 0;

        ASSERT_OK(bv_buf_reserve(&b, &cap, 10));
        ASSERT_EQ(cap, 10);
        memcpy(b, "0123456789", 10);
        ASSERT_OK(bv_buf_reserve(&b, &cap, 4)); /* enough already: unchanged */
        ASSERT_EQ(cap, 10);
        ASSERT_OK(bv_buf_reserve(&b, &cap, 1000));
        ASSERT_EQ(cap, 1000);
        ASSERT_MEMEQ(b, "0123456789", 10);
}

TEST(array_reserve)
{
        _cleanup_free_ uint8_t(*ids)[16] = NULL;
        size_t n = 0, cap = 0;

        for (unsigned i = 0; i < 1000; i++) {
                ASSERT_OK(BV_ARRAY_RESERVE(ids, cap, n + 1, 64));
                ASSERT_TRUE(cap >= n + 1);
                memset(ids[n++], (int)(i & 0xff), 16);
        }
        ASSERT_EQ(cap, 1024); /* 64, doubled four times */
        for (unsigned i = 0; i < 1000; i++)
                ASSERT_EQ(ids[i][15], i & 0xff);
        /* a need beyond the next doubling is met exactly; then doubling again */
        _cleanup_free_ uint64_t *v = NULL;
        size_t vcap = 0;
        ASSERT_OK(BV_ARRAY_RESERVE(v, vcap, 5, 4));
        ASSERT_EQ(vcap, 5);
        v[4] = 42;
        ASSERT_OK(BV_ARRAY_RESERVE(v, vcap, 100, 4));
        ASSERT_EQ(vcap, 100);
        ASSERT_OK(BV_ARRAY_RESERVE(v, vcap, 101, 4));
        ASSERT_EQ(vcap, 200);
        ASSERT_EQ(v[4], 42);
}

int main(void)
{
        RUN(buf_reserve);
        RUN(array_reserve);
        return 0;
}
