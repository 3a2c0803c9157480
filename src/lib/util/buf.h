/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Grows the byte buffer *buf of *cap bytes to hold at least need bytes, keeping its contents.
 * -ENOMEM leaves it as it was. */
static inline int bv_buf_reserve(uint8_t **buf, size_t *cap, size_t need)
{
        uint8_t *p;

        if (need <= *cap)
                return 0;
        p = realloc(*buf, need);
        if (!p)
                return -ENOMEM;
        *buf = p;
        *cap = need;
        return 0;
}

/* Grows the array *array of *cap elements of size bytes to hold at least need, doubling from
 * first (at least 1), so that appending one at a time costs amortized O(1); contents kept.
 * -ENOMEM (also when the size would overflow) leaves it as it was. */
static inline int bv_array_reserve(void **array, size_t *cap, size_t need, size_t size, size_t first)
{
        size_t c = *cap ? *cap : first ? first : 1, bytes;
        void *p;

        if (need <= *cap)
                return 0;
        while (c < need)
                if (__builtin_mul_overflow(c, (size_t)2, &c))
                        return -ENOMEM;
        if (__builtin_mul_overflow(c, size, &bytes))
                return -ENOMEM;
        p = realloc(*array, bytes);
        if (!p)
                return -ENOMEM;
        *array = p;
        *cap = c;
        return 0;
}

/* bv_array_reserve for a typed array and its capacity, e.g.
 * BV_ARRAY_RESERVE(l->ids, l->cap, l->n + 1, 64). */
#define BV_ARRAY_RESERVE(array, cap, need, first)                                                          \
        bv_array_reserve((void **)&(array), &(cap), (need), sizeof(*(array)), (first))
