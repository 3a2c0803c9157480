/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The subkeys of a repository, all derived from its 32-byte master secret with
 * HKDF-SHA-256(ikm = master, salt = repository id (16 bytes), info = label):
 *
 *   "blkvault v1 data"     AES-256-GCM key for every stored object
 *   "blkvault v1 chunk-id" HMAC-SHA-256 key: id of a data chunk
 *   "blkvault v1 map-id"   HMAC-SHA-256 key: id of a manifest (map) node
 *   "blkvault v1 chunker"  key of the chunker's cut decisions (block prints, gear table)
 *   "blkvault v1 config"   HMAC-SHA-256 key authenticating the config file
 *
 * An unencrypted repository (cipher none) uses a master secret of 32 zero bytes, so its ids
 * and cut points are computed the same way with publicly known keys.
 * Secrets live in locked memory and are wiped on free.
 */

#include <stddef.h>
#include <stdint.h>

#include "aead.h"
#include "hash.h"

#define BV_MASTER_SIZE 32
#define BV_REPO_ID_SIZE 16
#define BV_ID_SIZE 32

typedef enum {
        BV_ID_CHUNK = 1,
        BV_ID_MAP = 2,
} BvIdKind;

typedef struct BvKeyring BvKeyring;

int bv_keyring_new(BvCipher cipher, const uint8_t master[BV_MASTER_SIZE],
                   const uint8_t repo_id[BV_REPO_ID_SIZE], BvKeyring **ret);
void bv_keyring_free(BvKeyring *k);
/* A copy of k in memory of its own (locked, wiped on free), for reopening a repository without
 * its secret. 0, -EINVAL or -ENOMEM. */
int bv_keyring_dup(const BvKeyring *k, BvKeyring **ret);

BvCipher bv_keyring_cipher(const BvKeyring *k);
const uint8_t *bv_keyring_data_key(const BvKeyring *k);    /* 32 bytes */
const uint8_t *bv_keyring_chunker_key(const BvKeyring *k); /* 32 bytes */
const uint8_t *bv_keyring_config_key(const BvKeyring *k);  /* 32 bytes */

/* The id of an object of the given kind: HMAC-SHA-256 under that kind's key. Thread-safe. */
void bv_keyring_id(const BvKeyring *k, BvIdKind kind, const void *data, size_t len, uint8_t out[BV_ID_SIZE]);

/* The ids of every step-sized prefix and of the whole (see bv_hmac_key_mac_prefixes). */
void bv_keyring_id_prefixes(const BvKeyring *k, BvIdKind kind, const void *data, size_t len, size_t step,
                            uint8_t (*out)[BV_ID_SIZE]);
