/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockscan.h"
#include "bvtest.h"

static void test_key(uint8_t key[32])
{
        for (unsigned i = 0; i < 32; i++)
                key[i] = (uint8_t)i;
}

TEST(is_zero_lengths_and_alignments)
{
        uint8_t *buf = calloc(1, 3 * BV_BLOCK_SIZE);
        ASSERT_TRUE(buf);

        ASSERT_TRUE(bv_is_zero(buf, 0));
        for (size_t align = 0; align < 9; align++)
                for (size_t len = 0; len <= 2 * BV_BLOCK_SIZE; len += (len < 600 ? 1 : 509)) {
                        ASSERT_TRUE(bv_is_zero(buf + align, len));
                        if (len == 0)
                                continue;
                        /* one set bit anywhere makes it non-zero: first, last and a middle byte */
                        size_t where[3] = { 0, len - 1, len / 2 };
                        for (size_t w = 0; w < 3; w++) {
                                buf[align + where[w]] = 0x80;
                                ASSERT_TRUE(!bv_is_zero(buf + align, len));
                                buf[align + where[w]] = 0;
                        }
                }
        free(buf);
}

TEST(is_zero_every_byte_of_a_block)
{
        uint8_t *buf = calloc(1, BV_BLOCK_SIZE);
        ASSERT_TRUE(buf);
        for (size_t i = 0; i < BV_BLOCK_SIZE; i++) {
                buf[i] = 1;
                ASSERT_TRUE(!bv_is_zero(buf, BV_BLOCK_SIZE));
                buf[i] = 0;
        }
        ASSERT_TRUE(bv_is_zero(buf, BV_BLOCK_SIZE));
        free(buf);
}

/* Known answers pin the print of docs/FORMAT.md: a second implementation must match them. */
TEST(print_known_answers)
{
        uint8_t key[32], block[BV_BLOCK_SIZE];

        test_key(key);
        bvtest_fill_random(block, sizeof(block), 1);
        ASSERT_TRUE(bv_block_print(key, block) == 0x9950863cc3bce056ull);
        memset(block, 0, sizeof(block));
        block[4095] = 1;
        ASSERT_TRUE(bv_block_print(key, block) == 0xaa8a48a1bdedf0e0ull);
        memset(key, 0, sizeof(key));
        memset(block, 0xff, sizeof(block));
        ASSERT_TRUE(bv_block_print(key, block) == 0x2001b5f5dbe2cfdaull);
}

TEST(print_depends_on_every_word_and_the_key)
{
        uint8_t key[32], block[BV_BLOCK_SIZE];

        test_key(key);
        bvtest_fill_random(block, sizeof(block), 7);
        uint64_t base = bv_block_print(key, block);
        ASSERT_EQ(bv_block_print(key, block), (long long)base); /* deterministic */

        for (size_t i = 0; i < BV_BLOCK_SIZE; i++) {
                uint8_t bit = (uint8_t)(1u << (i % 8));
                block[i] ^= bit;
                ASSERT_TRUE(bv_block_print(key, block) != base);
                block[i] ^= bit;
        }
        for (size_t i = 0; i < 32; i++) {
                key[i] ^= 0x10;
                ASSERT_TRUE(bv_block_print(key, block) != base);
                key[i] ^= 0x10;
        }
        /* swapping two words of different lanes must change it too */
        uint8_t tmp[8];
        memcpy(tmp, block, 8);
        memcpy(block, block + 8, 8);
        memcpy(block + 8, tmp, 8);
        ASSERT_TRUE(bv_block_print(key, block) != base);
}

/* Prints must be uniform (the hybrid chunker takes local minima of them): print < 2^64/D must
 * have probability 1/D; check it for D = 11. */
TEST(print_is_uniform_enough)
{
        uint8_t key[32];
        uint8_t *blocks = malloc(20000 * (size_t)BV_BLOCK_SIZE);
        ASSERT_TRUE(blocks);
        test_key(key);
        bvtest_fill_random(blocks, 20000 * (size_t)BV_BLOCK_SIZE, 99);

        uint64_t below = UINT64_MAX / 11;
        unsigned hits = 0, top_bit = 0;
        for (size_t i = 0; i < 20000; i++) {
                uint64_t p = bv_block_print(key, blocks + i * BV_BLOCK_SIZE);
                hits += p < below;
                top_bit += (unsigned)(p >> 63);
        }
        /* expected 1818 +- 3 sigma (~123), 10000 +- 3 sigma (~212) */
        ASSERT_TRUE(hits > 1690 && hits < 1950);
        ASSERT_TRUE(top_bit > 9780 && top_bit < 10220);

        /* blocks differing only in a counter (structured data) must spread as well */
        memset(blocks, 0, BV_BLOCK_SIZE);
        hits = 0;
        for (uint32_t c = 0; c < 20000; c++) {
                memcpy(blocks + 100, &c, sizeof(c));
                hits += bv_block_print(key, blocks) < below;
        }
        ASSERT_TRUE(hits > 1690 && hits < 1950);
        free(blocks);
}

int main(void)
{
        RUN(is_zero_lengths_and_alignments);
        RUN(is_zero_every_byte_of_a_block);
        RUN(print_known_answers);
        RUN(print_depends_on_every_word_and_the_key);
        RUN(print_is_uniform_enough);
        return 0;
}
