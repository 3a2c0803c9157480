/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Little-endian field access and LEB128 varints for on-disk formats (docs/FORMAT.md). */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void put_le16(void *p, uint16_t v)
{
        uint8_t *b = p;
        b[0] = v;
        b[1] = v >> 8;
}
static inline void put_le32(void *p, uint32_t v)
{
        uint8_t *b = p;
        for (int i = 0; i < 4; i++)
                b[i] = v >> (8 * i);
}
static inline void put_le64(void *p, uint64_t v)
{
        uint8_t *b = p;
        for (int i = 0; i < 8; i++)
                b[i] = v >> (8 * i);
}
static inline uint16_t get_le16(const void *p)
{
        const uint8_t *b = p;
        return (uint16_t)(b[0] | (b[1] << 8));
}
static inline uint32_t get_le32(const void *p)
{
        const uint8_t *b = p;
        return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}
static inline uint64_t get_le64(const void *p)
{
        return (uint64_t)get_le32(p) | ((uint64_t)get_le32((const uint8_t *)p + 4) << 32);
}

#define VARINT_MAX 10

/* Writes v as LEB128 into p (which has room for VARINT_MAX bytes); returns the bytes used. */
static inline size_t varint_put(void *p, uint64_t v)
{
        uint8_t *b = p;
        size_t n = 0;
        do {
                uint8_t byte = v & 0x7f;
                v >>= 7;
                b[n++] = byte | (v ? 0x80 : 0);
        } while (v);
        return n;
}

/* Reads a LEB128 varint from [p, p+len); returns bytes consumed, or 0 if truncated or overlong. */
static inline size_t varint_get(const void *p, size_t len, uint64_t *ret)
{
        const uint8_t *b = p;
        uint64_t v = 0;
        for (size_t i = 0; i < len && i < VARINT_MAX; i++) {
                uint64_t part = b[i] & 0x7f;
                if (i == 9 && part > 1)
                        return 0;
                v |= part << (7 * i);
                if (!(b[i] & 0x80)) {
                        if (i > 0 && b[i] == 0)
                                return 0; /* non-canonical: trailing zero group */
                        *ret = v;
                        return i + 1;
                }
        }
        return 0;
}
