/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>
#include <openssl/rand.h>

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
