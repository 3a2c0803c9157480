/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <limits.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

#include "aead.h"
#include "hash.h"
#include "macro.h"
#include "secmem.h"

/* EVP lengths are ints: feed large buffers in pieces of this size. */
#define AEAD_PIECE ((size_t)1 << 30)

static pthread_once_t aead_once = PTHREAD_ONCE_INIT;
static EVP_CIPHER *gcm_cipher;
static EVP_MD *none_md;

struct BvAead {
        BvCipher cipher;
        const uint8_t *key;  /* the caller's; keys a direction's context when it is first used */
        EVP_CIPHER_CTX *enc; /* keyed once; each call only sets the nonce */
        EVP_CIPHER_CTX *dec;
        EVP_MD_CTX *md;      /* BV_CIPHER_NONE: SHA-256 of aad || plaintext */
};

static void aead_init_once(void)
{
        gcm_cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
        none_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
}

const char *bv_cipher_name(BvCipher c)
{
        switch (c) {
        case BV_CIPHER_NONE:
                return "none";
        case BV_CIPHER_AES256GCM:
                return "aes-256-gcm";
        }
        return NULL;
}

int bv_cipher_from_name(const char *s, BvCipher *ret)
{
        static const BvCipher all[] = { BV_CIPHER_NONE, BV_CIPHER_AES256GCM };

        if (!s || !ret)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                if (strcmp(s, bv_cipher_name(all[i])) == 0) {
                        *ret = all[i];
                        return 0;
                }
        return -EPROTONOSUPPORT;
}

void bv_aead_free(BvAead *a)
{
        if (!a)
                return;
        EVP_CIPHER_CTX_free(a->enc);
        EVP_CIPHER_CTX_free(a->dec);
        EVP_MD_CTX_free(a->md);
        free(a);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BvAead, bv_aead_free);

int bv_aead_new(BvCipher cipher, const uint8_t key[BV_KEY_SIZE], BvAead **ret)
{
        _cleanup_(bv_aead_freep) BvAead *a = NULL;

        if (!ret)
                return -EINVAL;
        if (!bv_cipher_name(cipher))
                return -EPROTONOSUPPORT;
        if (cipher == BV_CIPHER_AES256GCM && !key)
                return -EINVAL;
        (void)pthread_once(&aead_once, aead_init_once);

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->cipher = cipher;
        if (cipher == BV_CIPHER_NONE) {
                if (!none_md)
                        return -EIO;
                a->md = EVP_MD_CTX_new();
                if (!a->md)
                        return -ENOMEM;
        } else {
                if (!gcm_cipher)
                        return -EIO;
                a->key = key;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

/* The keyed context of one direction, made on first use: a worker that only encrypts (or only
 * decrypts) holds one copy of the key schedule in OpenSSL's memory, not two. EVP_CIPHER_CTX_free
 * cleanses it. */
static EVP_CIPHER_CTX *gcm_ctx(BvAead *a, bool enc)
{
        EVP_CIPHER_CTX **ctx = enc ? &a->enc : &a->dec;
        EVP_CIPHER_CTX *c;

        if (*ctx)
                return *ctx;
        c = EVP_CIPHER_CTX_new();
        if (!c)
                return NULL;
        /* The default GCM IV length is 12 bytes, BV_NONCE_SIZE. */
        if ((enc ? EVP_EncryptInit_ex2(c, gcm_cipher, a->key, NULL, NULL)
                 : EVP_DecryptInit_ex2(c, gcm_cipher, a->key, NULL, NULL)) != 1) {
                EVP_CIPHER_CTX_free(c);
                return NULL;
        }
        return *ctx = c;
}

/* The BV_CIPHER_NONE "tag": the first 16 bytes of SHA-256(aad || data). */
static int none_tag(BvAead *a, const void *aad, size_t aad_len, const void *data, size_t len,
                    uint8_t tag[BV_TAG_SIZE])
{
        uint8_t h[BV_HASH_SIZE];

        if (EVP_DigestInit_ex2(a->md, none_md, NULL) != 1 || EVP_DigestUpdate(a->md, aad, aad_len) != 1 ||
            EVP_DigestUpdate(a->md, data, len) != 1 || EVP_DigestFinal_ex(a->md, h, NULL) != 1)
                return -EIO;
        memcpy(tag, h, BV_TAG_SIZE);
        return 0;
}

/* The "none" cipher: the data is copied as it is, under a plain hash of aad and data as its tag.
 * Sealing (expect NULL) writes the tag into tag; opening checks it against expect (-EBADMSG). */
static int none_crypt(BvAead *a, const void *aad, size_t aad_len, const void *in, size_t len, void *out,
                      uint8_t tag[BV_TAG_SIZE], const uint8_t *expect)
{
        uint8_t t[BV_TAG_SIZE];
        int r = none_tag(a, aad, aad_len, in, len, t);

        if (r < 0)
                return r;
        if (expect && CRYPTO_memcmp(t, expect, BV_TAG_SIZE) != 0) {
                bv_wipe(out, len);
                return -EBADMSG;
        }
        if (len > 0)
                memmove(out, in, len);
        if (!expect)
                memcpy(tag, t, BV_TAG_SIZE);
        return 0;
}

/* Starts one GCM operation of the keyed context of direction enc under nonce and runs aad and
 * data through it, in int-sized pieces; returns the context to finish it with, or NULL. */
static EVP_CIPHER_CTX *gcm_run(BvAead *a, bool enc, const uint8_t *nonce, const void *aad, size_t aad_len,
                               const void *in, size_t len, void *out)
{
        EVP_CIPHER_CTX *ctx = gcm_ctx(a, enc);
        const uint8_t *pa = aad, *pi = in;
        uint8_t *po = out;
        int outl;

        if (!ctx || EVP_CipherInit_ex2(ctx, NULL, NULL, nonce, enc, NULL) != 1)
                return NULL;
        for (size_t off = 0; off < aad_len; off += AEAD_PIECE)
                if (EVP_CipherUpdate(ctx, NULL, &outl, pa + off, (int)MIN(aad_len - off, AEAD_PIECE)) != 1)
                        return NULL;
        for (size_t off = 0; off < len; off += AEAD_PIECE)
                if (EVP_CipherUpdate(ctx, po + off, &outl, pi + off, (int)MIN(len - off, AEAD_PIECE)) != 1)
                        return NULL;
        return ctx;
}

static bool args_ok(const BvAead *a, const uint8_t *nonce, const uint8_t *tag, const void *aad, size_t aad_len,
                    const void *in, size_t len, const void *out)
{
        return a && nonce && tag && (aad || aad_len == 0) && ((in && out) || len == 0);
}

/* GCM sealing: the tag into tag. */
static int gcm_seal(BvAead *a, const uint8_t *nonce, const void *aad, size_t aad_len, const void *in, size_t len,
                    void *out, uint8_t tag[BV_TAG_SIZE])
{
        EVP_CIPHER_CTX *ctx = gcm_run(a, true, nonce, aad, aad_len, in, len, out);
        uint8_t t[BV_TAG_SIZE];
        int outl;

        if (!ctx || EVP_EncryptFinal_ex(ctx, t, &outl) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, BV_TAG_SIZE, t) != 1)
                return -EIO;
        memcpy(tag, t, BV_TAG_SIZE);
        return 0;
}

/* GCM opening against the tag expect: -EBADMSG (and out wiped) when it does not match. */
static int gcm_open(BvAead *a, const uint8_t *nonce, const void *aad, size_t aad_len, const void *in, size_t len,
                    void *out, const uint8_t expect[BV_TAG_SIZE])
{
        EVP_CIPHER_CTX *ctx;
        uint8_t t[BV_TAG_SIZE];
        int outl;

        memcpy(t, expect, BV_TAG_SIZE);
        ctx = gcm_run(a, false, nonce, aad, aad_len, in, len, out);
        if (!ctx || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, BV_TAG_SIZE, t) != 1) {
                bv_wipe(out, len);
                return -EIO;
        }
        if (EVP_DecryptFinal_ex(ctx, t, &outl) != 1) {
                bv_wipe(out, len);
                return -EBADMSG;
        }
        return 0;
}

/* Either direction, as none_crypt: sealing (expect NULL) writes tag, opening checks expect. */
static int aead_crypt(BvAead *a, const uint8_t *nonce, const void *aad, size_t aad_len, const void *in, size_t len,
                      void *out, uint8_t *tag, const uint8_t *expect)
{
        if (!args_ok(a, nonce, expect ? expect : tag, aad, aad_len, in, len, out))
                return -EINVAL;
        if (a->cipher == BV_CIPHER_NONE)
                return none_crypt(a, aad, aad_len, in, len, out, tag, expect);
        if (expect)
                return gcm_open(a, nonce, aad, aad_len, in, len, out, expect);
        return gcm_seal(a, nonce, aad, aad_len, in, len, out, tag);
}

int bv_aead_seal(BvAead *a, const uint8_t nonce[BV_NONCE_SIZE], const void *aad, size_t aad_len,
                 const void *in, size_t len, void *out, uint8_t tag[BV_TAG_SIZE])
{
        return aead_crypt(a, nonce, aad, aad_len, in, len, out, tag, NULL);
}

int bv_aead_open(BvAead *a, const uint8_t nonce[BV_NONCE_SIZE], const void *aad, size_t aad_len,
                 const void *in, size_t len, void *out, const uint8_t tag[BV_TAG_SIZE])
{
        return aead_crypt(a, nonce, aad, aad_len, in, len, out, NULL, tag);
}
