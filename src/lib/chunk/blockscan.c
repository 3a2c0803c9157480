/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Per-block primitives of the chunker. Both run on every non-hole byte of an image, so they
 * are written for the compiler: plain loops over 64-bit words, no branches inside a block
 * beyond the early exit of the zero check. docs/FORMAT.md, "Chunking", pins the print.
 */

#include <string.h>

#include "blockscan.h"
#include "endian.h"

/* Bytes checked between early exits: long enough for the OR-reduction to vectorise. */
#define ZERO_STRIDE 256u

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
        return (x << r) | (x >> (64 - r));
}

static bool stride_is_zero(const uint8_t *p)
{
        uint64_t acc = 0;
        for (size_t i = 0; i < ZERO_STRIDE; i += sizeof(uint64_t)) {
                uint64_t w;
                memcpy(&w, p + i, sizeof(w));
                acc |= w;
        }
        return acc == 0;
}

bool bv_is_zero(const void *p, size_t len)
{
        const uint8_t *b = p;
        size_t i = 0;

        /* Random data almost always fails on the first word: answer that without the loop. */
        if (len >= sizeof(uint64_t) && get_le64(b) != 0)
                return false;
        for (; i + ZERO_STRIDE <= len; i += ZERO_STRIDE)
                if (!stride_is_zero(b + i))
                        return false;
        uint8_t acc = 0;
        for (; i < len; i++)
                acc |= b[i];
        return acc == 0;
}

#define PRINT_MUL 0x9e3779b97f4a7c15ull
#define PRINT_FIN1 0xff51afd7ed558ccdull
#define PRINT_FIN2 0xc4ceb9fe1a85ec53ull

uint64_t bv_block_print(const uint8_t key[32], const void *block)
{
        const uint8_t *b = block;
        uint64_t k0 = get_le64(key), k1 = get_le64(key + 8), k2 = get_le64(key + 16),
                 k3 = get_le64(key + 24);
        uint64_t a0 = k0, a1 = k1, a2 = k2, a3 = k3;

        /* Four independent lanes: word i goes to lane i mod 4. */
        for (size_t i = 0; i < BV_BLOCK_SIZE; i += 32) {
                a0 = rotl64(a0 ^ get_le64(b + i), 29) * PRINT_MUL;
                a1 = rotl64(a1 ^ get_le64(b + i + 8), 29) * PRINT_MUL;
                a2 = rotl64(a2 ^ get_le64(b + i + 16), 29) * PRINT_MUL;
                a3 = rotl64(a3 ^ get_le64(b + i + 24), 29) * PRINT_MUL;
        }

        uint64_t h = a0 ^ rotl64(a1, 16) ^ rotl64(a2, 32) ^ rotl64(a3, 48);
        h ^= k0 ^ k2;
        h ^= h >> 33;
        h *= PRINT_FIN1;
        h ^= k1 ^ k3;
        h ^= h >> 33;
        h *= PRINT_FIN2;
        h ^= h >> 33;
        return h;
}
