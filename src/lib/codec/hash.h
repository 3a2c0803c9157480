/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* SHA-256, HMAC-SHA-256 and HKDF-SHA-256 through OpenSSL's libcrypto. */

#include <stddef.h>
#include <stdint.h>

#define BV_HASH_SIZE 32

void bv_sha256(const void *data, size_t len, uint8_t out[BV_HASH_SIZE]);

/* One-shot HMAC-SHA-256. */
int bv_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t out[BV_HASH_SIZE]);

/* A prepared HMAC key: the inner and outer pad states are computed once, so each MAC costs
 * only the hashing of the data. Immutable after creation; bv_hmac_key_mac may be called from
 * any number of threads at once. */
typedef struct BvHmacKey BvHmacKey;
int bv_hmac_key_new(const void *key, size_t key_len, BvHmacKey **ret);
void bv_hmac_key_free(BvHmacKey *k);
int bv_hmac_key_mac(const BvHmacKey *k, const void *data, size_t len, uint8_t out[BV_HASH_SIZE]);

/* MACs of every prefix of data whose length is a multiple of step, and of the whole: out[i]
 * is the MAC of the first min((i+1)*step, len) bytes, for i < DIV_ROUND_UP(len, step). One
 * pass over the data; each extra prefix costs one finalization. */
int bv_hmac_key_mac_prefixes(const BvHmacKey *k, const void *data, size_t len, size_t step,
                             uint8_t (*out)[BV_HASH_SIZE]);

/* RFC 5869 HKDF-SHA-256 (extract and expand). */
int bv_hkdf_sha256(const void *ikm, size_t ikm_len, const void *salt, size_t salt_len, const char *info,
                   void *out, size_t out_len);
