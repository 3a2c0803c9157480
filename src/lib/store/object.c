/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The object envelope (docs/FORMAT.md, "Objects"):
 *
 *   nonce[12] || AEAD(header[8] || payload || padding) || tag[16]
 *
 * The payload is the raw bytes (codec 0) or one zstd frame (codec 1, only when it is
 * smaller). Encrypted repositories pad header + payload with zero bytes (obj_padded_length);
 * the encoding is canonical, so a decoder accepts exactly what an encoder produces.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "blockscan.h"
#include "compress.h"
#include "endian.h"
#include "macro.h"
#include "object.h"
#include "random.h"
#include "secmem.h"

#define OBJ_AAD_MAGIC "BVO1"
#define OBJ_AAD_SIZE (4 + 1 + BV_ID_SIZE)
#define OBJ_OVERHEAD (BV_NONCE_SIZE + BV_TAG_SIZE)
#define OBJ_CODEC_RAW 0
#define OBJ_CODEC_ZSTD 1

struct BvObjectCodec {
        const BvKeyring *keyring;
        BvAead *aead;
        BvZstd *zstd;
        bool compress; /* zstd_level != 0 */
        bool pad;      /* encrypted repository: Padmé padding */
        uint8_t *scratch; /* decrypted plaintext of the object being decoded */
        size_t scratch_size;
        uint8_t *input; /* bv_object_codec_input */
        size_t input_size;
        BvRandomPool *nonces; /* encrypted repository: every new object's nonce */
};

/* The parsed plaintext of an authenticated object. */
typedef struct ObjPlain {
        uint8_t codec;
        uint32_t raw_length;
        const uint8_t *payload;
        size_t payload_length;
} ObjPlain;

int bv_object_codec_new(const BvKeyring *k, int zstd_level, BvObjectCodec **ret)
{
        BvObjectCodec *c;
        BvCipher cipher;
        int r;

        if (!k || !ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        cipher = bv_keyring_cipher(k);
        c->keyring = k;
        c->compress = zstd_level != 0;
        c->pad = cipher != BV_CIPHER_NONE;
        r = bv_aead_new(cipher, bv_keyring_data_key(k), &c->aead);
        if (r < 0)
                goto fail;
        if (c->pad) {
                r = bv_random_pool_new(&c->nonces);
                if (r < 0)
                        goto fail;
        }
        /* Decoding needs a zstd context even where new objects are stored raw. */
        r = bv_zstd_new(zstd_level != 0 ? zstd_level : 1, &c->zstd);
        if (r < 0)
                goto fail;
        *ret = c;
        return 0;

fail:
        bv_object_codec_free(c);
        return r;
}

void bv_object_codec_free(BvObjectCodec *c)
{
        if (!c)
                return;
        bv_aead_free(c->aead);
        bv_random_pool_free(c->nonces);
        bv_zstd_free(c->zstd);
        if (c->scratch)
                bv_wipe(c->scratch, c->scratch_size);
        free(c->scratch);
        free(c->input);
        free(c);
}

int bv_object_codec_set_choice(BvObjectCodec *c, BvZstdChoice choice)
{
        if (!c)
                return -EINVAL;
        return choice == BV_ZSTD_RAW ? bv_zstd_reset_choice(c->zstd) : bv_zstd_set_choice(c->zstd, choice);
}

void *bv_object_codec_input(BvObjectCodec *c, size_t len)
{
        uint8_t *p;

        if (!c)
                return NULL;
        if (len <= c->input_size)
                return c->input;
        p = malloc(len);
        if (!p)
                return NULL;
        free(c->input);
        c->input = p;
        c->input_size = len;
        return p;
}

uint64_t bv_padme(uint64_t len)
{
        unsigned e, s;
        uint64_t mask;

        if (len < 2)
                return len;
        e = 63 - (unsigned)__builtin_clzll(len);   /* floor(log2 len) */
        s = 32 - (unsigned)__builtin_clz(e);       /* floor(log2 e) + 1 */
        mask = (UINT64_C(1) << (e - s)) - 1;
        if (len > UINT64_MAX - mask)
                return UINT64_MAX;
        return (len + mask) & ~mask;
}

/* The padded plaintext length (docs/FORMAT.md, "Objects"). A compressed chunk's stored size
 * follows its compressed length, from which the plaintext length cannot be read: rounding it
 * to 64 bytes is enough and costs ~0.1%. A raw chunk's size would be its exact plaintext
 * length, and metadata objects are few: those get Padmé. */
#define OBJ_CHUNK_ZSTD_ALIGN 64u
static size_t obj_padded_length(const BvObjectCodec *c, BvObjectType type, uint8_t codec, size_t plain_len)
{
        if (!c->pad)
                return plain_len;
        if ((type == BV_OBJ_CHUNK || type == BV_OBJ_GROUP) && codec == OBJ_CODEC_ZSTD)
                return ALIGN_UP(plain_len, (size_t)OBJ_CHUNK_ZSTD_ALIGN);
        return (size_t)bv_padme(plain_len);
}

size_t bv_object_bound(size_t len)
{
        size_t plain = BV_OBJECT_HEADER_SIZE + len;
        return OBJ_OVERHEAD + MAX((size_t)bv_padme(plain), ALIGN_UP(plain, (size_t)OBJ_CHUNK_ZSTD_ALIGN));
}

static void obj_aad(uint8_t aad[OBJ_AAD_SIZE], BvObjectType type, const uint8_t id[BV_ID_SIZE])
{
        memcpy(aad, OBJ_AAD_MAGIC, 4);
        aad[4] = (uint8_t)type;
        memcpy(aad + 5, id, BV_ID_SIZE);
}

static bool obj_type_valid(BvObjectType type)
{
        return type >= BV_OBJ_TYPE_MIN && type <= BV_OBJ_TYPE_MAX;
}

/* Writes the payload after the header at pt: a zstd frame if it is smaller, else the raw
 * bytes. Returns the payload length, or a negative errno. */
static ssize_t obj_put_payload(BvObjectCodec *c, uint8_t *pt, const void *data, size_t len, bool compress)
{
        size_t clen;
        int r;

        if (compress && c->compress && len > 0) {
                r = bv_zstd_compress(c->zstd, data, len, pt + BV_OBJECT_HEADER_SIZE, len, &clen);
                if (r >= 0) {
                        pt[1] = OBJ_CODEC_ZSTD;
                        return (ssize_t)clen;
                }
                if (r != -E2BIG)
                        return r;
        }
        pt[1] = OBJ_CODEC_RAW;
        if (len > 0)
                memcpy(pt + BV_OBJECT_HEADER_SIZE, data, len);
        return (ssize_t)len;
}

int bv_object_encode(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data,
                     size_t len, void *out, size_t *ret_len)
{
        return bv_object_encode_as(c, type, id, data, len, true, out, ret_len, NULL);
}

int bv_object_encode_as(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *data,
                        size_t len, bool compress, void *out, size_t *ret_len, bool *ret_compressed)
{
        uint8_t aad[OBJ_AAD_SIZE];
        uint8_t *nonce = out, *pt = (uint8_t *)out + BV_NONCE_SIZE;
        size_t plain_len, total;
        ssize_t payload;
        uint8_t codec;
        int r;

        if (!c || !id || !out || !ret_len || (len > 0 && !data) || !obj_type_valid(type))
                return -EINVAL;
        if (len > BV_OBJECT_MAX_RAW)
                return -EFBIG;

        pt[0] = (uint8_t)type;
        put_le16(pt + 2, 0);
        put_le32(pt + 4, (uint32_t)len);
        payload = obj_put_payload(c, pt, data, len, compress);
        if (payload < 0)
                return (int)payload;
        codec = pt[1]; /* the plaintext is sealed in place below */

        plain_len = BV_OBJECT_HEADER_SIZE + (size_t)payload;
        total = obj_padded_length(c, type, codec, plain_len);
        memset(pt + plain_len, 0, total - plain_len);

        if (c->pad) {
                r = bv_random_pool_take(c->nonces, nonce, BV_NONCE_SIZE);
                if (r < 0)
                        return r;
        } else
                memset(nonce, 0, BV_NONCE_SIZE);

        obj_aad(aad, type, id);
        r = bv_aead_seal(c->aead, nonce, aad, sizeof(aad), pt, total, pt, pt + total);
        if (r < 0)
                return r;
        *ret_len = OBJ_OVERHEAD + total;
        if (ret_compressed)
                *ret_compressed = codec == OBJ_CODEC_ZSTD;
        return 0;
}

/* Checks the header, payload length and padding of a decrypted plaintext. */
static int obj_parse_plain(const BvObjectCodec *c, BvObjectType type, const uint8_t *pt, size_t total,
                           ObjPlain *ret)
{
        ObjPlain p = { .payload = pt + BV_OBJECT_HEADER_SIZE };
        size_t plain_len, expected;

        if (total < BV_OBJECT_HEADER_SIZE)
                return -EBADMSG;
        if (pt[0] != (uint8_t)type || get_le16(pt + 2) != 0)
                return -EBADMSG;
        p.codec = pt[1];
        p.raw_length = get_le32(pt + 4);
        if (p.codec != OBJ_CODEC_RAW && p.codec != OBJ_CODEC_ZSTD)
                return -EPROTONOSUPPORT;
        if (p.raw_length > BV_OBJECT_MAX_RAW)
                return -EBADMSG;

        if (p.codec == OBJ_CODEC_RAW) {
                p.payload_length = p.raw_length;
                if (p.payload_length > total - BV_OBJECT_HEADER_SIZE)
                        return -EBADMSG;
        } else {
                size_t n = ZSTD_findFrameCompressedSize(p.payload, total - BV_OBJECT_HEADER_SIZE);
                /* An encoder stores a frame only when it is smaller than the raw bytes. */
                if (ZSTD_isError(n) || n >= p.raw_length)
                        return -EBADMSG;
                p.payload_length = n;
        }

        plain_len = BV_OBJECT_HEADER_SIZE + p.payload_length;
        expected = obj_padded_length(c, type, p.codec, plain_len);
        if (expected != total || !bv_is_zero(pt + plain_len, total - plain_len))
                return -EBADMSG;
        *ret = p;
        return 0;
}

static int obj_scratch_reserve(BvObjectCodec *c, size_t size)
{
        uint8_t *p;

        if (size <= c->scratch_size)
                return 0;
        p = malloc(size);
        if (!p)
                return -ENOMEM;
        if (c->scratch)
                bv_wipe(c->scratch, c->scratch_size);
        free(c->scratch);
        c->scratch = p;
        c->scratch_size = size;
        return 0;
}

/* Authenticates and decrypts an encoded object into the codec's scratch buffer, and parses it. */
static int obj_open(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *in,
                    size_t in_len, ObjPlain *ret)
{
        uint8_t aad[OBJ_AAD_SIZE];
        const uint8_t *nonce = in, *ct = (const uint8_t *)in + BV_NONCE_SIZE;
        size_t total;
        int r;

        if (!c || !id || !in || !obj_type_valid(type))
                return -EINVAL;
        if (in_len < OBJ_OVERHEAD + BV_OBJECT_HEADER_SIZE || in_len > bv_object_bound(BV_OBJECT_MAX_RAW))
                return -EBADMSG;
        total = in_len - OBJ_OVERHEAD;
        r = obj_scratch_reserve(c, total);
        if (r < 0)
                return r;

        obj_aad(aad, type, id);
        r = bv_aead_open(c->aead, nonce, aad, sizeof(aad), ct, total, c->scratch, ct + total);
        if (r < 0)
                return r;
        return obj_parse_plain(c, type, c->scratch, total, ret);
}

/* Decompresses (or copies) an opened object's payload into out and checks its id. */
static int obj_finish(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const ObjPlain *p,
                      void *out)
{
        int r;

        if (p->codec == OBJ_CODEC_ZSTD) {
                r = bv_zstd_decompress(c->zstd, p->payload, p->payload_length, out, p->raw_length);
                if (r < 0)
                        return r;
        } else if (p->raw_length > 0)
                memcpy(out, p->payload, p->raw_length);

        if (type == BV_OBJ_CHUNK || type == BV_OBJ_MAP) {
                uint8_t check[BV_ID_SIZE];

                bv_keyring_id(c->keyring, type == BV_OBJ_CHUNK ? BV_ID_CHUNK : BV_ID_MAP, out, p->raw_length,
                              check);
                if (memcmp(check, id, BV_ID_SIZE) != 0)
                        return -EBADMSG;
        }
        return 0;
}

int bv_object_decode(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *in,
                     size_t in_len, void *out, size_t out_cap, size_t *ret_len)
{
        ObjPlain p;
        int r;

        if (!out && out_cap > 0)
                return -EINVAL;
        r = obj_open(c, type, id, in, in_len, &p);
        if (r < 0)
                return r;
        if (p.raw_length > out_cap)
                return -ENOBUFS;
        r = obj_finish(c, type, id, &p, out);
        if (r < 0)
                return r;
        if (ret_len)
                *ret_len = p.raw_length;
        return 0;
}

int bv_object_decode_alloc(BvObjectCodec *c, BvObjectType type, const uint8_t id[BV_ID_SIZE], const void *in,
                           size_t in_len, void **ret, size_t *ret_len)
{
        _cleanup_free_ uint8_t *out = NULL;
        ObjPlain p;
        int r;

        if (!ret || !ret_len)
                return -EINVAL;
        r = obj_open(c, type, id, in, in_len, &p);
        if (r < 0)
                return r;
        out = malloc(p.raw_length ? p.raw_length : 1);
        if (!out)
                return -ENOMEM;
        r = obj_finish(c, type, id, &p, out);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(out);
        *ret_len = p.raw_length;
        return 0;
}

