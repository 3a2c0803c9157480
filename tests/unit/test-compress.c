/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* zstd round trips, the incompressible signal and every way a frame is rejected. */
#include <zstd.h>

#include "bvtest.h"
#include "compress.h"
#include "macro.h"

#define LEN 65536

static uint8_t *make_text(size_t len)
{
        static const char words[] = "the quick brown fox jumps over the lazy dog; block device backup ";
        uint8_t *b = malloc(len);

        ASSERT_TRUE(b);
        for (size_t i = 0; i < len; i++)
                b[i] = (uint8_t)words[(i * 7 + i / 61) % (sizeof(words) - 1)];
        return b;
}

TEST(round_trip)
{
        static const int levels[] = { -5, 1, 3, 19 };
        uint8_t *src = make_text(LEN), *dst = malloc(LEN), *back = malloc(LEN);
        size_t n = 0, n2 = 0;
        BvZstd *z = NULL;

        ASSERT_TRUE(dst && back);
        for (size_t i = 0; i < ELEMENTSOF(levels); i++) {
                ASSERT_OK(bv_zstd_new(levels[i], &z));
                /* Twice, to reuse the contexts; the output is deterministic. */
                ASSERT_OK(bv_zstd_compress(z, src, LEN, dst, LEN, &n));
                ASSERT_TRUE(n > 0 && n < LEN);
                ASSERT_OK(bv_zstd_decompress(z, dst, n, back, LEN));
                ASSERT_MEMEQ(back, src, LEN);
                ASSERT_OK(bv_zstd_compress(z, src, LEN, back, LEN, &n2));
                ASSERT_EQ(n, n2);
                ASSERT_MEMEQ(back, dst, n);
                ASSERT_EQ(ZSTD_getFrameContentSize(dst, n), LEN);
                bv_zstd_free(z);
                z = NULL;
        }
        bv_zstd_free(NULL);
        free(src);
        free(dst);
        free(back);
}

TEST(incompressible)
{
        uint8_t *src = malloc(LEN), *dst = malloc(LEN);
        size_t n = 12345;
        BvZstd *z = NULL;

        ASSERT_TRUE(src && dst);
        bvtest_fill_random(src, LEN, 99);
        ASSERT_OK(bv_zstd_new(3, &z));
        ASSERT_ERROR(bv_zstd_compress(z, src, LEN, dst, LEN, &n), E2BIG);
        ASSERT_EQ(n, 12345);
        /* Compressible data that still does not fit a tiny buffer. */
        free(src);
        src = make_text(LEN);
        ASSERT_ERROR(bv_zstd_compress(z, src, LEN, dst, 16, &n), E2BIG);
        /* Exactly-cap results are not "smaller": find the size, then offer exactly that. */
        ASSERT_OK(bv_zstd_compress(z, src, LEN, dst, LEN, &n));
        ASSERT_ERROR(bv_zstd_compress(z, src, LEN, dst, n, &n), E2BIG);
        /* The context still works after an error. */
        ASSERT_OK(bv_zstd_compress(z, src, LEN, dst, LEN, &n));
        bv_zstd_free(z);
        free(src);
        free(dst);
}

TEST(decompress_rejects)
{
        uint8_t *src = make_text(LEN), *dst = malloc(2 * LEN), *back = malloc(LEN + 1);
        size_t n = 0;
        BvZstd *z = NULL;

        ASSERT_TRUE(dst && back);
        ASSERT_OK(bv_zstd_new(3, &z));
        ASSERT_OK(bv_zstd_compress(z, src, LEN, dst, LEN, &n));
        /* wrong expected length, either way */
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n, back, LEN - 1), EBADMSG);
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n, back, LEN + 1), EBADMSG);
        /* truncated frame, trailing garbage, a second frame */
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n - 1, back, LEN), EBADMSG);
        dst[n] = 0;
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n + 1, back, LEN), EBADMSG);
        memcpy(dst + n, dst, n);
        ASSERT_ERROR(bv_zstd_decompress(z, dst, 2 * n, back, LEN), EBADMSG);
        /* corrupted magic, corrupted body */
        dst[0] ^= 0xff;
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n, back, LEN), EBADMSG);
        dst[0] ^= 0xff;
        for (size_t i = n / 2; i < n - 3; i++)
                dst[i] ^= 0x5a;
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n, back, LEN), EBADMSG);
        /* not a frame at all, empty input */
        ASSERT_ERROR(bv_zstd_decompress(z, src, 100, back, LEN), EBADMSG);
        ASSERT_ERROR(bv_zstd_decompress(z, src, 0, back, LEN), EBADMSG);
        /* the context recovers */
        ASSERT_OK(bv_zstd_compress(z, src, LEN, dst, LEN, &n));
        ASSERT_OK(bv_zstd_decompress(z, dst, n, back, LEN));
        ASSERT_MEMEQ(back, src, LEN);
        bv_zstd_free(z);
        free(src);
        free(dst);
        free(back);
}

TEST(frame_without_content_size)
{
        uint8_t *src = make_text(LEN), *dst = malloc(LEN), *back = malloc(LEN);
        ZSTD_CCtx *c = ZSTD_createCCtx();
        BvZstd *z = NULL;
        size_t n;

        ASSERT_TRUE(dst && back && c);
        ASSERT_EQ(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0), 0);
        /* A streamed frame without a content size is rejected even if it would fit. */
        ZSTD_outBuffer out = { dst, LEN, 0 };
        ZSTD_inBuffer in = { src, LEN, 0 };
        ASSERT_EQ(ZSTD_compressStream2(c, &out, &in, ZSTD_e_end), 0);
        n = out.pos;
        ASSERT_EQ(ZSTD_getFrameContentSize(dst, n), ZSTD_CONTENTSIZE_UNKNOWN);
        ASSERT_OK(bv_zstd_new(3, &z));
        ASSERT_ERROR(bv_zstd_decompress(z, dst, n, back, LEN), EBADMSG);
        bv_zstd_free(z);
        ZSTD_freeCCtx(c);
        free(src);
        free(dst);
        free(back);
}

TEST(zstd_errors)
{
        BvZstd *z = NULL;
        size_t n;

        ASSERT_ERROR(bv_zstd_new(ZSTD_maxCLevel() + 1, &z), EINVAL);
        ASSERT_ERROR(bv_zstd_new(3, NULL), EINVAL);
        ASSERT_TRUE(z == NULL);
        ASSERT_OK(bv_zstd_new(3, &z));
        ASSERT_ERROR(bv_zstd_compress(z, NULL, 10, NULL, 10, &n), EINVAL);
        ASSERT_ERROR(bv_zstd_compress(z, "abc", 3, NULL, 10, &n), EINVAL);
        ASSERT_ERROR(bv_zstd_decompress(z, NULL, 10, NULL, 0), EINVAL);
        bv_zstd_free(z);
}

int main(void)
{
        RUN(round_trip);
        RUN(incompressible);
        RUN(decompress_rejects);
        RUN(frame_without_content_size);
        RUN(zstd_errors);
        return 0;
}
