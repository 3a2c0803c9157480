/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Known answers for SHA-256 (FIPS 180-2), HMAC-SHA-256 (RFC 4231), HKDF (RFC 5869), and the
 * prefix MACs checked against one-shot MACs. */
#include <pthread.h>

#include "bvtest.h"
#include "hash.h"
#include "hex.h"
#include "macro.h"

static void unhex(const char *s, void *out, size_t len)
{
        ASSERT_EQ(strlen(s), 2 * len);
        ASSERT_OK(bv_hex_decode(s, out, len));
}

static void assert_hash(const uint8_t h[BV_HASH_SIZE], const char *hex)
{
        uint8_t want[BV_HASH_SIZE];

        unhex(hex, want, sizeof(want));
        ASSERT_MEMEQ(h, want, sizeof(want));
}

TEST(sha256_kat)
{
        static const char msg2[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        uint8_t h[BV_HASH_SIZE];
        char *million;

        bv_sha256("abc", 3, h);
        assert_hash(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        bv_sha256(msg2, strlen(msg2), h);
        assert_hash(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        bv_sha256("", 0, h);
        assert_hash(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

        million = malloc(1000000);
        ASSERT_TRUE(million);
        memset(million, 'a', 1000000);
        bv_sha256(million, 1000000, h);
        assert_hash(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(million);
}

TEST(hmac_rfc4231)
{
        static const char data6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
        static const char data7[] = "This is a test using a larger than block-size key and a larger than block-size "
                                    "data. The key needs to be hashed before being used by the HMAC algorithm.";
        uint8_t key[131], h[BV_HASH_SIZE];

        /* Test case 1 */
        memset(key, 0x0b, 20);
        ASSERT_OK(bv_hmac_sha256(key, 20, "Hi There", 8, h));
        assert_hash(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        /* Test case 2: a key shorter than the output */
        ASSERT_OK(bv_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, h));
        assert_hash(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        /* Test cases 6 and 7: a 131-byte key, longer than the block */
        memset(key, 0xaa, sizeof(key));
        ASSERT_OK(bv_hmac_sha256(key, sizeof(key), data6, strlen(data6), h));
        assert_hash(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        ASSERT_OK(bv_hmac_sha256(key, sizeof(key), data7, strlen(data7), h));
        assert_hash(h, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(hmac_key_reuse)
{
        uint8_t key[131], h1[BV_HASH_SIZE], h2[BV_HASH_SIZE];
        BvHmacKey *k = NULL;

        memset(key, 0xaa, sizeof(key));
        ASSERT_OK(bv_hmac_key_new(key, sizeof(key), &k));
        /* The prepared key gives the same answer on every call. */
        for (int i = 0; i < 3; i++) {
                ASSERT_OK(bv_hmac_key_mac(k, "Test Using Larger Than Block-Size Key - Hash Key First", 54, h1));
                assert_hash(h1, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        }
        ASSERT_OK(bv_hmac_key_mac(k, NULL, 0, h1));
        ASSERT_OK(bv_hmac_sha256(key, sizeof(key), "", 0, h2));
        ASSERT_MEMEQ(h1, h2, sizeof(h1));
        bv_hmac_key_free(k);
        bv_hmac_key_free(NULL);

        /* An empty key is a valid HMAC key. */
        ASSERT_OK(bv_hmac_key_new(NULL, 0, &k));
        ASSERT_OK(bv_hmac_key_mac(k, "abc", 3, h1));
        ASSERT_OK(bv_hmac_sha256("", 0, "abc", 3, h2));
        ASSERT_MEMEQ(h1, h2, sizeof(h1));
        bv_hmac_key_free(k);
}

static void check_prefixes(const BvHmacKey *k, const uint8_t *data, size_t len, size_t step)
{
        size_t n = DIV_ROUND_UP(len, step);
        uint8_t (*out)[BV_HASH_SIZE] = calloc(n + 1, BV_HASH_SIZE);
        uint8_t one[BV_HASH_SIZE], canary[BV_HASH_SIZE];

        ASSERT_TRUE(out);
        memset(out[n], 0x5a, BV_HASH_SIZE);
        memcpy(canary, out[n], BV_HASH_SIZE);
        ASSERT_OK(bv_hmac_key_mac_prefixes(k, data, len, step, out));
        for (size_t i = 0; i < n; i++) {
                ASSERT_OK(bv_hmac_key_mac(k, data, MIN((i + 1) * step, len), one));
                ASSERT_MEMEQ(out[i], one, BV_HASH_SIZE);
        }
        /* Nothing written past the last prefix. */
        ASSERT_MEMEQ(out[n], canary, BV_HASH_SIZE);
        free(out);
}

TEST(hmac_prefixes)
{
        static const size_t lens[] = { 1, 63, 64, 65, 4095, 4096, 4097, 8192, 12289, 65536, 65537 };
        static const size_t steps[] = { 1, 7, 64, 4096, 100000 };
        size_t len = 65537;
        uint8_t *data = malloc(len);
        BvHmacKey *k = NULL;

        ASSERT_TRUE(data);
        bvtest_fill_random(data, len, 42);
        ASSERT_OK(bv_hmac_key_new("prefix key", 10, &k));
        for (size_t i = 0; i < ELEMENTSOF(lens); i++)
                for (size_t j = 0; j < ELEMENTSOF(steps); j++) {
                        if (steps[j] == 1 && lens[i] > 4097)
                                continue; /* quadratic check; small lengths cover step 1 */
                        check_prefixes(k, data, lens[i], steps[j]);
                }
        /* len 0: no prefixes, nothing written. */
        ASSERT_EQ(bv_hmac_key_mac_prefixes(k, data, 0, 4096, NULL), 0);
        bv_hmac_key_free(k);
        free(data);
}

TEST(hmac_errors)
{
        uint8_t h[BV_HASH_SIZE], out[2][BV_HASH_SIZE];
        BvHmacKey *k = NULL;

        ASSERT_ERROR(bv_hmac_key_new(NULL, 5, &k), EINVAL);
        ASSERT_ERROR(bv_hmac_key_new("k", 1, NULL), EINVAL);
        ASSERT_TRUE(k == NULL);
        ASSERT_ERROR(bv_hmac_sha256(NULL, 3, "abc", 3, h), EINVAL);
        ASSERT_OK(bv_hmac_key_new("k", 1, &k));
        ASSERT_ERROR(bv_hmac_key_mac(k, NULL, 3, h), EINVAL);
        ASSERT_ERROR(bv_hmac_key_mac(NULL, "abc", 3, h), EINVAL);
        ASSERT_ERROR(bv_hmac_key_mac_prefixes(k, "abc", 3, 0, out), EINVAL);
        ASSERT_ERROR(bv_hmac_key_mac_prefixes(k, NULL, 3, 2, out), EINVAL);
        ASSERT_ERROR(bv_hmac_key_mac_prefixes(k, "abc", 3, 2, NULL), EINVAL);
        bv_hmac_key_free(k);
}

TEST(hkdf_rfc5869)
{
        static const char info1[] = "\xf0\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9";
        uint8_t ikm[22], salt[13], okm[42], want[42];

        memset(ikm, 0x0b, sizeof(ikm));
        for (size_t i = 0; i < sizeof(salt); i++)
                salt[i] = (uint8_t)i;
        /* Test case 1 */
        ASSERT_OK(bv_hkdf_sha256(ikm, sizeof(ikm), salt, sizeof(salt), info1, okm, sizeof(okm)));
        unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", want,
              sizeof(want));
        ASSERT_MEMEQ(okm, want, sizeof(okm));
        /* Test case 3: empty salt and info */
        ASSERT_OK(bv_hkdf_sha256(ikm, sizeof(ikm), NULL, 0, "", okm, sizeof(okm)));
        unhex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8", want,
              sizeof(want));
        ASSERT_MEMEQ(okm, want, sizeof(okm));
        ASSERT_OK(bv_hkdf_sha256(ikm, sizeof(ikm), "", 0, NULL, okm, sizeof(okm)));
        ASSERT_MEMEQ(okm, want, sizeof(okm));
}

TEST(hkdf_errors)
{
        uint8_t okm[255 * BV_HASH_SIZE + 1];

        ASSERT_ERROR(bv_hkdf_sha256("k", 1, NULL, 0, "x", okm, sizeof(okm)), EINVAL);
        ASSERT_OK(bv_hkdf_sha256("k", 1, NULL, 0, "x", okm, sizeof(okm) - 1));
        ASSERT_ERROR(bv_hkdf_sha256("k", 1, NULL, 0, "x", okm, 0), EINVAL);
        ASSERT_ERROR(bv_hkdf_sha256("k", 1, NULL, 0, "x", NULL, 32), EINVAL);
        ASSERT_ERROR(bv_hkdf_sha256(NULL, 1, NULL, 0, "x", okm, 32), EINVAL);
        ASSERT_ERROR(bv_hkdf_sha256("k", 1, NULL, 4, "x", okm, 32), EINVAL);
}

/* Many threads MAC with one shared key at once; each must get the single-threaded answer. */
typedef struct {
        const BvHmacKey *k;
        const uint8_t *data;
        size_t len;
        const uint8_t *want; /* prefixes of data, step 4096 */
        int ok;
} ThreadArg;

static void *mac_thread(void *p)
{
        ThreadArg *a = p;
        size_t n = DIV_ROUND_UP(a->len, 4096);
        uint8_t (*out)[BV_HASH_SIZE] = calloc(n, BV_HASH_SIZE);
        uint8_t h[BV_HASH_SIZE];

        a->ok = !!out;
        for (int i = 0; a->ok && i < 50; i++) {
                if (bv_hmac_key_mac_prefixes(a->k, a->data, a->len, 4096, out) < 0 ||
                    memcmp(out, a->want, n * BV_HASH_SIZE) != 0)
                        a->ok = 0;
                if (bv_hmac_key_mac(a->k, a->data, a->len, h) < 0 ||
                    memcmp(h, a->want + (n - 1) * BV_HASH_SIZE, BV_HASH_SIZE) != 0)
                        a->ok = 0;
        }
        free(out);
        return NULL;
}

TEST(hmac_threads)
{
        size_t len = 65536 + 123, n = DIV_ROUND_UP(len, 4096);
        uint8_t *data = malloc(len), (*want)[BV_HASH_SIZE] = calloc(n, BV_HASH_SIZE);
        pthread_t th[4];
        ThreadArg args[4];
        BvHmacKey *k = NULL;

        ASSERT_TRUE(data && want);
        bvtest_fill_random(data, len, 7);
        ASSERT_OK(bv_hmac_key_new("shared", 6, &k));
        ASSERT_OK(bv_hmac_key_mac_prefixes(k, data, len, 4096, want));
        for (size_t i = 0; i < ELEMENTSOF(th); i++) {
                args[i] = (ThreadArg){ .k = k, .data = data, .len = len, .want = want[0] };
                ASSERT_EQ(pthread_create(&th[i], NULL, mac_thread, &args[i]), 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(th); i++) {
                ASSERT_EQ(pthread_join(th[i], NULL), 0);
                ASSERT_TRUE(args[i].ok);
        }
        bv_hmac_key_free(k);
        free(want);
        free(data);
}

int main(void)
{
        RUN(sha256_kat);
        RUN(hmac_rfc4231);
        RUN(hmac_key_reuse);
        RUN(hmac_prefixes);
        RUN(hmac_errors);
        RUN(hkdf_rfc5869);
        RUN(hkdf_errors);
        RUN(hmac_threads);
        return 0;
}
