/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bvtest.h"
#include "endian.h"
#include "hex.h"

TEST(le_roundtrip)
{
        uint8_t b[8];
        put_le64(b, 0x0123456789abcdefull);
        ASSERT_EQ(b[0], 0xef);
        ASSERT_EQ(b[7], 0x01);
        ASSERT_TRUE(get_le64(b) == 0x0123456789abcdefull);
        put_le32(b, 0xdeadbeef);
        ASSERT_EQ(get_le32(b), 0xdeadbeef);
        put_le16(b, 0xbeef);
        ASSERT_EQ(get_le16(b), 0xbeef);
}

TEST(varint)
{
        static const uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, UINT64_MAX};
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
                uint8_t b[VARINT_MAX];
                uint64_t v = 0;
                size_t n = varint_put(b, values[i]);
                ASSERT_EQ(varint_get(b, n, &v), n);
                ASSERT_TRUE(v == values[i]);
                /* truncated input is refused */
                ASSERT_EQ(varint_get(b, n - 1, &v), 0);
        }
        /* overlong / non-canonical encodings are refused */
        const uint8_t overlong[] = {0x80, 0x00};
        uint64_t v;
        ASSERT_EQ(varint_get(overlong, 2, &v), 0);
        const uint8_t too_big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
        ASSERT_EQ(varint_get(too_big, 10, &v), 0);
}

TEST(hex)
{
        const uint8_t in[] = {0x00, 0x1f, 0xa0, 0xff};
        char s[9];
        uint8_t out[4];
        bv_hex_encode(in, 4, s);
        ASSERT_STREQ(s, "001fa0ff");
        ASSERT_OK(bv_hex_decode("001FA0ff", out, 4));
        ASSERT_MEMEQ(in, out, 4);
        ASSERT_ERROR(bv_hex_decode("001fa0f", out, 4), EINVAL);
        ASSERT_ERROR(bv_hex_decode("001fa0fg", out, 4), EINVAL);
}

int main(void)
{
        RUN(le_roundtrip);
        RUN(varint);
        RUN(hex);
        return 0;
}
