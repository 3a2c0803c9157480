/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
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
