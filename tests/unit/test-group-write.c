/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The group-writing recipe (store/group-write.h): gathering, and what bv_group_encode hands on
 * with a fixed level, with --compression=auto and without compression; every object decodes
 * (authenticated, re-hashed) to what went in. */
#include "bvtest.h"
#include "group-write.h"
#include "macro.h"

#define MEMBER (32u * 1024)
#define MEMBERS 6u

typedef struct Got {
        const BvKeyring *k;
        BvObjectCodec *codec;
        size_t objects, groups, chunks, compressed, raw_bytes, encoded_bytes;
        uint8_t data[MEMBERS * MEMBER];
        size_t len;
} Got;

/* Decodes what the encoder hands on and appends the members' bytes to got->data. */
static int sink(void *userdata, BvObjectType type, const BvGroupMember *m, size_t n, const void *encoded,
                size_t len)
{
        Got *got = userdata;
        void *plain = NULL;
        size_t plain_len, off, mlen;

        got->objects++;
        got->encoded_bytes += len;
        if (type == BV_OBJ_GROUP) {
                got->groups++;
                ASSERT_OK(bv_object_decode_alloc(got->codec, type, bv_group_id, encoded, len, &plain, &plain_len));
                for (unsigned i = 0; i < n; i++) {
                        uint8_t id[BV_ID_SIZE];
                        ASSERT_OK(bv_group_member(plain, plain_len, i, &off, &mlen));
                        ASSERT_EQ(mlen, m[i].length);
                        bv_keyring_id(got->k, BV_ID_CHUNK, (uint8_t *)plain + off, mlen, id);
                        ASSERT_MEMEQ(id, m[i].id, BV_ID_SIZE);
                        memcpy(got->data + got->len, (uint8_t *)plain + off, mlen);
                        got->len += mlen;
                        got->raw_bytes += mlen;
                }
        } else {
                ASSERT_EQ(n, 1);
                got->chunks += type == BV_OBJ_CHUNK;
                ASSERT_OK(bv_object_decode_alloc(got->codec, type, m[0].id, encoded, len, &plain, &plain_len));
                ASSERT_EQ(plain_len, m[0].length);
                memcpy(got->data + got->len, plain, plain_len);
                got->len += plain_len;
                got->raw_bytes += plain_len;
        }
        /* a compressed object is smaller than its bytes; a raw one is not */
        got->compressed += len < plain_len;
        free(plain);
        return 0;
}

static uint8_t *text(size_t len, unsigned seed)
{
        static const char words[] = "block device backup of an installed system; the quick brown fox ";
        uint8_t *b = malloc(len);
        ASSERT_TRUE(b);
        for (size_t i = 0; i < len; i++)
                b[i] = (uint8_t)words[(i * 7 + i / 61 + seed) % (sizeof(words) - 1)];
        return b;
}

/* Encodes MEMBERS members of data through an encoder of level (auto or not) into got. */
static void encode(const BvKeyring *k, int level, bool automatic, const uint8_t *data, Got *got)
{
        BvGroupBuf g = {};
        BvGroupEncoder *e;

        *got = (Got){ .k = k };
        ASSERT_OK(bv_object_codec_new(k, 3, &got->codec));
        ASSERT_OK(bv_group_encoder_new(k, level, &e));
        bv_group_encoder_set_auto(e, automatic);
        bv_group_buf_clear(&g, BV_OBJ_CHUNK);
        for (unsigned i = 0; i < MEMBERS; i++) {
                uint8_t id[BV_ID_SIZE];
                ASSERT_TRUE(bv_group_buf_fits(&g, MEMBER));
                bv_keyring_id(k, BV_ID_CHUNK, data + i * MEMBER, MEMBER, id);
                ASSERT_OK(bv_group_buf_add(&g, id, data + i * MEMBER, MEMBER));
        }
        ASSERT_OK(bv_group_encode(e, &g, sink, got));
        ASSERT_EQ(got->len, (size_t)MEMBERS * MEMBER);
        ASSERT_MEMEQ(got->data, data, got->len);
        bv_group_buf_done(&g);
        bv_group_encoder_free(e);
        bv_object_codec_free(got->codec);
}

static BvKeyring *keyring_of(BvCipher cipher)
{
        uint8_t master[BV_MASTER_SIZE], repo_id[BV_REPO_ID_SIZE];
        BvKeyring *k;

        bvtest_fill_random(master, sizeof(master), 1);
        bvtest_fill_random(repo_id, sizeof(repo_id), 2);
        ASSERT_OK(bv_keyring_new(cipher, master, repo_id, &k));
        return k;
}

static BvKeyring *keyring(void)
{
        return keyring_of(BV_CIPHER_AES256GCM);
}

/* Text: one compressed GROUP at a fixed level and with auto; random bytes: a level tries and
 * falls back to raw chunks, auto stores them raw at once; without compression, raw chunks. */
TEST(encode_kinds)
{
        BvKeyring *k = keyring();
        _cleanup_free_ uint8_t *t = text(MEMBERS * MEMBER, 3), *noise = malloc(MEMBERS * MEMBER);
        _cleanup_free_ Got *got = malloc(sizeof(Got)), *got3 = malloc(sizeof(Got));

        ASSERT_TRUE(noise && got && got3);
        bvtest_fill_random(noise, MEMBERS * MEMBER, 4);
        encode(k, 3, false, t, got3);
        ASSERT_TRUE(got3->groups == 1 && got3->objects == 1 && got3->compressed == 1);
        encode(k, 3, true, t, got);
        ASSERT_TRUE(got->groups == 1 && got->objects == 1 && got->compressed == 1);
        ASSERT_TRUE(got->encoded_bytes < MEMBERS * MEMBER / 4);

        encode(k, 3, false, noise, got);
        ASSERT_TRUE(got->groups == 0 && got->chunks == MEMBERS && got->compressed == 0);
        encode(k, 3, true, noise, got);
        ASSERT_TRUE(got->groups == 0 && got->chunks == MEMBERS && got->compressed == 0);
        encode(k, 0, true, t, got); /* auto does nothing without compression */
        ASSERT_TRUE(got->groups == 0 && got->chunks == MEMBERS && got->compressed == 0);
        bv_keyring_free(k);
}

/* A lone chunk goes as a CHUNK (auto: raw when it looks compressed); a map node stays at the
 * encoder's level under auto; bv_group_encode refuses an empty buffer. */
TEST(encode_single)
{
        BvKeyring *k = keyring();
        _cleanup_free_ uint8_t *noise = malloc(MEMBER), *t = text(MEMBER, 5);
        _cleanup_free_ Got *got = calloc(1, sizeof(Got));
        BvGroupEncoder *e;
        BvGroupBuf g = {};
        uint8_t id[BV_ID_SIZE];

        ASSERT_TRUE(noise && got);
        got->k = k;
        bvtest_fill_random(noise, MEMBER, 6);
        ASSERT_OK(bv_object_codec_new(k, 3, &got->codec));
        ASSERT_OK(bv_group_encoder_new(k, 3, &e));
        bv_group_encoder_set_auto(e, true);
        bv_group_buf_clear(&g, BV_OBJ_CHUNK);
        ASSERT_ERROR(bv_group_encode(e, &g, sink, got), EINVAL);
        bv_keyring_id(k, BV_ID_CHUNK, noise, MEMBER, id);
        ASSERT_OK(bv_group_buf_set(&g, BV_OBJ_CHUNK, id, noise, MEMBER));
        ASSERT_OK(bv_group_encode(e, &g, sink, got));
        ASSERT_TRUE(got->chunks == 1 && got->compressed == 0);
        bv_keyring_id(k, BV_ID_MAP, t, MEMBER, id);
        ASSERT_OK(bv_group_buf_set(&g, BV_OBJ_MAP, id, t, MEMBER));
        ASSERT_OK(bv_group_encode(e, &g, sink, got));
        ASSERT_TRUE(got->objects == 2 && got->compressed == 1);
        ASSERT_MEMEQ(got->data, noise, MEMBER);
        ASSERT_MEMEQ(got->data + MEMBER, t, MEMBER);
        bv_group_buf_done(&g);
        bv_group_encoder_free(e);
        bv_object_codec_free(got->codec);
        bv_keyring_free(k);
}

/* A group fills up to BV_GROUP_TARGET_BYTES and BV_GROUP_TARGET_MEMBERS. */
TEST(gather_limits)
{
        BvGroupBuf g = {};
        uint8_t id[BV_ID_SIZE] = { 0 }, byte = 7;

        bv_group_buf_clear(&g, BV_OBJ_CHUNK);
        ASSERT_TRUE(bv_group_buf_fits(&g, BV_GROUP_TARGET_BYTES));
        ASSERT_TRUE(!bv_group_buf_fits(&g, BV_GROUP_TARGET_BYTES + 1));
        for (unsigned i = 0; i < BV_GROUP_TARGET_MEMBERS; i++) {
                ASSERT_TRUE(bv_group_buf_fits(&g, 1));
                ASSERT_OK(bv_group_buf_add(&g, id, &byte, 1));
        }
        ASSERT_TRUE(!bv_group_buf_fits(&g, 1));
        ASSERT_ERROR(bv_group_buf_add(&g, id, &byte, 1), EINVAL);
        ASSERT_EQ(g.n_members, BV_GROUP_TARGET_MEMBERS);
        bv_group_buf_done(&g);
        ASSERT_TRUE(g.data == NULL && g.n_members == 0);
}

/* Bytes drawn from 16 values (a seeded generator): ~4 bits per byte, auto's fastest band. */
static uint8_t *symbols16(size_t len, uint32_t seed)
{
        uint8_t *b = malloc(len);
        ASSERT_TRUE(b);
        for (size_t i = 0; i < len; i++) {
                seed = seed * 1664525u + 1013904223u;
                b[i] = (uint8_t)(seed >> 28);
        }
        return b;
}

/* The encoded size of map node t (MEMBER bytes) through e. */
static size_t map_size(BvGroupEncoder *e, Got *got, const uint8_t *t)
{
        BvGroupBuf g = {};
        uint8_t id[BV_ID_SIZE];
        size_t before = got->encoded_bytes;

        got->len = 0;
        bv_keyring_id(got->k, BV_ID_MAP, t, MEMBER, id);
        ASSERT_OK(bv_group_buf_set(&g, BV_OBJ_MAP, id, t, MEMBER));
        ASSERT_OK(bv_group_encode(e, &g, sink, got));
        bv_group_buf_done(&g);
        return got->encoded_bytes - before;
}

/* Under auto, a map node is compressed at the encoder's level even after a group chose other
 * settings (unpadded objects: the size shows the settings). */
TEST(map_level_after_choice)
{
        BvKeyring *k = keyring_of(BV_CIPHER_NONE);
        _cleanup_free_ uint8_t *d = symbols16(2 * MEMBER, 7), *t = symbols16(MEMBER, 8);
        _cleanup_free_ Got *got = calloc(1, sizeof(Got));
        BvGroupEncoder *e, *fresh, *fast;
        BvGroupBuf g = {};
        uint8_t id[BV_ID_SIZE];

        ASSERT_TRUE(got);
        got->k = k;
        ASSERT_OK(bv_object_codec_new(k, 3, &got->codec));
        ASSERT_OK(bv_group_encoder_new(k, 19, &fresh));
        ASSERT_OK(bv_group_encoder_new(k, 1, &fast));
        bv_group_encoder_set_auto(fresh, true);
        size_t want = map_size(fresh, got, t);
        ASSERT_TRUE(map_size(fast, got, t) != want); /* level 1 (auto's choice for d) differs */

        ASSERT_OK(bv_group_encoder_new(k, 19, &e));
        bv_group_encoder_set_auto(e, true);
        bv_group_buf_clear(&g, BV_OBJ_CHUNK);
        for (unsigned i = 0; i < 2; i++) {
                bv_keyring_id(k, BV_ID_CHUNK, d + i * MEMBER, MEMBER, id);
                ASSERT_OK(bv_group_buf_add(&g, id, d + i * MEMBER, MEMBER));
        }
        got->len = 0;
        ASSERT_OK(bv_group_encode(e, &g, sink, got));
        ASSERT_EQ(got->groups, 1);
        ASSERT_EQ(map_size(e, got, t), want);
        bv_group_buf_done(&g);
        bv_group_encoder_free(e);
        bv_group_encoder_free(fast);
        bv_group_encoder_free(fresh);
        bv_object_codec_free(got->codec);
        bv_keyring_free(k);
}

int main(void)
{
        RUN(encode_kinds);
        RUN(encode_single);
        RUN(gather_limits);
        RUN(map_level_after_choice);
        return 0;
}
