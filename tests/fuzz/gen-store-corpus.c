/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writes the seed corpora of fuzz-object and fuzz-pack-index with the real encoder and pack
 * writer. Not part of the build; run from the source root:
 *
 *   cc -D_GNU_SOURCE -Isrc/lib/util -Isrc/lib/codec -Isrc/lib/store -Itests/unit \
 *      tests/fuzz/gen-store-corpus.c -o /tmp/gen-store-corpus build-store/src/lib/store/libbv-store.a \
 *      build-store/src/lib/codec/libbv-codec.a build-store/src/lib/util/libbv-util.a -lcrypto -lzstd
 *   /tmp/gen-store-corpus tests/fuzz/corpus
 *
 * The keys match the fuzz targets: cipher none with a zero master, AES-256-GCM with a master
 * of 0x11 bytes, repository id of 0x22 bytes.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "bvtest.h"
#include "fileio.h"
#include "group.h"
#include "keyring.h"
#include "macro.h"
#include "object.h"
#include "pack.h"

static BvKeyring *keyring(int aes)
{
        uint8_t master[BV_MASTER_SIZE], repo_id[BV_REPO_ID_SIZE];
        BvKeyring *k;

        memset(master, aes ? 0x11 : 0, sizeof(master));
        memset(repo_id, 0x22, sizeof(repo_id));
        ASSERT_OK(bv_keyring_new(aes ? BV_CIPHER_AES256GCM : BV_CIPHER_NONE, master, repo_id, &k));
        return k;
}

static void put(int dfd, const char *name, const void *a, size_t alen, const void *b, size_t blen)
{
        _cleanup_free_ uint8_t *buf = malloc(alen + blen + 1);

        ASSERT_TRUE(buf != NULL);
        memcpy(buf, a, alen);
        if (blen > 0)
                memcpy(buf + alen, b, blen);
        (void)unlinkat(dfd, name, 0);
        ASSERT_OK(bv_write_file_durable(dfd, name, buf, alen + blen, false));
}

/* fuzz-object seeds: flags || plaintext, the plaintext cut out of a cipher-none encoding and
 * padded as an encrypted repository pads it. */
static void object_seeds(int dfd)
{
        BvKeyring *k = keyring(0);
        BvObjectCodec *c;
        uint8_t text[300], enc[1024], id[BV_ID_SIZE], pt[1024];
        const size_t sizes[] = { 0, 40, sizeof(text) };

        for (size_t i = 0; i < sizeof(text); i++)
                text[i] = "object fuzz seed "[i % 17];
        bvtest_fill_random(text, 40, 3); /* the 40-byte seeds stay raw */
        ASSERT_OK(bv_object_codec_new(k, 3, &c));
        for (uint8_t t = BV_OBJ_CHUNK; t <= BV_OBJ_PACKINDEX; t++)
                for (size_t s = 0; s < ELEMENTSOF(sizes); s++)
                        for (uint8_t aes = 0; aes <= 1; aes++) {
                                uint8_t flags = (uint8_t)((t - 1) | aes << 2);
                                size_t len, pt_len, padded;
                                char name[64];

                                memset(id, 0xa5, sizeof(id));
                                if (t == BV_OBJ_CHUNK || t == BV_OBJ_MAP)
                                        bv_keyring_id(k, t == BV_OBJ_CHUNK ? BV_ID_CHUNK : BV_ID_MAP, text,
                                                      sizes[s], id);
                                ASSERT_OK(bv_object_encode(c, t, id, text, sizes[s], enc, &len));
                                pt_len = len - BV_NONCE_SIZE - BV_TAG_SIZE;
                                padded = aes ? (size_t)bv_padme(pt_len) : pt_len;
                                memset(pt, 0, padded);
                                memcpy(pt, enc + BV_NONCE_SIZE, pt_len);
                                snprintf(name, sizeof(name), "type%u-len%zu%s", t, sizes[s], aes ? "-aes" : "");
                                put(dfd, name, &flags, 1, pt, padded);
                        }
        /* groups of three members (flag bit 3), raw and compressed */
        for (uint8_t aes = 0; aes <= 1; aes++)
                for (size_t s = 1; s < ELEMENTSOF(sizes); s++) {
                        BvGroupMember m[3];
                        uint8_t flags = (uint8_t)(8 | aes << 2), group[sizeof(text) + 16];
                        size_t len, pt_len, padded, at = 0;
                        char name[64];

                        for (size_t i = 0; i < 3; i++) {
                                m[i].length = (uint32_t)(sizes[s] / 3 + (i == 2 ? sizes[s] % 3 : 0));
                                at += m[i].length;
                        }
                        memcpy(group, text, at);
                        bv_group_put_trailer(group + at, m, 3);
                        ASSERT_OK(bv_object_encode(c, BV_OBJ_GROUP, bv_group_id, group, at + bv_group_trailer_size(3),
                                                   enc, &len));
                        pt_len = len - BV_NONCE_SIZE - BV_TAG_SIZE;
                        padded = aes ? (size_t)bv_padme(pt_len) : pt_len;
                        memset(pt, 0, padded);
                        memcpy(pt, enc + BV_NONCE_SIZE, pt_len);
                        snprintf(name, sizeof(name), "group-len%zu%s", sizes[s], aes ? "-aes" : "");
                        put(dfd, name, &flags, 1, pt, padded);
                }
        /* sealed objects as they are stored (SNAPSHOT: the harness's id is 0xa5 bytes) */
        memset(id, 0xa5, sizeof(id));
        for (size_t s = 1; s < ELEMENTSOF(sizes); s++) {
                uint8_t flags = BV_OBJ_SNAPSHOT - 1;
                size_t len;
                char name[64];

                ASSERT_OK(bv_object_encode(c, BV_OBJ_SNAPSHOT, id, text, sizes[s], enc, &len));
                snprintf(name, sizeof(name), "sealed-len%zu", sizes[s]);
                put(dfd, name, &flags, 1, enc, len);
        }
        bv_object_codec_free(c);
        bv_keyring_free(k);
}

/* fuzz-pack-index seeds: real packs of n small objects, the index raw or compressed. */
static void pack_seed(int outfd, int level, size_t n, bool groups, const char *name)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        _cleanup_free_ void *image = NULL;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), packs = -EBADF;
        BvKeyring *k = keyring(0);
        BvObjectCodec *c;
        BvPackWriter *w;
        BvPackEntry *entries;
        uint8_t pack_id[BV_PACK_ID_SIZE], data[64], id[BV_ID_SIZE], enc[256];
        size_t count, len, image_len;
        char path[64];

        ASSERT_TRUE(mkdirat(dfd, "packs", 0700) == 0);
        packs = openat(dfd, "packs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(packs >= 0);
        ASSERT_OK(bv_object_codec_new(k, level, &c));
        ASSERT_OK(bv_pack_writer_new(packs, c, &w));
        for (size_t i = 0; i < n; i++) {
                uint8_t type = (uint8_t)(BV_OBJ_CHUNK + i % 3);

                if (groups && i % 4 == 3) {
                        BvGroupMember m[3];
                        uint8_t g[3 * 16 + 16];
                        size_t nm = 2 + i % 2;

                        for (size_t j = 0; j < nm; j++) {
                                bvtest_fill_random(g + 16 * j, 16, 1000 + i * 3 + j);
                                bv_keyring_id(k, BV_ID_CHUNK, g + 16 * j, 16, m[j].id);
                                m[j].length = 16;
                        }
                        bv_group_put_trailer(g + 16 * nm, m, nm);
                        ASSERT_OK(bv_object_encode(c, BV_OBJ_GROUP, bv_group_id, g, 16 * nm + bv_group_trailer_size(nm),
                                                   enc, &len));
                        ASSERT_OK(bv_pack_writer_append_group(w, m, nm, enc, len));
                        continue;
                }
                size_t dlen = (i * 13) % sizeof(data);

                bvtest_fill_random(data, dlen, i + 1);
                bv_keyring_id(k, type == BV_OBJ_MAP ? BV_ID_MAP : BV_ID_CHUNK, data, dlen, id);
                ASSERT_OK(bv_object_encode(c, type, id, data, dlen, enc, &len));
                ASSERT_OK(bv_pack_writer_append(w, type, id, (uint32_t)dlen, enc, len));
        }
        ASSERT_OK(bv_pack_writer_commit(w, pack_id, &entries, &count));
        bv_pack_path(pack_id, path);
        ASSERT_OK(bv_read_file(packs, path, 1 << 20, &image, &image_len));
        put(outfd, name, image, image_len, NULL, 0);
        free(entries);
        bv_pack_writer_free(w);
        bv_object_codec_free(c);
        bv_keyring_free(k);
        bvtest_rm_rf(dir);
}

static int open_sub(const char *base, const char *sub)
{
        _cleanup_close_ int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd;

        ASSERT_TRUE(bfd >= 0);
        (void)mkdirat(bfd, sub, 0755);
        fd = openat(bfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        return fd;
}

int main(int argc, char **argv)
{
        int ofd, pfd;

        if (argc != 2) {
                fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
                return 2;
        }
        ofd = open_sub(argv[1], "object");
        object_seeds(ofd);
        pfd = open_sub(argv[1], "pack-index");
        pack_seed(pfd, 0, 1, false, "one-raw");
        pack_seed(pfd, 0, 5, false, "five-raw");
        pack_seed(pfd, 3, 4, false, "four-zstd");
        pack_seed(pfd, 3, 9, true, "nine-groups-zstd");
        safe_close(ofd);
        safe_close(pfd);
        return 0;
}
