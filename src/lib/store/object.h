/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Stored objects (docs/FORMAT.md, "Objects"): every chunk, map node, snapshot record and
 * pack index is sealed the same way:
 *
 *   nonce[12] || AEAD(plaintext = header[8] || payload || padding) || tag[16]
 *   header   = type u8, codec u8 (0 raw, 1 zstd), reserved u16 (0), raw_length u32 LE
 *   AAD      = "BVO1" || type u8 || id[32]
 *   padding  = zero bytes up to Padmé(8 + payload length) in encrypted repositories
 *
 * For CHUNK and MAP objects the id is the keyed hash of the raw (uncompressed) bytes and
 * decoding re-hashes and compares; for SNAPSHOT and PACKINDEX objects the id is the
 * object's name (snapshot id, pack id zero-padded) and binds the object to its file. A
 * GROUP's id is all zeros: its members are chunks, each checked against its own id when it
 * is taken out (bv_group_member).
 * A codec holds per-thread contexts (zstd, AEAD): one per worker thread.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compress.h"
#include "keyring.h"

typedef enum {
        BV_OBJ_CHUNK = 1,
        BV_OBJ_MAP = 2,
        BV_OBJ_SNAPSHOT = 3,
        BV_OBJ_PACKINDEX = 4,
        BV_OBJ_GROUP = 5, /* consecutive new chunks compressed together (store/group.h) */
} BvObjectType;

#define BV_OBJ_TYPE_MIN BV_OBJ_CHUNK
#define BV_OBJ_TYPE_MAX BV_OBJ_GROUP

#define BV_OBJECT_HEADER_SIZE 8
#define BV_OBJECT_MAX_RAW (16u * 1024 * 1024)

typedef struct BvObjectCodec BvObjectCodec;

/* zstd_level 0 means "store raw" (compression none). */
int bv_object_codec_new(const BvKeyring *k, int zstd_level, BvObjectCodec **ret);
void bv_object_codec_free(BvObjectCodec *c);

/* Makes the codec compress with the settings of choice (codec/compress.h) from now on, where it
 * compresses at all: --compression=auto chooses them group by group. BV_ZSTD_RAW: with the
 * codec's own level again. */
int bv_object_codec_set_choice(BvObjectCodec *c, BvZstdChoice choice);

/* A buffer of at least len bytes for the encoded object the caller decodes next with this codec
 * (say, read from a pack): reused from call to call, valid until the next call; NULL when out of
 * memory. Decoding does not use it. */
void *bv_object_codec_input(BvObjectCodec *c, size_t len);

/* Largest encoded size of an object of raw length len. */
size_t bv_object_bound(size_t len);

/* Padmé: the padded length for a length; leaks O(log log len) bits of it. */
uint64_t bv_padme(uint64_t len);

/* Encodes into out (capacity bv_object_bound(len)). -EFBIG if len > BV_OBJECT_MAX_RAW. */
int bv_object_encode(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data,
                     size_t len, void *out, size_t *ret_len);

/* The same, compressing only if compress is true (and the codec compresses); ret_compressed
 * (may be NULL) tells whether the payload is a zstd frame. */
int bv_object_encode_as(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data,
                        size_t len, bool compress, void *out, size_t *ret_len, bool *ret_compressed);

/* Authenticates, decompresses and (CHUNK, MAP) re-hashes. out has room for out_cap bytes;
 * ret_len gets the raw length. -EBADMSG on any mismatch, -EPROTONOSUPPORT on an unknown codec,
 * -ENOBUFS if the (authentic) object's raw length exceeds out_cap. The codec keeps a pointer
 * to the keyring, which must outlive it. */
int bv_object_decode(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *in,
                     size_t in_len, void *out, size_t out_cap, size_t *ret_len);

/* The same into a malloc'd buffer of the object's raw length. */
int bv_object_decode_alloc(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *in,
                           size_t in_len, void **ret, size_t *ret_len);
