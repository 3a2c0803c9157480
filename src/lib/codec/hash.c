/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <pthread.h>
#include <string.h>

#include "hash.h"
#include "macro.h"
#include "secmem.h"

#define SHA256_BLOCK 64

/* The SHA-256 and HKDF implementations are fetched once per process: implicit fetching on
 * every EVP call is slow. */
static pthread_once_t hash_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;
static EVP_KDF *hkdf_kdf;
static pthread_key_t tls_key;
static bool tls_key_ok;

/* Two digest contexts per thread, reused by every MAC that thread computes. */
typedef struct {
        EVP_MD_CTX *a;
        EVP_MD_CTX *b;
} HashTls;

static __thread HashTls *hash_tls;

struct BvHmacKey {
        EVP_MD_CTX *inner; /* SHA-256 state after absorbing key ^ ipad */
        EVP_MD_CTX *outer; /* SHA-256 state after absorbing key ^ opad */
};

static void hash_tls_free(void *p)
{
        HashTls *t = p;

        if (!t)
                return;
        EVP_MD_CTX_free(t->a);
        EVP_MD_CTX_free(t->b);
        free(t);
}

static void hash_init_once(void)
{
        sha256_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
        hkdf_kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
        tls_key_ok = pthread_key_create(&tls_key, hash_tls_free) == 0;
}

static const EVP_MD *hash_md(void)
{
        (void)pthread_once(&hash_once, hash_init_once);
        return sha256_md;
}

/* The calling thread's context pair, created on first use and freed at thread exit. */
static HashTls *hash_tls_get(void)
{
        HashTls *t;

        if (_likely_(hash_tls))
                return hash_tls;
        if (!hash_md() || !tls_key_ok)
                return NULL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->a = EVP_MD_CTX_new();
        t->b = EVP_MD_CTX_new();
        if (!t->a || !t->b || pthread_setspecific(tls_key, t) != 0) {
                hash_tls_free(t);
                return NULL;
        }
        hash_tls = t;
        return t;
}

void bv_sha256(const void *data, size_t len, uint8_t out[BV_HASH_SIZE])
{
        HashTls *t = hash_tls_get();

        /* Only an allocation failure can get here: there is no error to return. */
        if (!t || EVP_DigestInit_ex2(t->a, sha256_md, NULL) != 1 || EVP_DigestUpdate(t->a, data, len) != 1 ||
            EVP_DigestFinal_ex(t->a, out, NULL) != 1)
                abort();
}

int bv_hmac_key_new(const void *key, size_t key_len, BvHmacKey **ret)
{
        uint8_t pad[SHA256_BLOCK] = {}, ipad[SHA256_BLOCK], opad[SHA256_BLOCK];
        const EVP_MD *md = hash_md();
        BvHmacKey *k;
        int r = -EIO;

        if (!ret || (!key && key_len > 0))
                return -EINVAL;
        if (!md)
                return -EIO;

        if (key_len > SHA256_BLOCK)
                bv_sha256(key, key_len, pad);
        else if (key_len > 0)
                memcpy(pad, key, key_len);
        for (size_t i = 0; i < SHA256_BLOCK; i++) {
                ipad[i] = pad[i] ^ 0x36;
                opad[i] = pad[i] ^ 0x5c;
        }

        k = calloc(1, sizeof(*k));
        if (!k) {
                r = -ENOMEM;
                goto wipe;
        }
        k->inner = EVP_MD_CTX_new();
        k->outer = EVP_MD_CTX_new();
        if (!k->inner || !k->outer) {
                r = -ENOMEM;
                goto free_key;
        }
        if (EVP_DigestInit_ex2(k->inner, md, NULL) != 1 || EVP_DigestUpdate(k->inner, ipad, sizeof(ipad)) != 1 ||
            EVP_DigestInit_ex2(k->outer, md, NULL) != 1 || EVP_DigestUpdate(k->outer, opad, sizeof(opad)) != 1)
                goto free_key;

        *ret = k;
        r = 0;
        goto wipe;

free_key:
        bv_hmac_key_free(k);
wipe:
        bv_wipe(pad, sizeof(pad));
        bv_wipe(ipad, sizeof(ipad));
        bv_wipe(opad, sizeof(opad));
        return r;
}

void bv_hmac_key_free(BvHmacKey *k)
{
        if (!k)
                return;
        EVP_MD_CTX_free(k->inner);
        EVP_MD_CTX_free(k->outer);
        free(k);
}

/* Finishes a MAC: `inner` holds ipad||message (it is finalized), `scratch` gets the outer hash. */
static int hmac_finish(const BvHmacKey *k, EVP_MD_CTX *inner, EVP_MD_CTX *scratch, uint8_t out[BV_HASH_SIZE])
{
        uint8_t ih[BV_HASH_SIZE];
        int r = -EIO;

        if (EVP_DigestFinal_ex(inner, ih, NULL) == 1 && EVP_MD_CTX_copy_ex(scratch, k->outer) == 1 &&
            EVP_DigestUpdate(scratch, ih, sizeof(ih)) == 1 && EVP_DigestFinal_ex(scratch, out, NULL) == 1)
                r = 0;
        bv_wipe(ih, sizeof(ih));
        return r;
}

int bv_hmac_key_mac(const BvHmacKey *k, const void *data, size_t len, uint8_t out[BV_HASH_SIZE])
{
        HashTls *t;

        if (!k || !out || (!data && len > 0))
                return -EINVAL;
        t = hash_tls_get();
        if (!t)
                return -ENOMEM;
        if (EVP_MD_CTX_copy_ex(t->a, k->inner) != 1 || EVP_DigestUpdate(t->a, data, len) != 1)
                return -EIO;
        return hmac_finish(k, t->a, t->b, out);
}

int bv_hmac_key_mac_prefixes(const BvHmacKey *k, const void *data, size_t len, size_t step,
                             uint8_t (*out)[BV_HASH_SIZE])
{
        const uint8_t *p = data;
        size_t n, off = 0;
        HashTls *t;
        int r;

        if (!k || step == 0 || (!data && len > 0) || (!out && len > 0))
                return -EINVAL;
        if (len == 0)
                return 0;
        t = hash_tls_get();
        if (!t)
                return -ENOMEM;

        n = DIV_ROUND_UP(len, step);
        if (EVP_MD_CTX_copy_ex(t->a, k->inner) != 1)
                return -EIO;
        for (size_t i = 0; i < n; i++) {
                size_t end = i + 1 == n ? len : (i + 1) * step;

                if (EVP_DigestUpdate(t->a, p + off, end - off) != 1)
                        return -EIO;
                off = end;
                if (i + 1 == n)
                        return hmac_finish(k, t->a, t->b, out[i]);

                /* Finalize a copy of the running inner state; b is free again afterwards. */
                if (EVP_MD_CTX_copy_ex(t->b, t->a) != 1)
                        return -EIO;
                r = hmac_finish(k, t->b, t->b, out[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int bv_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t out[BV_HASH_SIZE])
{
        BvHmacKey *k = NULL;
        int r;

        r = bv_hmac_key_new(key, key_len, &k);
        if (r < 0)
                return r;
        r = bv_hmac_key_mac(k, data, len, out);
        bv_hmac_key_free(k);
        return r;
}

int bv_hkdf_sha256(const void *ikm, size_t ikm_len, const void *salt, size_t salt_len, const char *info,
                   void *out, size_t out_len)
{
        OSSL_PARAM params[5], *p = params;
        EVP_KDF_CTX *ctx;
        size_t info_len = info ? strlen(info) : 0;
        int r;

        if ((!ikm && ikm_len > 0) || (!salt && salt_len > 0) || !out || out_len == 0 ||
            out_len > 255 * BV_HASH_SIZE)
                return -EINVAL;
        (void)hash_md();
        if (!hkdf_kdf)
                return -EIO;

        ctx = EVP_KDF_CTX_new(hkdf_kdf);
        if (!ctx)
                return -ENOMEM;
        *p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA2-256", 0);
        *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)(ikm ? ikm : ""), ikm_len);
        /* An absent salt is HashLen zero bytes (RFC 5869 2.2), the same HMAC key as an empty one. */
        if (salt_len > 0)
                *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
        if (info_len > 0)
                *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
        *p = OSSL_PARAM_construct_end();

        r = EVP_KDF_derive(ctx, out, out_len, params) == 1 ? 0 : -EIO;
        EVP_KDF_CTX_free(ctx);
        return r;
}
