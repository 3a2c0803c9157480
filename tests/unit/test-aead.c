/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* AES-256-GCM against the GCM specification's test cases 13-16 (McGrew and Viega), the
 * NONE cipher's checksum tag, and every way a ciphertext can fail to open. */
#include "aead.h"
#include "bvtest.h"
#include "hash.h"
#include "hex.h"
#include "macro.h"

static const char K15[] = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
static const char IV15[] = "cafebabefacedbaddecaf888";
static const char P15[] = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                          "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";
static const char C15[] = "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                          "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad";
static const char A16[] = "feedfacedeadbeeffeedfacedeadbeefabaddad2";

static void unhex(const char *s, void *out, size_t len)
{
        ASSERT_EQ(strlen(s), 2 * len);
        ASSERT_OK(bv_hex_decode(s, out, len));
}

/* Seals p under key/iv/aad, compares with c and tag, then opens it back (also in place). */
static void check_vector(const char *key_hex, const char *iv_hex, const char *aad_hex, const char *p_hex,
                         const char *c_hex, const char *tag_hex)
{
        size_t len = strlen(p_hex) / 2, aad_len = strlen(aad_hex) / 2;
        uint8_t key[BV_KEY_SIZE], iv[BV_NONCE_SIZE], tag[BV_TAG_SIZE], want_tag[BV_TAG_SIZE];
        uint8_t p[64], c[64], want_c[64], back[64], aad[20];
        BvAead *a = NULL;

        ASSERT_TRUE(len <= sizeof(p) && aad_len <= sizeof(aad));
        unhex(key_hex, key, sizeof(key));
        unhex(iv_hex, iv, sizeof(iv));
        unhex(aad_hex, aad, aad_len);
        unhex(p_hex, p, len);
        unhex(c_hex, want_c, len);
        unhex(tag_hex, want_tag, sizeof(want_tag));

        ASSERT_OK(bv_aead_new(BV_CIPHER_AES256GCM, key, &a));
        /* Twice: the context is reused with only a new nonce. */
        for (int round = 0; round < 2; round++) {
                ASSERT_OK(bv_aead_seal(a, iv, aad, aad_len, p, len, c, tag));
                ASSERT_MEMEQ(c, want_c, len);
                ASSERT_MEMEQ(tag, want_tag, sizeof(tag));
                ASSERT_OK(bv_aead_open(a, iv, aad, aad_len, c, len, back, tag));
                ASSERT_MEMEQ(back, p, len);
        }
        /* In place. */
        memcpy(back, p, len);
        ASSERT_OK(bv_aead_seal(a, iv, aad, aad_len, back, len, back, tag));
        ASSERT_MEMEQ(back, want_c, len);
        ASSERT_OK(bv_aead_open(a, iv, aad, aad_len, back, len, back, tag));
        ASSERT_MEMEQ(back, p, len);
        bv_aead_free(a);
}

TEST(gcm_spec_vectors)
{
        static const char Z32[] = "0000000000000000000000000000000000000000000000000000000000000000";
        static const char Z12[] = "000000000000000000000000";

        /* Test case 13: empty plaintext */
        check_vector(Z32, Z12, "", "", "", "530f8afbc74536b9a963b4f1c4cb738b");
        /* Test case 14 */
        check_vector(Z32, Z12, "", "00000000000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18",
                     "d0d1c8a799996bf0265b98b5d48ab919");
        /* Test case 15 */
        check_vector(K15, IV15, "", P15, C15, "b094dac5d93471bdec1a502270e3cc6c");
}

TEST(gcm_spec_vector16)
{
        char p[121], c[121];

        /* Test case 16: the first 60 bytes of case 15's plaintext, with 20 bytes of aad. */
        memcpy(p, P15, 120);
        p[120] = 0;
        memcpy(c, C15, 120);
        c[120] = 0;
        check_vector(K15, IV15, A16, p, c, "76fc6ece0f4e1768cddf8853bb2d551b");
}

/* Opening must fail with -EBADMSG and leave the output wiped. */
static void assert_open_fails(BvAead *a, const uint8_t *iv, const void *aad, size_t aad_len, const uint8_t *c,
                              size_t len, const uint8_t *tag)
{
        uint8_t out[256], zero[256] = {};

        ASSERT_TRUE(len <= sizeof(out));
        memset(out, 0xee, sizeof(out));
        ASSERT_ERROR(bv_aead_open(a, iv, aad, aad_len, c, len, out, tag), EBADMSG);
        ASSERT_MEMEQ(out, zero, len);
}

static void tamper_checks(BvCipher cipher)
{
        uint8_t key[BV_KEY_SIZE], key2[BV_KEY_SIZE], iv[BV_NONCE_SIZE], tag[BV_TAG_SIZE], bad_tag[BV_TAG_SIZE];
        uint8_t p[200], c[200], bad[200], iv2[BV_NONCE_SIZE];
        BvAead *a = NULL, *b = NULL;

        bvtest_fill_random(key, sizeof(key), 1);
        bvtest_fill_random(key2, sizeof(key2), 2);
        bvtest_fill_random(iv, sizeof(iv), 3);
        bvtest_fill_random(p, sizeof(p), 4);
        ASSERT_OK(bv_aead_new(cipher, key, &a));
        ASSERT_OK(bv_aead_new(cipher, key2, &b));
        ASSERT_OK(bv_aead_seal(a, iv, "aad", 3, p, sizeof(p), c, tag));
        if (cipher == BV_CIPHER_NONE)
                ASSERT_MEMEQ(c, p, sizeof(p));

        /* tampered ciphertext */
        memcpy(bad, c, sizeof(c));
        bad[77] ^= 0x01;
        assert_open_fails(a, iv, "aad", 3, bad, sizeof(bad), tag);
        /* tampered tag */
        memcpy(bad_tag, tag, sizeof(tag));
        bad_tag[15] ^= 0x80;
        assert_open_fails(a, iv, "aad", 3, c, sizeof(c), bad_tag);
        /* tampered or missing aad */
        assert_open_fails(a, iv, "aae", 3, c, sizeof(c), tag);
        assert_open_fails(a, iv, NULL, 0, c, sizeof(c), tag);
        /* truncated */
        assert_open_fails(a, iv, "aad", 3, c, sizeof(c) - 1, tag);
        if (cipher == BV_CIPHER_AES256GCM) {
                /* wrong key, wrong nonce */
                assert_open_fails(b, iv, "aad", 3, c, sizeof(c), tag);
                memcpy(iv2, iv, sizeof(iv));
                iv2[0] ^= 1;
                assert_open_fails(a, iv2, "aad", 3, c, sizeof(c), tag);
        }
        /* a failure leaves the context usable */
        ASSERT_OK(bv_aead_open(a, iv, "aad", 3, c, sizeof(c), bad, tag));
        ASSERT_MEMEQ(bad, p, sizeof(p));
        bv_aead_free(a);
        bv_aead_free(b);
}

TEST(gcm_tamper)
{
        tamper_checks(BV_CIPHER_AES256GCM);
}

TEST(none_tamper)
{
        tamper_checks(BV_CIPHER_NONE);
}

TEST(none_tag)
{
        uint8_t iv[BV_NONCE_SIZE] = {}, tag[BV_TAG_SIZE], want[BV_TAG_SIZE], c[10];
        BvAead *a = NULL;

        /* Any key, even none, is accepted: the key is not used. */
        ASSERT_OK(bv_aead_new(BV_CIPHER_NONE, NULL, &a));
        ASSERT_OK(bv_aead_seal(a, iv, "header", 6, "plain text", 10, c, tag));
        ASSERT_MEMEQ(c, "plain text", 10);
        /* SHA-256("header" || "plain text"), first 16 bytes (computed with Python's hashlib) */
        unhex("47b76b50d2ad4ff691d9be0abf9f3c77", want, sizeof(want));
        ASSERT_MEMEQ(tag, want, sizeof(tag));
        bv_aead_free(a);
}

TEST(cipher_names)
{
        BvCipher c = BV_CIPHER_NONE;

        ASSERT_STREQ(bv_cipher_name(BV_CIPHER_NONE), "none");
        ASSERT_STREQ(bv_cipher_name(BV_CIPHER_AES256GCM), "aes-256-gcm");
        ASSERT_TRUE(bv_cipher_name((BvCipher)7) == NULL);
        ASSERT_OK(bv_cipher_from_name("aes-256-gcm", &c));
        ASSERT_EQ(c, BV_CIPHER_AES256GCM);
        ASSERT_OK(bv_cipher_from_name("none", &c));
        ASSERT_EQ(c, BV_CIPHER_NONE);
        c = BV_CIPHER_AES256GCM;
        ASSERT_ERROR(bv_cipher_from_name("chacha20-poly1305", &c), EPROTONOSUPPORT);
        ASSERT_ERROR(bv_cipher_from_name("AES-256-GCM", &c), EPROTONOSUPPORT);
        ASSERT_ERROR(bv_cipher_from_name("", &c), EPROTONOSUPPORT);
        ASSERT_EQ(c, BV_CIPHER_AES256GCM); /* untouched on failure */
        ASSERT_ERROR(bv_cipher_from_name(NULL, &c), EINVAL);
}

TEST(aead_errors)
{
        uint8_t key[BV_KEY_SIZE] = {}, iv[BV_NONCE_SIZE] = {}, tag[BV_TAG_SIZE], buf[4];
        BvAead *a = NULL;

        ASSERT_ERROR(bv_aead_new((BvCipher)9, key, &a), EPROTONOSUPPORT);
        ASSERT_ERROR(bv_aead_new(BV_CIPHER_AES256GCM, NULL, &a), EINVAL);
        ASSERT_ERROR(bv_aead_new(BV_CIPHER_AES256GCM, key, NULL), EINVAL);
        ASSERT_TRUE(a == NULL);
        ASSERT_OK(bv_aead_new(BV_CIPHER_AES256GCM, key, &a));
        ASSERT_ERROR(bv_aead_seal(a, NULL, NULL, 0, "abcd", 4, buf, tag), EINVAL);
        ASSERT_ERROR(bv_aead_seal(a, iv, NULL, 3, "abcd", 4, buf, tag), EINVAL);
        ASSERT_ERROR(bv_aead_seal(a, iv, NULL, 0, "abcd", 4, NULL, tag), EINVAL);
        ASSERT_ERROR(bv_aead_open(a, iv, NULL, 0, buf, 4, buf, NULL), EINVAL);
        bv_aead_free(a);
        bv_aead_free(NULL);
}

TEST(gcm_large)
{
        size_t len = (1 << 20) + 17;
        uint8_t *p = malloc(len), *c = malloc(len), key[BV_KEY_SIZE], iv[BV_NONCE_SIZE], tag[BV_TAG_SIZE];
        BvAead *a = NULL;

        ASSERT_TRUE(p && c);
        bvtest_fill_random(p, len, 11);
        bvtest_fill_random(key, sizeof(key), 12);
        bvtest_fill_random(iv, sizeof(iv), 13);
        ASSERT_OK(bv_aead_new(BV_CIPHER_AES256GCM, key, &a));
        ASSERT_OK(bv_aead_seal(a, iv, NULL, 0, p, len, c, tag));
        ASSERT_TRUE(memcmp(p, c, len) != 0);
        ASSERT_OK(bv_aead_open(a, iv, NULL, 0, c, len, c, tag));
        ASSERT_MEMEQ(p, c, len);
        bv_aead_free(a);
        free(p);
        free(c);
}

int main(void)
{
        RUN(gcm_spec_vectors);
        RUN(gcm_spec_vector16);
        RUN(gcm_tamper);
        RUN(none_tamper);
        RUN(none_tag);
        RUN(cipher_names);
        RUN(aead_errors);
        RUN(gcm_large);
        return 0;
}
