/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hex.h"

void bv_hex_encode(const void *data, size_t len, char *out)
{
        static const char digits[] = "0123456789abcdef";
        const uint8_t *b = data;
        for (size_t i = 0; i < len; i++) {
                out[2 * i] = digits[b[i] >> 4];
                out[2 * i + 1] = digits[b[i] & 15];
        }
        out[2 * len] = '\0';
}

static int unhex(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -EINVAL;
}

int bv_hex_decode(const char *s, void *out, size_t len)
{
        uint8_t *b = out;
        if (!s || strlen(s) != 2 * len)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                b[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

bool bv_hex_is_lower_prefix(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool bv_hex_is_lower(const char *s, size_t len)
{
        return s && strlen(s) == len && bv_hex_is_lower_prefix(s, len);
}
