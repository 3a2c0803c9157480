/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzz target for the object envelope (docs/FORMAT.md, "Objects").
 *
 * Input: flags u8 || plaintext (header[8] || payload || padding).
 *   flags & 3        object type - 1
 *   flags & 4        AES-256-GCM (else cipher none)
 * The harness seals the plaintext with the repository's data key, so every mutation reaches
 * the header, codec, padding and id checks; for CHUNK and MAP the id is the keyed hash of
 * the bytes a raw payload would decode to. The input is also decoded as a sealed object
 * as is (nonce || ciphertext || tag), which must fail or succeed cleanly. Whatever decodes
 * must re-encode and decode to the same bytes, and peek must agree with decode.
 * Seeds: tests/fuzz/gen-store-corpus.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aead.h"
#include "endian.h"
#include "group.h"
#include "keyring.h"
#include "macro.h"
#include "object.h"

#define OUT_CAP (1024 * 1024)

/* A decoded group either parses wholly (its members tile the data, then the trailer) or not at
 * all. */
static void check_group(const uint8_t *g, size_t len)
{
        size_t off, n, end = 0;
        unsigned k = 0;

        for (; k <= BV_GROUP_MAX_MEMBERS; k++) {
                if (bv_group_member(g, len, k, &off, &n) < 0)
                        break;
                if (off != end || n == 0 || n > len)
                        abort();
                end += n;
        }
        if (k == 1 || k > BV_GROUP_MAX_MEMBERS)
                abort();
        if (k > 0 && (get_le32(g + len - 4) != k || end + bv_group_trailer_size(k) != len))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Ctx {
        BvKeyring *k;
        BvObjectCodec *c;
        BvAead *aead;
} Ctx;

static Ctx *ctx_get(int cipher)
{
        static Ctx ctx[2];
        uint8_t master[BV_MASTER_SIZE], repo_id[BV_REPO_ID_SIZE];
        Ctx *x = &ctx[cipher];

        if (x->c)
                return x;
        memset(master, cipher ? 0x11 : 0, sizeof(master));
        memset(repo_id, 0x22, sizeof(repo_id));
        if (bv_keyring_new(cipher ? BV_CIPHER_AES256GCM : BV_CIPHER_NONE, master, repo_id, &x->k) < 0 ||
            bv_object_codec_new(x->k, 3, &x->c) < 0 ||
            bv_aead_new(bv_keyring_cipher(x->k), bv_keyring_data_key(x->k), &x->aead) < 0)
                abort();
        return x;
}

static void check_error(int r)
{
        if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOBUFS)
                abort();
}

/* Decodes, and for what decodes: decoding into a buffer of its own size agrees, and encode +
 * decode gives the same bytes. */
static void decode_and_check(Ctx *x, BvObjectType type, const uint8_t id[BV_ID_SIZE], const uint8_t *obj,
                             size_t len)
{
        static uint8_t out[OUT_CAP], again[OUT_CAP];
        static uint8_t enc[OUT_CAP + 4096];
        _cleanup_free_ void *alloc = NULL;
        size_t out_len, alloc_len, enc_len, again_len;
        int r, a;

        r = bv_object_decode(x->c, type, id, obj, len, out, sizeof(out), &out_len);
        a = bv_object_decode_alloc(x->c, type, id, obj, len, &alloc, &alloc_len);
        if (r < 0) {
                check_error(r);
                /* too large for out (the header, authentic, says so before any decompression):
                 * decoding into a buffer of that size gives that much, or finds the payload
                 * damaged; any other error is the same for both */
                if (r == -ENOBUFS ? (a < 0 ? a != -EBADMSG : alloc_len <= sizeof(out)) : a != r)
                        abort();
                return;
        }
        if (a < 0 || alloc_len != out_len || memcmp(alloc, out, out_len) != 0)
                abort();
        if (type == BV_OBJ_GROUP)
                check_group(out, out_len);
        if (bv_object_encode(x->c, type, id, out, out_len, enc, &enc_len) < 0 ||
            enc_len > bv_object_bound(out_len))
                abort();
        if (bv_object_decode(x->c, type, id, enc, enc_len, again, sizeof(again), &again_len) < 0 ||
            again_len != out_len || memcmp(again, out, out_len) != 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static uint8_t obj[OUT_CAP + 64];
        uint8_t aad[4 + 1 + BV_ID_SIZE], id[BV_ID_SIZE];
        const uint8_t *pt;
        size_t pt_len;
        BvObjectType type;
        Ctx *x;

        if (size < 1 || size - 1 > OUT_CAP)
                return 0;
        type = data[0] & 8 ? BV_OBJ_GROUP : (BvObjectType)(1 + (data[0] & 3));
        x = ctx_get((data[0] >> 2) & 1);
        pt = data + 1;
        pt_len = size - 1;

        memset(id, 0xa5, sizeof(id));
        if ((type == BV_OBJ_CHUNK || type == BV_OBJ_MAP) && pt_len >= BV_OBJECT_HEADER_SIZE) {
                size_t raw = get_le32(pt + 4);
                if (raw > pt_len - BV_OBJECT_HEADER_SIZE)
                        raw = pt_len - BV_OBJECT_HEADER_SIZE;
                bv_keyring_id(x->k, type == BV_OBJ_CHUNK ? BV_ID_CHUNK : BV_ID_MAP, pt + BV_OBJECT_HEADER_SIZE,
                              raw, id);
        }

        /* the input as it is: a sealed object */
        decode_and_check(x, type, id, pt, pt_len);

        /* the input sealed */
        memcpy(aad, "BVO1", 4);
        aad[4] = (uint8_t)type;
        memcpy(aad + 5, id, BV_ID_SIZE);
        memset(obj, 0x5a, BV_NONCE_SIZE);
        if (bv_aead_seal(x->aead, obj, aad, sizeof(aad), pt, pt_len, obj + BV_NONCE_SIZE,
                         obj + BV_NONCE_SIZE + pt_len) < 0)
                abort();
        decode_and_check(x, type, id, obj, BV_NONCE_SIZE + pt_len + BV_TAG_SIZE);
        return 0;
}
