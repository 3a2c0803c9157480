/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Makes room for need elements of size bytes in the array *array_ptr (a T **) of *cap elements:
 * when it is short, it grows to twice its capacity (first when it is empty), or to need if that is
 * more. -ENOMEM leaves it as it was. The pointer is copied in and out with memcpy, so that any T * can
 * be passed without breaking strict aliasing. Use it through BV_ARRAY_RESERVE. */
static inline int bv_array_reserve(void *array_ptr, size_t *cap, size_t need, size_t size, size_t first)
{
        void *old, *p;
        size_t n;

        if (need <= *cap)
                return 0;
        n = *cap ? (*cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * *cap) : first;
        if (n < need)
                n = need;
        memcpy(&old, array_ptr, sizeof(old));
        p = reallocarray(old, n, size);
        if (!p)
                return -ENOMEM;
        memcpy(array_ptr, &p, sizeof(p));
        *cap = n;
        return 0;
}
#define BV_ARRAY_RESERVE(array, cap, need, first)                                                       \
        bv_array_reserve(&(array), &(cap), (need), sizeof(*(array)), (first))
