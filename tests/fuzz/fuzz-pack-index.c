/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzz target for pack files (docs/FORMAT.md, "Packs"): the input is a whole pack of an
 * unencrypted repository (cipher none). The harness repairs what guards the parser: the
 * footer check and, when the footer points at an object inside the input, that pack index
 * object's tag (cipher none: a SHA-256 over AAD and plaintext, so the plaintext is the
 * input's own bytes). bv_pack_parse_index must then fail with -EBADMSG or -EPROTONOSUPPORT,
 * or return entries that tile the object area exactly.
 * Seeds: tests/fuzz/gen-store-corpus.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aead.h"
#include "endian.h"
#include "hash.h"
#include "keyring.h"
#include "object.h"
#include "pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static BvObjectCodec *codec;
static BvAead *aead;

static void init(void)
{
        uint8_t master[BV_MASTER_SIZE] = { 0 }, repo_id[BV_REPO_ID_SIZE];
        BvKeyring *k;

        memset(repo_id, 0x22, sizeof(repo_id));
        if (bv_keyring_new(BV_CIPHER_NONE, master, repo_id, &k) < 0 || bv_object_codec_new(k, 3, &codec) < 0 ||
            bv_aead_new(BV_CIPHER_NONE, bv_keyring_data_key(k), &aead) < 0)
                abort();
        /* k stays alive with the codec for the whole run */
}

/* Repairs the footer check and the pack index object's tag in pack (size >= 64). */
static void repair(uint8_t *pack, size_t size)
{
        uint8_t *footer = pack + size - BV_PACK_FOOTER_SIZE, digest[BV_HASH_SIZE];
        uint8_t aad[4 + 1 + BV_ID_SIZE];
        uint64_t off = get_le64(footer);
        uint32_t len = get_le32(footer + 8);

        bv_sha256(footer, 20, digest);
        memcpy(footer + 20, digest, 4);

        if (len < BV_NONCE_SIZE + BV_TAG_SIZE || off > size - BV_PACK_FOOTER_SIZE ||
            len > size - BV_PACK_FOOTER_SIZE - off)
                return;
        memcpy(aad, "BVO1", 4);
        aad[4] = BV_OBJ_PACKINDEX;
        memset(aad + 5, 0, BV_ID_SIZE);
        memcpy(aad + 5, pack + 16, BV_PACK_ID_SIZE);
        uint8_t *obj = pack + off, *pt = obj + BV_NONCE_SIZE;
        size_t pt_len = len - BV_NONCE_SIZE - BV_TAG_SIZE;
        if (bv_aead_seal(aead, obj, aad, sizeof(aad), pt, pt_len, pt, pt + pt_len) < 0)
                abort();
}

/* What a parsed index promises: the objects tile the object area; a group's members follow
 * each other with its location, numbered from 0, at least two. */
static void check_entries(const BvPackEntry *e, size_t n, const uint8_t *pack, size_t size)
{
        uint64_t next = BV_PACK_HEADER_SIZE;

        if (n == 0)
                abort();
        for (size_t i = 0; i < n; i++) {
                if (e[i].type < BV_OBJ_TYPE_MIN || e[i].type > BV_OBJ_TYPE_MAX || e[i].raw_length > BV_OBJECT_MAX_RAW)
                        abort();
                if (e[i].type == BV_OBJ_GROUP && e[i].member > 0) {
                        if (i == 0 || e[i - 1].type != BV_OBJ_GROUP || e[i - 1].member + 1 != e[i].member ||
                            e[i - 1].offset != e[i].offset || e[i - 1].length != e[i].length)
                                abort();
                        continue;
                }
                if (e[i].offset != next || e[i].member != 0)
                        abort();
                if (i > 0 && e[i - 1].type == BV_OBJ_GROUP && e[i - 1].member == 0)
                        abort();
                next += e[i].length;
        }
        if (e[n - 1].type == BV_OBJ_GROUP && e[n - 1].member == 0)
                abort();
        if (next != get_le64(pack + size - BV_PACK_FOOTER_SIZE) || next > size - BV_PACK_FOOTER_SIZE)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t pack_id[BV_PACK_ID_SIZE] = { 0 };
        BvPackEntry *entries;
        size_t count;
        uint8_t *pack;
        int r;

        if (!codec)
                init();
        pack = malloc(size ? size : 1);
        if (!pack)
                abort();
        if (size)
                memcpy(pack, data, size);
        if (size >= BV_PACK_HEADER_SIZE)
                memcpy(pack_id, pack + 16, BV_PACK_ID_SIZE);
        if (size >= BV_PACK_HEADER_SIZE + BV_PACK_FOOTER_SIZE)
                repair(pack, size);

        r = bv_pack_parse_index(codec, pack_id, pack, size, &entries, &count);
        if (r >= 0) {
                check_entries(entries, count, pack, size);
                free(entries);
        } else if (r != -EBADMSG && r != -EPROTONOSUPPORT)
                abort();
        free(pack);
        return 0;
}
