/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* scrypt against RFC 7914 section 12, and its parameter range. */
#include "bvtest.h"
#include "hex.h"
#include "kdf.h"

static void unhex(const char *s, void *out, size_t len)
{
        ASSERT_EQ(strlen(s), 2 * len);
        ASSERT_OK(bv_hex_decode(s, out, len));
}

TEST(scrypt_rfc7914)
{
        uint8_t out[64], want[64];

        /* N = 1024 = 2^10, r = 8, p = 16 */
        ASSERT_OK(bv_scrypt("password", 8, "NaCl", 4, 10, 8, 16, out, sizeof(out)));
        unhex("fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
              "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640",
              want, sizeof(want));
        ASSERT_MEMEQ(out, want, sizeof(out));
        /* N = 16384 = 2^14, r = 8, p = 1 */
        ASSERT_OK(bv_scrypt("pleaseletmein", 13, "SodiumChloride", 14, 14, 8, 1, out, sizeof(out)));
        unhex("7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2"
              "d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887",
              want, sizeof(want));
        ASSERT_MEMEQ(out, want, sizeof(out));
}

TEST(scrypt_default_cost)
{
        uint8_t a[32], b[32];

        /* The default cost (128 MiB) must fit the memory limit given to OpenSSL. */
        ASSERT_OK(bv_scrypt("pw", 2, "salt", 4, BV_SCRYPT_DEFAULT_LOG2_N, BV_SCRYPT_DEFAULT_R,
                            BV_SCRYPT_DEFAULT_P, a, sizeof(a)));
        ASSERT_OK(bv_scrypt("pw", 2, "salt", 4, BV_SCRYPT_DEFAULT_LOG2_N, BV_SCRYPT_DEFAULT_R,
                            BV_SCRYPT_DEFAULT_P, b, sizeof(b)));
        ASSERT_MEMEQ(a, b, sizeof(a));
        ASSERT_OK(bv_scrypt("pX", 2, "salt", 4, BV_SCRYPT_DEFAULT_LOG2_N, BV_SCRYPT_DEFAULT_R,
                            BV_SCRYPT_DEFAULT_P, b, sizeof(b)));
        ASSERT_TRUE(memcmp(a, b, sizeof(a)) != 0);
}

TEST(scrypt_bad_params)
{
        uint8_t out[64], canary[64];

        memset(out, 0x77, sizeof(out));
        memcpy(canary, out, sizeof(out));
        /* RFC 7914's first vector (N = 16, r = 1, p = 1) is below the accepted cost. */
        ASSERT_ERROR(bv_scrypt("", 0, "", 0, 4, 1, 1, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 9, 8, 1, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 23, 8, 1, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 10, 0, 1, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 10, 33, 1, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 10, 8, 0, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 10, 8, 17, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 10, 8, 1, out, 0), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 10, 8, 1, NULL, 32), EINVAL);
        ASSERT_ERROR(bv_scrypt(NULL, 2, "s", 1, 10, 8, 1, out, sizeof(out)), EINVAL);
        ASSERT_ERROR(bv_scrypt("pw", 2, NULL, 1, 10, 8, 1, out, sizeof(out)), EINVAL);
        /* RFC 7914 wants N < 2^(128 r / 8): N = 2^16 needs r >= 2 */
        ASSERT_ERROR(bv_scrypt("pw", 2, "s", 1, 16, 1, 1, out, sizeof(out)), EINVAL);
        ASSERT_TRUE(!bv_scrypt_params_valid(16, 1, 1));
        ASSERT_TRUE(bv_scrypt_params_valid(15, 1, 1));
        ASSERT_TRUE(bv_scrypt_params_valid(16, 2, 1));
        ASSERT_MEMEQ(out, canary, sizeof(out));
        /* The edges of the range are accepted; an empty passphrase and salt too. */
        ASSERT_OK(bv_scrypt(NULL, 0, NULL, 0, 10, 1, 1, out, sizeof(out)));
        ASSERT_OK(bv_scrypt("pw", 2, "s", 1, 10, 1, 16, out, sizeof(out)));
}

int main(void)
{
        RUN(scrypt_rfc7914);
        RUN(scrypt_default_cost);
        RUN(scrypt_bad_params);
        return 0;
}
