/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "keyring.h"
#include "macro.h"
#include "secmem.h"

/* Offsets of the subkeys kept in the keyring's locked buffer. */
enum {
        KEY_DATA,
        KEY_CHUNKER,
        KEY_CONFIG,
        KEY_CHUNK_ID,
        KEY_MAP_ID,
        KEY_COUNT,
};

static const char *const key_labels[KEY_COUNT] = {
        [KEY_DATA] = "blkvault v1 data",
        [KEY_CHUNKER] = "blkvault v1 chunker",
        [KEY_CONFIG] = "blkvault v1 config",
        [KEY_CHUNK_ID] = "blkvault v1 chunk-id",
        [KEY_MAP_ID] = "blkvault v1 map-id",
};

#define KEYS_SIZE (KEY_COUNT * BV_KEY_SIZE)

struct BvKeyring {
        BvCipher cipher;
        uint8_t *keys; /* bv_secure_alloc(KEYS_SIZE) */
        BvHmacKey *chunk_id;
        BvHmacKey *map_id;
};

void bv_keyring_free(BvKeyring *k)
{
        if (!k)
                return;
        bv_secure_free(k->keys, KEYS_SIZE);
        bv_hmac_key_free(k->chunk_id);
        bv_hmac_key_free(k->map_id);
        free(k);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvKeyring, bv_keyring_free);

/* The HMAC contexts of k's id keys, from k->keys. */
static int keyring_hmac_keys(BvKeyring *k)
{
        int r = bv_hmac_key_new(k->keys + KEY_CHUNK_ID * BV_KEY_SIZE, BV_KEY_SIZE, &k->chunk_id);
        if (r < 0)
                return r;
        return bv_hmac_key_new(k->keys + KEY_MAP_ID * BV_KEY_SIZE, BV_KEY_SIZE, &k->map_id);
}

int bv_keyring_new(BvCipher cipher, const uint8_t master[BV_MASTER_SIZE],
                   const uint8_t repo_id[BV_REPO_ID_SIZE], BvKeyring **ret)
{
        _cleanup_(bv_keyring_freep) BvKeyring *k = NULL;
        int r;

        if (!master || !repo_id || !ret)
                return -EINVAL;
        if (!bv_cipher_name(cipher))
                return -EPROTONOSUPPORT;

        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->cipher = cipher;
        k->keys = bv_secure_alloc(KEYS_SIZE);
        if (!k->keys)
                return -ENOMEM;
        for (size_t i = 0; i < KEY_COUNT; i++) {
                r = bv_hkdf_sha256(master, BV_MASTER_SIZE, repo_id, BV_REPO_ID_SIZE, key_labels[i],
                                   k->keys + i * BV_KEY_SIZE, BV_KEY_SIZE);
                if (r < 0)
                        return r;
        }
        r = keyring_hmac_keys(k);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(k);
        return 0;
}

int bv_keyring_dup(const BvKeyring *k, BvKeyring **ret)
{
        _cleanup_(bv_keyring_freep) BvKeyring *d = NULL;
        int r;

        if (!k || !ret)
                return -EINVAL;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->cipher = k->cipher;
        d->keys = bv_secure_alloc(KEYS_SIZE);
        if (!d->keys)
                return -ENOMEM;
        memcpy(d->keys, k->keys, KEYS_SIZE);
        r = keyring_hmac_keys(d);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(d);
        return 0;
}

BvCipher bv_keyring_cipher(const BvKeyring *k)
{
        return k->cipher;
}

const uint8_t *bv_keyring_data_key(const BvKeyring *k)
{
        return k->keys + KEY_DATA * BV_KEY_SIZE;
}

const uint8_t *bv_keyring_chunker_key(const BvKeyring *k)
{
        return k->keys + KEY_CHUNKER * BV_KEY_SIZE;
}

const uint8_t *bv_keyring_config_key(const BvKeyring *k)
{
        return k->keys + KEY_CONFIG * BV_KEY_SIZE;
}

static const BvHmacKey *id_key(const BvKeyring *k, BvIdKind kind)
{
        switch (kind) {
        case BV_ID_CHUNK:
                return k->chunk_id;
        case BV_ID_MAP:
                return k->map_id;
        }
        abort(); /* a caller bug: there is no other kind */
}

/* The id functions cannot fail with valid arguments except on allocation failure inside
 * libcrypto; an id that silently is not computed would corrupt the repository, so abort. */
void bv_keyring_id(const BvKeyring *k, BvIdKind kind, const void *data, size_t len, uint8_t out[BV_ID_SIZE])
{
        if (bv_hmac_key_mac(id_key(k, kind), data, len, out) < 0)
                abort();
}

void bv_keyring_id_prefixes(const BvKeyring *k, BvIdKind kind, const void *data, size_t len, size_t step,
                            uint8_t (*out)[BV_ID_SIZE])
{
        if (bv_hmac_key_mac_prefixes(id_key(k, kind), data, len, step, out) < 0)
                abort();
}
