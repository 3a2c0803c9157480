/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Authenticated encryption. BV_CIPHER_AES256GCM is AES-256-GCM with a 96-bit nonce and a
 * 128-bit tag. BV_CIPHER_NONE stores the plaintext as is and uses as its "tag" the first 16
 * bytes of SHA-256(aad || plaintext): it detects corruption, it authenticates nothing.
 * A context holds one key and is used by one thread at a time (create one per worker). The key
 * is not copied: it must stay valid (in secure memory) while the context lives; OpenSSL's keyed
 * state for each direction is made on its first use and cleansed by bv_aead_free.
 */

#include <stddef.h>
#include <stdint.h>

#define BV_NONCE_SIZE 12
#define BV_TAG_SIZE 16
#define BV_KEY_SIZE 32

typedef enum {
        BV_CIPHER_NONE = 0,
        BV_CIPHER_AES256GCM = 1,
} BvCipher;

const char *bv_cipher_name(BvCipher c);        /* "none", "aes-256-gcm" */
int bv_cipher_from_name(const char *s, BvCipher *ret); /* -EPROTONOSUPPORT if unknown */

typedef struct BvAead BvAead;
int bv_aead_new(BvCipher cipher, const uint8_t key[BV_KEY_SIZE], BvAead **ret);
void bv_aead_free(BvAead *a);

/* out receives len bytes of ciphertext (out may equal in). */
int bv_aead_seal(BvAead *a, const uint8_t nonce[BV_NONCE_SIZE], const void *aad, size_t aad_len,
                 const void *in, size_t len, void *out, uint8_t tag[BV_TAG_SIZE]);
/* -EBADMSG when the tag does not verify; out is then wiped. */
int bv_aead_open(BvAead *a, const uint8_t nonce[BV_NONCE_SIZE], const void *aad, size_t aad_len,
                 const void *in, size_t len, void *out, const uint8_t tag[BV_TAG_SIZE]);
