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

/* Bytes drawn from the first `symbols` values (a seeded generator): about log2(symbols) bits of
 * order-0 entropy per byte. */
static uint8_t *make_symbols(size_t len, unsigned symbols, uint32_t seed)
{
        uint8_t *b = malloc(len);

        ASSERT_TRUE(b);
        for (size_t i = 0; i < len; i++) {
                seed = seed * 1664525u + 1013904223u;
                b[i] = (uint8_t)((uint64_t)(seed >> 8) * symbols >> 24);
        }
        return b;
}

/* The entropy of the sample: exact for one and two symbols, near log2(symbols) for more; 0 for
 * nothing. */
TEST(sample_entropy)
{
        const size_t len = 256 * 1024;
        uint8_t *zeros = calloc(1, len), *two = malloc(len), *sym;

        ASSERT_TRUE(zeros && two);
        for (size_t i = 0; i < len; i++)
                two[i] = (uint8_t)(i & 1);
        ASSERT_TRUE(bv_zstd_sample_entropy(zeros, len) == 0);
        ASSERT_TRUE(bv_zstd_sample_entropy(two, len) == 1.0);
        ASSERT_TRUE(bv_zstd_sample_entropy(two, 6) == 1.0); /* shorter than the sample: all of it */
        ASSERT_TRUE(bv_zstd_sample_entropy(NULL, len) == 0);
        ASSERT_TRUE(bv_zstd_sample_entropy(two, 0) == 0);
        for (unsigned k = 2; k <= 8; k++) {
                sym = make_symbols(len, 1u << k, k);
                double e = bv_zstd_sample_entropy(sym, len);
                ASSERT_TRUE(e > k - 0.02 && e <= k);
                free(sym);
        }
        /* only the sample is looked at: four 4 KiB pieces, the first at the start, the last at the end */
        sym = make_symbols(len, 256, 9);
        for (size_t k = 0; k < BV_ZSTD_SAMPLE_PIECES; k++)
                memset(sym + (len - BV_ZSTD_SAMPLE_PIECE) / (BV_ZSTD_SAMPLE_PIECES - 1) * k, 0, BV_ZSTD_SAMPLE_PIECE);
        ASSERT_TRUE(bv_zstd_sample_entropy(sym, len) == 0);
        free(sym);
        free(zeros);
        free(two);
}

/* The choice by entropy band: compressed-looking data raw, the middle band the strongest
 * settings, text the fastest; every choice's frames decode. */
TEST(choose)
{
        static const struct {
                unsigned symbols;
                BvZstdChoice want;
        } cases[] = {
                { 256, BV_ZSTD_RAW },   /* ~8 bits */
                { 181, BV_ZSTD_MID },   /* ~7.5 */
                { 150, BV_ZSTD_MID },   /* ~7.2 */
                { 64, BV_ZSTD_STRONG }, /* ~6 */
                { 16, BV_ZSTD_FAST },   /* ~4 */
                { 1, BV_ZSTD_FAST },
        };
        const size_t len = 256 * 1024;
        uint8_t *dst = malloc(len), *back = malloc(len), *text = make_text(len);
        BvZstd *z = NULL;
        size_t n;

        ASSERT_TRUE(dst && back);
        ASSERT_OK(bv_zstd_new(3, &z));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint8_t *src = make_symbols(len, cases[i].symbols, (uint32_t)i);
                BvZstdChoice c = bv_zstd_choose(src, len);
                ASSERT_EQ(c, cases[i].want);
                if (c != BV_ZSTD_RAW && cases[i].symbols <= 64) {
                        /* (150 symbols and more gain too little for zstd to make a block smaller) */
                        ASSERT_OK(bv_zstd_set_choice(z, c));
                        ASSERT_OK(bv_zstd_compress(z, src, len, dst, len, &n));
                        ASSERT_OK(bv_zstd_decompress(z, dst, n, back, len));
                        ASSERT_MEMEQ(back, src, len);
                } else if (c == BV_ZSTD_RAW)
                        ASSERT_ERROR(bv_zstd_compress(z, src, len, dst, len, &n), E2BIG);
                free(src);
        }
        ASSERT_EQ(bv_zstd_choose(text, len), BV_ZSTD_FAST);
        ASSERT_EQ(bv_zstd_choose(text, 0), BV_ZSTD_RAW);
        ASSERT_EQ(bv_zstd_choose(NULL, len), BV_ZSTD_RAW);
        for (BvZstdChoice c = BV_ZSTD_FAST; c <= BV_ZSTD_STRONG; c++) {
                ASSERT_OK(bv_zstd_set_choice(z, c));
                ASSERT_OK(bv_zstd_compress(z, text, len, dst, len, &n));
                ASSERT_OK(bv_zstd_decompress(z, dst, n, back, len));
                ASSERT_MEMEQ(back, text, len);
        }
        /* each choice gives its own frames: the strongest no larger than the fastest on text */
        size_t fast, strong;
        ASSERT_OK(bv_zstd_set_choice(z, BV_ZSTD_FAST));
        ASSERT_OK(bv_zstd_compress(z, text, len, dst, len, &fast));
        ASSERT_OK(bv_zstd_set_choice(z, BV_ZSTD_STRONG));
        ASSERT_OK(bv_zstd_compress(z, text, len, dst, len, &strong));
        ASSERT_TRUE(strong <= fast);
        ASSERT_OK(bv_zstd_decompress(z, dst, strong, back, len));
        ASSERT_MEMEQ(back, text, len);
        ASSERT_ERROR(bv_zstd_set_choice(z, BV_ZSTD_RAW), EINVAL);
        ASSERT_ERROR(bv_zstd_set_choice(z, (BvZstdChoice)99), EINVAL);
        ASSERT_ERROR(bv_zstd_set_choice(NULL, BV_ZSTD_FAST), EINVAL);
        bv_zstd_free(z);
        free(text);
        free(dst);
        free(back);
}

/* After a choice, bv_zstd_reset_choice compresses as the level of creation again: the same frame
 * as a context that never chose. */
TEST(reset_choice)
{
        const size_t len = 256 * 1024;
        uint8_t *text = make_symbols(len, 16, 11), *want = malloc(len), *dst = malloc(len);
        BvZstd *z = NULL, *fresh = NULL;
        size_t n_want, n_fast, n;

        ASSERT_TRUE(want && dst);
        ASSERT_OK(bv_zstd_new(19, &fresh));
        ASSERT_OK(bv_zstd_compress(fresh, text, len, want, len, &n_want));
        ASSERT_OK(bv_zstd_new(19, &z));
        ASSERT_OK(bv_zstd_reset_choice(z)); /* nothing chosen yet: nothing to do */
        ASSERT_OK(bv_zstd_set_choice(z, BV_ZSTD_FAST));
        ASSERT_OK(bv_zstd_compress(z, text, len, dst, len, &n_fast));
        ASSERT_TRUE(n_fast != n_want); /* the choice shows in the frame */
        ASSERT_OK(bv_zstd_reset_choice(z));
        ASSERT_OK(bv_zstd_compress(z, text, len, dst, len, &n));
        ASSERT_EQ(n, n_want);
        ASSERT_MEMEQ(dst, want, n);
        ASSERT_ERROR(bv_zstd_reset_choice(NULL), EINVAL);
        bv_zstd_free(z);
        bv_zstd_free(fresh);
        free(text);
        free(want);
        free(dst);
}

/* Each choice compresses with the settings compress.h and FORMAT.md name: the frame is zstd's own
 * for that level and those table sizes, byte for byte (level 3 with 2^15 hash and 2^14 chain
 * tables for STRONG, level 2 with 2^15 and 2^15 for MID, level 1 for FAST). */
TEST(choice_settings)
{
        static const struct {
                BvZstdChoice choice;
                int level, hash_log, chain_log;
        } cases[] = {
                { BV_ZSTD_STRONG, 3, 15, 14 },
                { BV_ZSTD_MID, 2, 15, 15 },
                { BV_ZSTD_FAST, 1, 0, 0 },
        };
        const size_t len = 256 * 1024, cap = ZSTD_compressBound(len);
        uint8_t *text = make_symbols(len, 40, 5), *want = malloc(cap), *dst = malloc(len);
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        BvZstd *z = NULL;
        size_t n_want, n;

        ASSERT_TRUE(want && dst && cctx);
        ASSERT_OK(bv_zstd_new(3, &z));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ASSERT_TRUE(!ZSTD_isError(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters)));
                ASSERT_TRUE(!ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, cases[i].level)));
                ASSERT_TRUE(!ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, cases[i].hash_log)));
                ASSERT_TRUE(!ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_chainLog, cases[i].chain_log)));
                ASSERT_TRUE(!ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0)));
                n_want = ZSTD_compress2(cctx, want, cap, text, len);
                ASSERT_TRUE(!ZSTD_isError(n_want));
                ASSERT_OK(bv_zstd_set_choice(z, cases[i].choice));
                ASSERT_OK(bv_zstd_compress(z, text, len, dst, len, &n));
                ASSERT_EQ(n, n_want);
                ASSERT_MEMEQ(dst, want, n);
        }
        ZSTD_freeCCtx(cctx);
        bv_zstd_free(z);
        free(text);
        free(want);
        free(dst);
}

int main(void)
{
        RUN(round_trip);
        RUN(incompressible);
        RUN(decompress_rejects);
        RUN(frame_without_content_size);
        RUN(zstd_errors);
        RUN(sample_entropy);
        RUN(choose);
        RUN(reset_choice);
        RUN(choice_settings);
        return 0;
}
