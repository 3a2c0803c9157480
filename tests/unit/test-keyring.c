/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Subkeys and ids for a fixed master secret and repository id; the expected bytes were
 * computed independently with Python's hmac and hashlib (HKDF written out by hand). */
#include "bvtest.h"
#include "hex.h"
#include "keyring.h"
#include "macro.h"
#include "random.h"

static void unhex(const char *s, void *out, size_t len)
{
        ASSERT_EQ(strlen(s), 2 * len);
        ASSERT_OK(bv_hex_decode(s, out, len));
}

static void assert_bytes(const uint8_t *p, const char *hex)
{
        uint8_t want[32];

        unhex(hex, want, sizeof(want));
        ASSERT_MEMEQ(p, want, sizeof(want));
}

/* master = 00 01 .. 1f, repository id = a0 a1 .. af */
static BvKeyring *fixed_keyring(BvCipher cipher)
{
        uint8_t master[BV_MASTER_SIZE], repo_id[BV_REPO_ID_SIZE];
        BvKeyring *k = NULL;

        for (size_t i = 0; i < sizeof(master); i++)
                master[i] = (uint8_t)i;
        for (size_t i = 0; i < sizeof(repo_id); i++)
                repo_id[i] = (uint8_t)(0xa0 + i);
        ASSERT_OK(bv_keyring_new(cipher, master, repo_id, &k));
        return k;
}

TEST(subkeys_kat)
{
        BvKeyring *k = fixed_keyring(BV_CIPHER_AES256GCM);
        uint8_t id[BV_ID_SIZE];

        ASSERT_EQ(bv_keyring_cipher(k), BV_CIPHER_AES256GCM);
        assert_bytes(bv_keyring_data_key(k), "b99d5a7f523dca653a4dbc056ea7407022f480c0688a24c1dc4d3ac6f6c38314");
        assert_bytes(bv_keyring_chunker_key(k),
                     "929088d73b92c241da1294efa8abfcdee4b70fbcb513c9b0e90eb5c062b05175");
        assert_bytes(bv_keyring_config_key(k), "df6152885eed28b14052ddc67cf88769c365640afed4970577d2fcc819fef05b");
        /* chunk-id key c86c08bb..., map-id key cca5d747...: HMAC of "hello blkvault" */
        bv_keyring_id(k, BV_ID_CHUNK, "hello blkvault", 14, id);
        assert_bytes(id, "83e8f54913bc880534e2679a6fffd1c52f071b239e7321977ece1cb68a6a59b8");
        bv_keyring_id(k, BV_ID_MAP, "hello blkvault", 14, id);
        assert_bytes(id, "da50a3684c0a614b489c5f4c5ca24b021a9e700fab68164c9d05f5105c23d43e");
        bv_keyring_free(k);
        bv_keyring_free(NULL);
}

TEST(cipher_none_zero_master)
{
        uint8_t master[BV_MASTER_SIZE] = {}, repo_id[BV_REPO_ID_SIZE], id[BV_ID_SIZE];
        BvKeyring *k = NULL;

        for (size_t i = 0; i < sizeof(repo_id); i++)
                repo_id[i] = (uint8_t)(0xa0 + i);
        ASSERT_OK(bv_keyring_new(BV_CIPHER_NONE, master, repo_id, &k));
        ASSERT_EQ(bv_keyring_cipher(k), BV_CIPHER_NONE);
        bv_keyring_id(k, BV_ID_CHUNK, NULL, 0, id);
        assert_bytes(id, "5ea323016e0da41998ee7ea093ef0014fd1b87bf8399991643f4873e5cbf1593");
        bv_keyring_free(k);
}

TEST(id_prefixes)
{
        BvKeyring *k = fixed_keyring(BV_CIPHER_AES256GCM);
        size_t len = 65536 + 5, n = DIV_ROUND_UP(len, 4096);
        uint8_t *data = malloc(len), (*ids)[BV_ID_SIZE] = calloc(n, BV_ID_SIZE), one[BV_ID_SIZE];

        ASSERT_TRUE(data && ids);
        bvtest_fill_random(data, len, 5);
        for (BvIdKind kind = BV_ID_CHUNK; kind <= BV_ID_MAP; kind++) {
                bv_keyring_id_prefixes(k, kind, data, len, 4096, ids);
                for (size_t i = 0; i < n; i++) {
                        bv_keyring_id(k, kind, data, MIN((i + 1) * 4096, len), one);
                        ASSERT_MEMEQ(ids[i], one, BV_ID_SIZE);
                }
        }
        /* The two kinds never share ids. */
        bv_keyring_id(k, BV_ID_MAP, data, len, one);
        bv_keyring_id_prefixes(k, BV_ID_CHUNK, data, len, 4096, ids);
        ASSERT_TRUE(memcmp(ids[n - 1], one, BV_ID_SIZE) != 0);
        bv_keyring_free(k);
        free(data);
        free(ids);
}

TEST(repo_id_separates)
{
        uint8_t master[BV_MASTER_SIZE] = {}, r1[BV_REPO_ID_SIZE] = {}, r2[BV_REPO_ID_SIZE] = {};
        uint8_t a[BV_ID_SIZE], b[BV_ID_SIZE];
        BvKeyring *k1 = NULL, *k2 = NULL;

        ASSERT_OK(bv_random_bytes(master, sizeof(master)));
        r2[15] = 1;
        ASSERT_OK(bv_keyring_new(BV_CIPHER_AES256GCM, master, r1, &k1));
        ASSERT_OK(bv_keyring_new(BV_CIPHER_AES256GCM, master, r2, &k2));
        bv_keyring_id(k1, BV_ID_CHUNK, "x", 1, a);
        bv_keyring_id(k2, BV_ID_CHUNK, "x", 1, b);
        ASSERT_TRUE(memcmp(a, b, sizeof(a)) != 0);
        ASSERT_TRUE(memcmp(bv_keyring_data_key(k1), bv_keyring_data_key(k2), BV_KEY_SIZE) != 0);
        bv_keyring_free(k1);
        bv_keyring_free(k2);
}

TEST(keyring_errors)
{
        uint8_t master[BV_MASTER_SIZE] = {}, repo_id[BV_REPO_ID_SIZE] = {};
        BvKeyring *k = NULL;

        ASSERT_ERROR(bv_keyring_new((BvCipher)5, master, repo_id, &k), EPROTONOSUPPORT);
        ASSERT_ERROR(bv_keyring_new(BV_CIPHER_AES256GCM, NULL, repo_id, &k), EINVAL);
        ASSERT_ERROR(bv_keyring_new(BV_CIPHER_AES256GCM, master, NULL, &k), EINVAL);
        ASSERT_ERROR(bv_keyring_new(BV_CIPHER_AES256GCM, master, repo_id, NULL), EINVAL);
        ASSERT_TRUE(k == NULL);
}

TEST(random)
{
        uint8_t a[64] = {}, b[64] = {}, zero[64] = {};

        ASSERT_OK(bv_random_bytes(a, sizeof(a)));
        ASSERT_OK(bv_random_bytes(b, sizeof(b)));
        ASSERT_TRUE(memcmp(a, b, sizeof(a)) != 0);
        ASSERT_TRUE(memcmp(a, zero, sizeof(a)) != 0);
        ASSERT_OK(bv_random_bytes(NULL, 0));
        ASSERT_ERROR(bv_random_bytes(NULL, 4), EINVAL);
}

int main(void)
{
        RUN(subkeys_kat);
        RUN(cipher_none_zero_master);
        RUN(id_prefixes);
        RUN(repo_id_separates);
        RUN(keyring_errors);
        RUN(random);
        return 0;
}
