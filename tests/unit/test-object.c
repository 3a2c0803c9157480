/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "aead.h"
#include "bvtest.h"
#include "endian.h"
#include "keyring.h"
#include "macro.h"
#include "object.h"

#define AAD_SIZE (4 + 1 + BV_ID_SIZE)

static const BvCipher ciphers[] = { BV_CIPHER_NONE, BV_CIPHER_AES256GCM };

static BvKeyring *keyring_for(BvCipher cipher, uint64_t seed)
{
        uint8_t master[BV_MASTER_SIZE] = { 0 }, repo_id[BV_REPO_ID_SIZE];
        BvKeyring *k;

        if (cipher != BV_CIPHER_NONE)
                bvtest_fill_random(master, sizeof(master), seed);
        bvtest_fill_random(repo_id, sizeof(repo_id), 77);
        ASSERT_OK(bv_keyring_new(cipher, master, repo_id, &k));
        return k;
}

/* An id that decoding will accept for this content. */
static void id_for(const BvKeyring *k, BvObjectType type, const void *data, size_t len, uint8_t id[BV_ID_SIZE])
{
        if (type == BV_OBJ_CHUNK)
                bv_keyring_id(k, BV_ID_CHUNK, data, len, id);
        else if (type == BV_OBJ_MAP)
                bv_keyring_id(k, BV_ID_MAP, data, len, id);
        else
                bvtest_fill_random(id, BV_ID_SIZE, 1000 + type);
}

/* Seals a hand-made plaintext (header || payload || padding) as an object would be. */
static size_t craft(const BvKeyring *k, BvObjectType type, const uint8_t id[BV_ID_SIZE], const uint8_t *pt,
                    size_t pt_len, uint8_t *out)
{
        uint8_t aad[AAD_SIZE];
        BvAead *a;

        memcpy(aad, "BVO1", 4);
        aad[4] = (uint8_t)type;
        memcpy(aad + 5, id, BV_ID_SIZE);
        bvtest_fill_random(out, BV_NONCE_SIZE, 5);
        ASSERT_OK(bv_aead_new(bv_keyring_cipher(k), bv_keyring_data_key(k), &a));
        ASSERT_OK(bv_aead_seal(a, out, aad, sizeof(aad), pt, pt_len, out + BV_NONCE_SIZE,
                               out + BV_NONCE_SIZE + pt_len));
        bv_aead_free(a);
        return BV_NONCE_SIZE + pt_len + BV_TAG_SIZE;
}

/* A plaintext for a raw object holding len copies of byte b, padded as the cipher wants. */
static size_t raw_plain(const BvKeyring *k, BvObjectType type, uint8_t b, size_t len, uint8_t *pt)
{
        size_t total = BV_OBJECT_HEADER_SIZE + len;

        if (bv_keyring_cipher(k) != BV_CIPHER_NONE)
                total = (size_t)bv_padme(total);
        memset(pt, 0, total);
        pt[0] = (uint8_t)type;
        pt[1] = 0;
        put_le32(pt + 4, (uint32_t)len);
        memset(pt + BV_OBJECT_HEADER_SIZE, b, len);
        return total;
}

TEST(padme)
{
        ASSERT_EQ(bv_padme(0), 0);
        ASSERT_EQ(bv_padme(1), 1);
        ASSERT_EQ(bv_padme(9), 10);
        ASSERT_EQ(bv_padme(100), 104);
        ASSERT_EQ(bv_padme(1000), 1024);
        ASSERT_EQ(bv_padme(8 + 4096), 4352);
        for (uint64_t l = 1, prev = 0; l < (1u << 22); l = l * 3 / 2 + 1) {
                uint64_t p = bv_padme(l);
                ASSERT_TRUE(p >= l && p >= prev);
                ASSERT_TRUE(p - l <= l / 8 + 1); /* at most 12% overhead */
                ASSERT_EQ(bv_padme(p), p);
                prev = p;
        }
}

static void roundtrip_one(BvObjectCodec *c, const BvKeyring *k, BvObjectType type, const uint8_t *data,
                          size_t len, bool expect_smaller)
{
        _cleanup_free_ uint8_t *enc = malloc(bv_object_bound(len)), *dec = malloc(len + 1), *alloc = NULL;
        uint8_t id[BV_ID_SIZE];
        size_t enc_len = 0, dec_len = 0, alloc_len = 0;

        ASSERT_TRUE(enc && dec);
        id_for(k, type, data, len, id);
        ASSERT_OK(bv_object_encode(c, type, id, data, len, enc, &enc_len));
        ASSERT_TRUE(enc_len <= bv_object_bound(len));
        if (bv_keyring_cipher(k) != BV_CIPHER_NONE) /* padded to a Padmé length */
                ASSERT_EQ(bv_padme(enc_len - BV_NONCE_SIZE - BV_TAG_SIZE), enc_len - BV_NONCE_SIZE - BV_TAG_SIZE);
        if (expect_smaller)
                ASSERT_TRUE(enc_len < len);
        if (bv_keyring_cipher(k) == BV_CIPHER_NONE && !expect_smaller)
                ASSERT_EQ(enc_len, BV_NONCE_SIZE + BV_OBJECT_HEADER_SIZE + len + BV_TAG_SIZE);
        ASSERT_OK(bv_object_decode(c, type, id, enc, enc_len, dec, len, &dec_len));
        ASSERT_EQ(dec_len, len);
        if (len > 0)
                ASSERT_MEMEQ(dec, data, len);
        ASSERT_OK(bv_object_decode_alloc(c, type, id, enc, enc_len, (void **)&alloc, &alloc_len));
        ASSERT_EQ(alloc_len, len);
        if (len > 0)
                ASSERT_MEMEQ(alloc, data, len);
}

TEST(roundtrip_every_type_and_cipher)
{
        size_t len = 256 * 1024;
        _cleanup_free_ uint8_t *text = malloc(len), *noise = malloc(len);

        ASSERT_TRUE(text && noise);
        for (size_t i = 0; i < len; i++)
                text[i] = "blkvault backs up block devices. "[i % 33];
        bvtest_fill_random(noise, len, 42);

        for (size_t ci = 0; ci < ELEMENTSOF(ciphers); ci++) {
                BvKeyring *k = keyring_for(ciphers[ci], 1);
                for (int level = 0; level <= 3; level += 3) {
                        BvObjectCodec *c;
                        ASSERT_OK(bv_object_codec_new(k, level, &c));
                        for (int t = BV_OBJ_CHUNK; t <= BV_OBJ_PACKINDEX; t++) {
                                roundtrip_one(c, k, t, text, len, level != 0);
                                roundtrip_one(c, k, t, noise, len, false);
                                roundtrip_one(c, k, t, noise, 1, false);
                                roundtrip_one(c, k, t, noise, 4096, false);
                                roundtrip_one(c, k, t, NULL, 0, false);
                        }
                        bv_object_codec_free(c);
                }
                bv_keyring_free(k);
        }
}

TEST(max_size)
{
        size_t len = BV_OBJECT_MAX_RAW;
        _cleanup_free_ uint8_t *data = malloc(len + 1), *enc = malloc(bv_object_bound(len + 1));
        uint8_t id[BV_ID_SIZE] = { 0 };
        size_t enc_len;

        ASSERT_TRUE(data && enc);
        bvtest_fill_random(data, len + 1, 9);
        for (size_t ci = 0; ci < ELEMENTSOF(ciphers); ci++) {
                BvKeyring *k = keyring_for(ciphers[ci], 2);
                BvObjectCodec *c;
                ASSERT_OK(bv_object_codec_new(k, 1, &c));
                roundtrip_one(c, k, BV_OBJ_CHUNK, data, len, false);
                ASSERT_ERROR(bv_object_encode(c, BV_OBJ_CHUNK, id, data, len + 1, enc, &enc_len), EFBIG);
                ASSERT_ERROR(bv_object_encode(c, 0, id, data, 1, enc, &enc_len), EINVAL);
                bv_object_codec_free(c);
                bv_keyring_free(k);
        }
}

/* Flipping any bit of any byte of an encoded object is detected. */
TEST(every_byte_flip_is_caught)
{
        uint8_t data[300], enc[512], dec[300];
        uint8_t id[BV_ID_SIZE];
        size_t enc_len, dec_len;
        void *alloc = NULL; /* decode_alloc fails before it allocates */

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = i < 150 ? 'a' : (uint8_t)(i * 7);
        for (size_t ci = 0; ci < ELEMENTSOF(ciphers); ci++) {
                BvKeyring *k = keyring_for(ciphers[ci], 3);
                BvObjectCodec *c;
                ASSERT_OK(bv_object_codec_new(k, 3, &c));
                for (int t = BV_OBJ_CHUNK; t <= BV_OBJ_PACKINDEX; t++) {
                        id_for(k, t, data, sizeof(data), id);
                        ASSERT_OK(bv_object_encode(c, t, id, data, sizeof(data), enc, &enc_len));
                        dec_len = 12345;
                        for (size_t i = 0; i < enc_len; i++) {
                                /* with cipher none the nonce is not authenticated: it is zero
                                 * and unused, so changing it changes nothing */
                                if (ciphers[ci] == BV_CIPHER_NONE && i < BV_NONCE_SIZE)
                                        continue;
                                enc[i] ^= (uint8_t)(1u << (i % 8));
                                ASSERT_ERROR(bv_object_decode(c, t, id, enc, enc_len, dec, sizeof(dec),
                                                              &dec_len),
                                             EBADMSG);
                                ASSERT_ERROR(bv_object_decode_alloc(c, t, id, enc, enc_len, &alloc, &dec_len),
                                             EBADMSG);
                                enc[i] ^= (uint8_t)(1u << (i % 8));
                        }
                        ASSERT_EQ(dec_len, 12345); /* untouched on failure */
                        /* truncated or extended */
                        ASSERT_ERROR(bv_object_decode(c, t, id, enc, enc_len - 1, dec, sizeof(dec), &dec_len),
                                     EBADMSG);
                        ASSERT_ERROR(bv_object_decode(c, t, id, enc, 20, dec, sizeof(dec), &dec_len), EBADMSG);
                        ASSERT_ERROR(bv_object_decode(c, t, id, enc, 0, dec, sizeof(dec), &dec_len), EBADMSG);
                        ASSERT_OK(bv_object_decode(c, t, id, enc, enc_len, dec, sizeof(dec), &dec_len));
                }
                bv_object_codec_free(c);
                bv_keyring_free(k);
        }
}

TEST(wrong_id_type_or_key)
{
        uint8_t data[1000], enc[1100], dec[1000], id[BV_ID_SIZE], other[BV_ID_SIZE];
        size_t enc_len, dec_len;

        bvtest_fill_random(data, sizeof(data), 4);
        for (size_t ci = 0; ci < ELEMENTSOF(ciphers); ci++) {
                BvKeyring *k = keyring_for(ciphers[ci], 5), *k2 = keyring_for(ciphers[ci], 6);
                BvObjectCodec *c, *c2;
                ASSERT_OK(bv_object_codec_new(k, 3, &c));
                ASSERT_OK(bv_object_codec_new(k2, 3, &c2));
                for (int t = BV_OBJ_CHUNK; t <= BV_OBJ_PACKINDEX; t++) {
                        id_for(k, t, data, sizeof(data), id);
                        ASSERT_OK(bv_object_encode(c, t, id, data, sizeof(data), enc, &enc_len));
                        memcpy(other, id, sizeof(other));
                        other[31] ^= 1;
                        ASSERT_ERROR(bv_object_decode(c, t, other, enc, enc_len, dec, sizeof(dec), &dec_len),
                                     EBADMSG);
                        ASSERT_ERROR(bv_object_decode(c, t % 4 + 1, id, enc, enc_len, dec, sizeof(dec),
                                                      &dec_len),
                                     EBADMSG);
                        if (ciphers[ci] != BV_CIPHER_NONE)
                                ASSERT_ERROR(bv_object_decode(c2, t, id, enc, enc_len, dec, sizeof(dec),
                                                              &dec_len),
                                             EBADMSG);
                        /* authentic, but the caller's buffer is too small */
                        ASSERT_ERROR(bv_object_decode(c, t, id, enc, enc_len, dec, sizeof(dec) - 1, &dec_len),
                                     ENOBUFS);
                }
                /* an authentic chunk whose content does not hash to its id */
                bvtest_fill_random(id, sizeof(id), 8);
                ASSERT_OK(bv_object_encode(c, BV_OBJ_CHUNK, id, data, sizeof(data), enc, &enc_len));
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_CHUNK, id, enc, enc_len, dec, sizeof(dec), &dec_len),
                             EBADMSG);
                ASSERT_OK(bv_object_encode(c, BV_OBJ_MAP, id, data, sizeof(data), enc, &enc_len));
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_MAP, id, enc, enc_len, dec, sizeof(dec), &dec_len),
                             EBADMSG);
                bv_object_codec_free(c);
                bv_object_codec_free(c2);
                bv_keyring_free(k);
                bv_keyring_free(k2);
        }
}

/* Authentic objects with a bad header or padding, crafted by sealing hand-made plaintexts. */
TEST(crafted_headers)
{
        uint8_t pt[256], enc[512], dec[256], id[BV_ID_SIZE];
        size_t n, len, dec_len;
        void *alloc = NULL; /* decode_alloc fails before it allocates */

        bvtest_fill_random(id, sizeof(id), 11);
        for (size_t ci = 0; ci < ELEMENTSOF(ciphers); ci++) {
                BvKeyring *k = keyring_for(ciphers[ci], 12);
                BvObjectCodec *c;
                ASSERT_OK(bv_object_codec_new(k, 3, &c));

                /* the crafting itself is right: a well-formed plaintext decodes */
                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 100, pt);
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_OK(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len));
                ASSERT_EQ(dec_len, 100);

                pt[1] = 7; /* unknown codec */
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len),
                             EPROTONOSUPPORT);
                ASSERT_ERROR(bv_object_decode_alloc(c, BV_OBJ_SNAPSHOT, id, enc, len, &alloc, &dec_len),
                             EPROTONOSUPPORT);

                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 100, pt);
                pt[3] = 1; /* reserved */
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len),
                             EBADMSG);

                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 100, pt);
                pt[0] = BV_OBJ_MAP; /* header type differs from the AAD's */
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len),
                             EBADMSG);

                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 100, pt);
                put_le32(pt + 4, 200); /* raw length past the payload */
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len),
                             EBADMSG);
                put_le32(pt + 4, BV_OBJECT_MAX_RAW + 1);
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_ERROR(bv_object_decode_alloc(c, BV_OBJ_SNAPSHOT, id, enc, len, &alloc, &dec_len), EBADMSG);

                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 100, pt);
                pt[n] = 0; /* one byte too many: not the canonical padding */
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n + 1, enc);
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len),
                             EBADMSG);

                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 99, pt);
                if (n > BV_OBJECT_HEADER_SIZE + 99) {
                        pt[n - 1] = 1; /* padding that is not zero */
                        len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                        ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec),
                                                      &dec_len),
                                     EBADMSG);
                }

                n = raw_plain(k, BV_OBJ_SNAPSHOT, 'x', 100, pt);
                pt[1] = 1; /* claims zstd, holds no frame */
                len = craft(k, BV_OBJ_SNAPSHOT, id, pt, n, enc);
                ASSERT_ERROR(bv_object_decode(c, BV_OBJ_SNAPSHOT, id, enc, len, dec, sizeof(dec), &dec_len),
                             EBADMSG);
                bv_object_codec_free(c);
                bv_keyring_free(k);
        }
}

/* Encrypted repositories: compressed chunks are padded to 64 bytes, raw chunks and every other
 * object to Padmé; a decoder accepts only the canonical length. */
TEST(padding_per_kind)
{
        _cleanup_free_ uint8_t *text = malloc(20000), *noise = malloc(5000), *out = malloc(bv_object_bound(20000)),
                               *back = malloc(20000);
        BvKeyring *k = keyring_for(BV_CIPHER_AES256GCM, 9);
        BvObjectCodec *c;
        uint8_t id[BV_ID_SIZE];
        size_t len, raw;

        for (size_t i = 0; i < 20000; i++)
                text[i] = (uint8_t)("blkvault pads compressed chunks lightly "[i % 40] + (i / 4000));
        bvtest_fill_random(noise, 5000, 3);
        ASSERT_OK(bv_object_codec_new(k, 3, &c));

        id_for(k, BV_OBJ_CHUNK, text, 20000, id);
        ASSERT_OK(bv_object_encode(c, BV_OBJ_CHUNK, id, text, 20000, out, &len));
        ASSERT_TRUE(len < 20000 / 2);                           /* it was compressed */
        ASSERT_EQ((len - BV_NONCE_SIZE - BV_TAG_SIZE) % 64, 0);
        ASSERT_OK(bv_object_decode(c, BV_OBJ_CHUNK, id, out, len, back, 20000, &raw));
        ASSERT_EQ(raw, 20000);

        id_for(k, BV_OBJ_CHUNK, noise, 5000, id);
        ASSERT_OK(bv_object_encode(c, BV_OBJ_CHUNK, id, noise, 5000, out, &len));
        ASSERT_EQ(len, BV_NONCE_SIZE + BV_TAG_SIZE + bv_padme(BV_OBJECT_HEADER_SIZE + 5000));

        id_for(k, BV_OBJ_MAP, text, 20000, id);
        ASSERT_OK(bv_object_encode(c, BV_OBJ_MAP, id, text, 20000, out, &len));
        size_t padded = len - BV_NONCE_SIZE - BV_TAG_SIZE;
        ASSERT_EQ(bv_padme(padded), padded);                   /* a Padmé length */

        /* a small compressible chunk: 64-byte rounding can pass Padmé of its raw length, and
         * the bound still covers it */
        memset(text, 'a', 100);
        id_for(k, BV_OBJ_CHUNK, text, 100, id);
        ASSERT_OK(bv_object_encode(c, BV_OBJ_CHUNK, id, text, 100, out, &len));
        ASSERT_TRUE(len <= bv_object_bound(100));
        ASSERT_OK(bv_object_decode(c, BV_OBJ_CHUNK, id, out, len, back, 100, &raw));

        bv_object_codec_free(c);
        bv_keyring_free(k);
}

TEST(random_nonces)
{
        BvKeyring *k = keyring_for(BV_CIPHER_AES256GCM, 13);
        BvObjectCodec *c;
        uint8_t data[64] = { 0 }, a[200], b[200], id[BV_ID_SIZE] = { 0 };
        size_t la, lb;

        ASSERT_OK(bv_object_codec_new(k, 0, &c));
        ASSERT_OK(bv_object_encode(c, BV_OBJ_SNAPSHOT, id, data, sizeof(data), a, &la));
        ASSERT_OK(bv_object_encode(c, BV_OBJ_SNAPSHOT, id, data, sizeof(data), b, &lb));
        ASSERT_EQ(la, lb);
        ASSERT_TRUE(memcmp(a, b, BV_NONCE_SIZE) != 0);
        ASSERT_TRUE(memcmp(a + BV_NONCE_SIZE, b + BV_NONCE_SIZE, la - BV_NONCE_SIZE) != 0);
        bv_object_codec_free(c);
        bv_keyring_free(k);
}

int main(void)
{
        RUN(padme);
        RUN(roundtrip_every_type_and_cipher);
        RUN(max_size);
        RUN(every_byte_flip_is_caught);
        RUN(wrong_id_type_or_key);
        RUN(crafted_headers);
        RUN(padding_per_kind);
        RUN(random_nonces);
        return 0;
}
