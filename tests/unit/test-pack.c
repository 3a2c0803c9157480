/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bvtest.h"
#include "endian.h"
#include "fileio.h"
#include "group.h"
#include "hash.h"
#include "keyring.h"
#include "macro.h"
#include "object.h"
#include "pack.h"

#define MAX_ENTRIES ((BV_OBJECT_MAX_RAW - 8) / 48)

typedef struct Repo {
        char *dir;
        int packs;
        BvBackend *backend;
        BvKeyring *k;
        BvObjectCodec *c;
} Repo;

static void repo_open(Repo *r, const char *dir)
{
        uint8_t master[BV_MASTER_SIZE], repo_id[BV_REPO_ID_SIZE];
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ASSERT_TRUE(dfd >= 0);
        ASSERT_TRUE(mkdirat(dfd, "packs", 0700) == 0);
        r->packs = openat(dfd, "packs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(r->packs >= 0);
        ASSERT_OK(bv_backend_local_open(dir, false, &r->backend));
        bvtest_fill_random(master, sizeof(master), 1);
        bvtest_fill_random(repo_id, sizeof(repo_id), 2);
        ASSERT_OK(bv_keyring_new(BV_CIPHER_AES256GCM, master, repo_id, &r->k));
        ASSERT_OK(bv_object_codec_new(r->k, 3, &r->c));
}

static void repo_init(Repo *r)
{
        r->dir = bvtest_tmpdir();
        repo_open(r, r->dir);
}

static void repo_done(Repo *r)
{
        bv_object_codec_free(r->c);
        bv_keyring_free(r->k);
        safe_close(r->packs);
        bv_backend_close(r->backend);
        bvtest_rm_rf(r->dir);
        free(r->dir);
}

/* The content of test object number i: sizes from 1 byte to 1.5 MiB, text and noise. */
static size_t gen(uint64_t i, uint8_t *buf)
{
        size_t len = i % 7 == 3 ? 1536 * 1024 : i % 5 == 0 ? 200000 : (i * 37) % 5000 + 1;

        if (i % 2)
                bvtest_fill_random(buf, len, 100 + i);
        else
                for (size_t j = 0; j < len; j++)
                        buf[j] = (uint8_t)("pack test data "[j % 15] + i);
        return len;
}

#define GEN_MAX (1536 * 1024)

static void append_obj(Repo *r, BvPackWriter *w, uint64_t i)
{
        _cleanup_free_ uint8_t *data = malloc(GEN_MAX), *enc = malloc(bv_object_bound(GEN_MAX));
        uint8_t id[BV_ID_SIZE];
        size_t len, enc_len;

        ASSERT_TRUE(data && enc);
        len = gen(i, data);
        bv_keyring_id(r->k, BV_ID_CHUNK, data, len, id);
        ASSERT_OK(bv_object_encode(r->c, BV_OBJ_CHUNK, id, data, len, enc, &enc_len));
        ASSERT_OK(bv_pack_writer_append(w, BV_OBJ_CHUNK, id, (uint32_t)len, enc, enc_len));
}

/* Reads object i back through the pack set and checks it. */
static void check_obj(Repo *r, BvPackSet *ps, const uint8_t pack_id[BV_PACK_ID_SIZE], const BvPackEntry *e,
                      uint64_t i)
{
        _cleanup_free_ uint8_t *want = malloc(GEN_MAX), *got = malloc(GEN_MAX), *enc = malloc(e->length);
        size_t len, got_len;

        ASSERT_TRUE(want && got && enc);
        len = gen(i, want);
        ASSERT_EQ(e->raw_length, len);
        ASSERT_EQ(e->type, BV_OBJ_CHUNK);
        ASSERT_OK(bv_packset_read(ps, pack_id, e->offset, enc, e->length));
        ASSERT_OK(bv_object_decode(r->c, BV_OBJ_CHUNK, e->id, enc, e->length, got, GEN_MAX, &got_len));
        ASSERT_EQ(got_len, len);
        ASSERT_MEMEQ(got, want, len);
}

static void write_pack(Repo *r, uint64_t first, size_t n, uint8_t pack_id[BV_PACK_ID_SIZE],
                       BvPackEntry **entries)
{
        BvPackWriter *w;
        size_t count;

        ASSERT_OK(bv_pack_writer_new(r->packs, r->c, &w));
        for (size_t i = 0; i < n; i++)
                append_obj(r, w, first + i);
        ASSERT_EQ(bv_pack_writer_count(w), n);
        ASSERT_OK(bv_pack_writer_commit(w, pack_id, entries, &count));
        ASSERT_EQ(count, n);
        ASSERT_EQ(bv_pack_writer_count(w), 0);
        bv_pack_writer_free(w);
}

static void assert_entries_equal(const BvPackEntry *a, const BvPackEntry *b, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                ASSERT_MEMEQ(a[i].id, b[i].id, BV_ID_SIZE);
                ASSERT_EQ(a[i].type, b[i].type);
                ASSERT_EQ(a[i].offset, b[i].offset);
                ASSERT_EQ(a[i].length, b[i].length);
                ASSERT_EQ(a[i].raw_length, b[i].raw_length);
                ASSERT_EQ(a[i].member, b[i].member);
        }
}

static int list_cb(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud)
{
        uint64_t *total = ud;
        *total += size;
        return 0;
}

static int list_stop_cb(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *ud)
{
        return -ECANCELED;
}

static uint64_t pack_file_size(Repo *r, const uint8_t pack_id[BV_PACK_ID_SIZE])
{
        char path[64];
        struct stat st;

        bv_pack_path(pack_id, path);
        ASSERT_TRUE(fstatat(r->packs, path, &st, 0) == 0);
        return (uint64_t)st.st_size;
}

TEST(write_and_read_back)
{
        Repo r;
        BvPackWriter *w;
        BvPackSet *ps;
        BvPackEntry *entries, *again, *mem;
        uint8_t pack_id[BV_PACK_ID_SIZE], pack2[BV_PACK_ID_SIZE];
        size_t n = 40, count;
        uint64_t size, total = 0;
        _cleanup_free_ void *image = NULL;
        size_t image_len;
        char path[64];

        repo_init(&r);
        ASSERT_OK(bv_pack_writer_new(r.packs, r.c, &w));
        ASSERT_ERROR(bv_pack_writer_commit(w, pack_id, &entries, &count), ENODATA);
        for (size_t i = 0; i < n; i++)
                append_obj(&r, w, i);
        ASSERT_TRUE(bv_pack_writer_size(w) > 3 * 1536 * 1024);
        ASSERT_OK(bv_pack_writer_commit(w, pack_id, &entries, &count));
        ASSERT_EQ(count, n);

        size = pack_file_size(&r, pack_id);
        ASSERT_EQ(entries[0].offset, BV_PACK_HEADER_SIZE);
        ASSERT_TRUE(entries[n - 1].offset + entries[n - 1].length < size - BV_PACK_FOOTER_SIZE);

        ASSERT_OK(bv_packset_new(r.backend, &ps));
        for (size_t i = 0; i < n; i++)
                check_obj(&r, ps, pack_id, &entries[i], i);
        ASSERT_OK(bv_packset_read_index(ps, r.c, pack_id, &again, &count));
        ASSERT_EQ(count, n);
        assert_entries_equal(entries, again, n);
        free(again);

        bv_pack_path(pack_id, path);
        ASSERT_OK(bv_read_file(r.packs, path, 64 << 20, &image, &image_len));
        ASSERT_OK(bv_pack_parse_index(r.c, pack_id, image, image_len, &mem, &count));
        ASSERT_EQ(count, n);
        assert_entries_equal(entries, mem, n);
        free(mem);
        ASSERT_ERROR(bv_pack_parse_index(r.c, pack_id, image, 63, &mem, &count), EBADMSG);
        free(entries);

        /* the same writer starts a second pack */
        append_obj(&r, w, 1000);
        ASSERT_OK(bv_pack_writer_commit(w, pack2, &entries, &count));
        ASSERT_EQ(count, 1);
        ASSERT_TRUE(memcmp(pack_id, pack2, BV_PACK_ID_SIZE) != 0);
        check_obj(&r, ps, pack2, &entries[0], 1000);
        free(entries);
        bv_pack_writer_free(w);

        ASSERT_EQ(bv_packset_list(ps, list_cb, &total), 2);
        ASSERT_EQ(total, size + pack_file_size(&r, pack2));
        ASSERT_ERROR(bv_packset_list(ps, list_stop_cb, NULL), ECANCELED);
        bv_packset_free(ps);
        repo_done(&r);
}

static int files_seen;

static int count_file(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (flag == FTW_F)
                files_seen++;
        return 0;
}

/* Regular files below dir (directories do not count). */
static int count_files(const char *dir)
{
        files_seen = 0;
        ASSERT_TRUE(nftw(dir, count_file, 16, FTW_PHYS) == 0);
        return files_seen;
}

TEST(uncommitted_pack_leaves_nothing)
{
        Repo r;
        BvPackWriter *w;
        BvPackEntry *entries;
        uint8_t pack_id[BV_PACK_ID_SIZE];

        repo_init(&r);
        ASSERT_OK(bv_pack_writer_new(r.packs, r.c, &w));
        for (size_t i = 0; i < 5; i++)
                append_obj(&r, w, i);
        bv_pack_writer_free(w);
        ASSERT_EQ(count_files(r.dir), 0);

        write_pack(&r, 0, 2, pack_id, &entries);
        free(entries);
        ASSERT_EQ(count_files(r.dir), 1);
        repo_done(&r);
}

TEST(bad_arguments)
{
        Repo r;
        BvPackWriter *w;
        uint8_t id[BV_ID_SIZE] = { 0 }, enc[64] = { 0 };

        repo_init(&r);
        ASSERT_OK(bv_pack_writer_new(r.packs, r.c, &w));
        ASSERT_ERROR(bv_pack_writer_append(w, BV_OBJ_CHUNK, id, 0, enc, 35), EINVAL);
        ASSERT_ERROR(bv_pack_writer_append(w, 9, id, 0, enc, 40), EINVAL);
        ASSERT_ERROR(bv_pack_writer_append(w, BV_OBJ_CHUNK, id, BV_OBJECT_MAX_RAW + 1, enc, 40), EINVAL);
        ASSERT_EQ(bv_pack_writer_count(w), 0);
        bv_pack_writer_free(w);
        ASSERT_ERROR(bv_pack_writer_new(-1, r.c, &w), EINVAL);
        repo_done(&r);
}

static int pack_fd(Repo *r, const uint8_t pack_id[BV_PACK_ID_SIZE])
{
        char path[64];
        int fd;

        bv_pack_path(pack_id, path);
        fd = openat(r->packs, path, O_RDWR | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        return fd;
}

/* Writes a fresh pack, applies one corruption at offset (from the end if negative) and
 * checks that reading its index fails with err. */
static void corrupt_case(Repo *r, BvPackSet *ps, int64_t where, uint8_t xor, bool fix_footer, int err)
{
        BvPackEntry *entries, *got;
        uint8_t pack_id[BV_PACK_ID_SIZE], b;
        size_t count;
        uint64_t size, off;
        _cleanup_close_ int fd = -EBADF;

        write_pack(r, 7, 3, pack_id, &entries);
        size = pack_file_size(r, pack_id);
        off = where < 0 ? size + (uint64_t)where : (uint64_t)where;
        fd = pack_fd(r, pack_id);
        ASSERT_EQ(pread(fd, &b, 1, (off_t)off), 1);
        b ^= xor;
        ASSERT_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
        if (fix_footer) {
                uint8_t footer[BV_PACK_FOOTER_SIZE], digest[BV_HASH_SIZE];
                ASSERT_EQ(pread(fd, footer, sizeof(footer), (off_t)(size - sizeof(footer))), sizeof(footer));
                bv_sha256(footer, 20, digest);
                memcpy(footer + 20, digest, 4);
                ASSERT_EQ(pwrite(fd, footer, sizeof(footer), (off_t)(size - sizeof(footer))), sizeof(footer));
        }
        count = 999;
        ASSERT_ERROR(bv_packset_read_index(ps, r->c, pack_id, &got, &count), err);
        ASSERT_EQ(count, 999);
        free(entries);
}

TEST(corrupt_packs)
{
        Repo r;
        BvPackSet *ps;

        repo_init(&r);
        ASSERT_OK(bv_packset_new(r.backend, &ps));
        corrupt_case(&r, ps, 0, 0x20, false, EBADMSG);                /* header magic */
        corrupt_case(&r, ps, 8, 0x02, false, EPROTONOSUPPORT);        /* header version */
        corrupt_case(&r, ps, 12, 0x01, false, EPROTONOSUPPORT);       /* header flags */
        corrupt_case(&r, ps, 20, 0x01, false, EBADMSG);               /* header pack id */
        corrupt_case(&r, ps, -32 + 16, 0x02, false, EPROTONOSUPPORT); /* footer version */
        corrupt_case(&r, ps, -32 + 20, 0x01, false, EBADMSG);         /* footer check */
        corrupt_case(&r, ps, -1, 0x01, false, EBADMSG);               /* footer magic */
        corrupt_case(&r, ps, -32, 0x01, true, EBADMSG);               /* index offset */
        corrupt_case(&r, ps, -32 + 8, 0x01, true, EBADMSG);           /* index length */
        corrupt_case(&r, ps, -32 + 12, 0x01, true, EBADMSG);          /* entry count */
        corrupt_case(&r, ps, -32 - 20, 0x01, false, EBADMSG);         /* pack index object */
        corrupt_case(&r, ps, -32 - 1, 0x80, false, EBADMSG);          /* its tag */
        bv_packset_free(ps);
        repo_done(&r);
}

TEST(truncated_and_missing)
{
        Repo r;
        BvPackSet *ps;
        BvPackEntry *entries, *got;
        uint8_t pack_id[BV_PACK_ID_SIZE], missing[BV_PACK_ID_SIZE] = { 0xab }, buf[64];
        _cleanup_free_ uint8_t *big = NULL;
        size_t count;
        _cleanup_close_ int fd = -EBADF;

        repo_init(&r);
        ASSERT_OK(bv_packset_new(r.backend, &ps));
        ASSERT_ERROR(bv_packset_read(ps, missing, 0, buf, sizeof(buf)), EUCLEAN);
        ASSERT_ERROR(bv_packset_read_index(ps, r.c, missing, &got, &count), EUCLEAN);
        ASSERT_ERROR(bv_packset_advise(ps, missing, 0, sizeof(buf)), EUCLEAN);
        ASSERT_ERROR(bv_packset_advise(NULL, missing, 0, sizeof(buf)), EINVAL);

        write_pack(&r, 20, 4, pack_id, &entries);
        /* announced reads, with no stream prefetch, read what they read without */
        ASSERT_OK(bv_packset_advise(ps, pack_id, entries[2].offset, entries[2].length));
        bv_packset_set_exact(ps, true);
        check_obj(&r, ps, pack_id, &entries[2], 22);
        bv_packset_set_exact(ps, false);
        check_obj(&r, ps, pack_id, &entries[3], 23); /* cached open before the truncation */
        fd = pack_fd(&r, pack_id);
        ASSERT_TRUE(ftruncate(fd, entries[3].offset + entries[3].length / 2) == 0);
        ASSERT_ERROR(bv_packset_read_index(ps, r.c, pack_id, &got, &count), EBADMSG);
        big = malloc(entries[3].length);
        ASSERT_TRUE(big != NULL);
        ASSERT_ERROR(bv_packset_read(ps, pack_id, entries[3].offset, big, entries[3].length), EBADMSG);
        check_obj(&r, ps, pack_id, &entries[0], 20);
        ASSERT_ERROR(bv_packset_read(ps, pack_id, UINT64_MAX - 2, buf, sizeof(buf)), EBADMSG);
        ASSERT_TRUE(ftruncate(fd, 40) == 0);
        ASSERT_ERROR(bv_packset_read_index(ps, r.c, pack_id, &got, &count), EBADMSG);
        free(entries);
        bv_packset_free(ps);
        repo_done(&r);
}

static const uint64_t group_objs[3] = { 16, 18, 26 }; /* small text objects */

/* Writes a pack of: a chunk, a group of three members, a chunk. Returns its image. */
static uint8_t *write_group_pack(Repo *r, uint8_t pack_id[BV_PACK_ID_SIZE], BvPackEntry **entries, size_t *n,
                                 size_t *size)
{
        _cleanup_free_ uint8_t *raw = malloc(GEN_MAX), *enc = malloc(bv_object_bound(GEN_MAX));
        BvGroupMember m[3];
        BvPackWriter *w;
        uint8_t *image = NULL;
        size_t off = 0, enc_len;
        char path[64];

        ASSERT_TRUE(raw && enc);
        ASSERT_OK(bv_pack_writer_new(r->packs, r->c, &w));
        append_obj(r, w, 2);
        for (size_t i = 0; i < 3; i++) {
                size_t len = gen(group_objs[i], raw + off); /* text: compresses */
                bv_keyring_id(r->k, BV_ID_CHUNK, raw + off, len, m[i].id);
                m[i].length = (uint32_t)len;
                off += len;
        }
        bv_group_put_trailer(raw + off, m, 3);
        off += bv_group_trailer_size(3);
        ASSERT_OK(bv_object_encode(r->c, BV_OBJ_GROUP, bv_group_id, raw, off, enc, &enc_len));
        ASSERT_ERROR(bv_pack_writer_append_group(w, m, 1, enc, enc_len), EINVAL);
        {
                BvGroupMember odd[3];

                memcpy(odd, m, sizeof(odd));
                odd[1].length = 0;
                ASSERT_ERROR(bv_pack_writer_append_group(w, odd, 3, enc, enc_len), EINVAL);
                odd[1].length = BV_OBJECT_MAX_RAW + 1;
                ASSERT_ERROR(bv_pack_writer_append_group(w, odd, 3, enc, enc_len), EINVAL);
        }
        ASSERT_ERROR(bv_pack_writer_append(w, BV_OBJ_GROUP, m[0].id, m[0].length, enc, enc_len), EINVAL);
        ASSERT_OK(bv_pack_writer_append_group(w, m, 3, enc, enc_len));
        append_obj(r, w, 4);
        ASSERT_EQ(bv_pack_writer_count(w), 5);
        ASSERT_OK(bv_pack_writer_commit(w, pack_id, entries, n));
        bv_pack_writer_free(w);
        bv_pack_path(pack_id, path);
        ASSERT_OK(bv_read_file(r->packs, path, 64 << 20, (void **)&image, size));
        return image;
}

/* Replaces the pack index of a pack image with entries (as many as before), sealed anew. */
static void reseal_index(Repo *r, const uint8_t pack_id[BV_PACK_ID_SIZE], uint8_t *image, size_t size,
                         const BvPackEntry *e, size_t n)
{
        size_t plen = 8 + 48 * n, olen;
        _cleanup_free_ uint8_t *payload = calloc(1, plen), *obj = malloc(bv_object_bound(plen));
        uint8_t id[BV_ID_SIZE] = { 0 };
        uint64_t off = get_le64(image + size - BV_PACK_FOOTER_SIZE);

        ASSERT_TRUE(payload && obj);
        put_le32(payload, (uint32_t)n);
        for (size_t i = 0; i < n; i++) {
                uint8_t *p = payload + 8 + 48 * i;
                memcpy(p, e[i].id, BV_ID_SIZE);
                put_le32(p + 32, e[i].offset);
                put_le32(p + 36, e[i].length);
                put_le32(p + 40, e[i].raw_length);
                p[44] = e[i].type;
                p[45] = e[i].member;
        }
        memcpy(id, pack_id, BV_PACK_ID_SIZE);
        ASSERT_OK(bv_object_encode(r->c, BV_OBJ_PACKINDEX, id, payload, plen, obj, &olen));
        ASSERT_EQ(olen, get_le32(image + size - BV_PACK_FOOTER_SIZE + 8));
        memcpy(image + off, obj, olen);
}

/* Groups: members share the group's location, numbered from 0; a member read out of the
 * decoded group re-hashes to its id; the pack index rules for groups are enforced. */
TEST(groups)
{
        Repo r;
        BvPackEntry *entries, *mem, bad[5];
        uint8_t pack_id[BV_PACK_ID_SIZE];
        _cleanup_free_ uint8_t *want = malloc(GEN_MAX), *image = NULL;
        size_t n, size, count;

        repo_init(&r);
        image = write_group_pack(&r, pack_id, &entries, &n, &size);
        ASSERT_EQ(n, 5);
        ASSERT_EQ(entries[0].type, BV_OBJ_CHUNK);
        ASSERT_EQ(entries[4].type, BV_OBJ_CHUNK);
        for (size_t i = 1; i <= 3; i++) {
                ASSERT_EQ(entries[i].type, BV_OBJ_GROUP);
                ASSERT_EQ(entries[i].member, i - 1);
                ASSERT_EQ(entries[i].offset, entries[1].offset);
                ASSERT_EQ(entries[i].length, entries[1].length);
        }
        ASSERT_EQ(entries[4].offset, entries[1].offset + entries[1].length);

        /* read back: decode the group, take each member out */
        ASSERT_OK(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count));
        assert_entries_equal(entries, mem, n);
        free(mem);
        {
                void *raw;
                size_t raw_len, off, len;
                uint8_t id[BV_ID_SIZE];

                ASSERT_OK(bv_object_decode_alloc(r.c, BV_OBJ_GROUP, bv_group_id, image + entries[1].offset,
                                                 entries[1].length, &raw, &raw_len));
                for (unsigned k = 0; k < 3; k++) {
                        ASSERT_OK(bv_group_member(raw, raw_len, k, &off, &len));
                        ASSERT_EQ(len, gen(group_objs[k], want));
                        ASSERT_MEMEQ((uint8_t *)raw + off, want, len);
                        bv_keyring_id(r.k, BV_ID_CHUNK, (uint8_t *)raw + off, len, id);
                        ASSERT_MEMEQ(id, entries[1 + k].id, BV_ID_SIZE);
                }
                ASSERT_ERROR(bv_group_member(raw, raw_len, 3, &off, &len), EBADMSG);
                free(raw);
                /* a group is not a chunk: the type is part of what is authenticated */
                ASSERT_ERROR(bv_object_decode_alloc(r.c, BV_OBJ_CHUNK, entries[1].id, image + entries[1].offset,
                                                    entries[1].length, &raw, &raw_len),
                             EBADMSG);
        }

        /* pack index rules */
        memcpy(bad, entries, sizeof(bad));
        bad[3].member = 1; /* numbers must count up */
        reseal_index(&r, pack_id, image, size, bad, 5);
        ASSERT_ERROR(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count), EBADMSG);
        memcpy(bad, entries, sizeof(bad));
        bad[2].offset += 1; /* a member elsewhere than its group */
        reseal_index(&r, pack_id, image, size, bad, 5);
        ASSERT_ERROR(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count), EBADMSG);
        memcpy(bad, entries, sizeof(bad));
        bad[0].member = 1; /* a member number on a chunk */
        reseal_index(&r, pack_id, image, size, bad, 5);
        ASSERT_ERROR(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count), EBADMSG);
        memcpy(bad, entries, sizeof(bad));
        bad[2].type = bad[3].type = BV_OBJ_CHUNK; /* a group of one member, then objects tiling wrongly */
        bad[2].member = bad[3].member = 0;
        reseal_index(&r, pack_id, image, size, bad, 5);
        ASSERT_ERROR(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count), EBADMSG);
        memcpy(bad, entries, sizeof(bad));
        bad[1].type = BV_OBJ_CHUNK; /* a group's second member without a first */
        reseal_index(&r, pack_id, image, size, bad, 5);
        ASSERT_ERROR(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count), EBADMSG);
        reseal_index(&r, pack_id, image, size, entries, 5); /* and the original again parses */
        ASSERT_OK(bv_pack_parse_index(r.c, pack_id, image, size, &mem, &count));
        free(mem);

        free(entries);
        repo_done(&r);
}

/* The trailer of a decoded group: every malformation is EBADMSG. */
TEST(group_trailer)
{
        BvGroupMember m[3] = { { .length = 5 }, { .length = 1 }, { .length = 10 } };
        uint8_t g[16 + 4 * 3 + 4];
        size_t off, len;

        memset(g, 'x', 16);
        bv_group_put_trailer(g + 16, m, 3);
        ASSERT_OK(bv_group_member(g, sizeof(g), 0, &off, &len));
        ASSERT_EQ(off, 0);
        ASSERT_EQ(len, 5);
        ASSERT_OK(bv_group_member(g, sizeof(g), 2, &off, &len));
        ASSERT_EQ(off, 6);
        ASSERT_EQ(len, 10);
        ASSERT_ERROR(bv_group_member(g, sizeof(g), 3, &off, &len), EBADMSG);
        ASSERT_ERROR(bv_group_member(g + 1, sizeof(g) - 1, 0, &off, &len), EBADMSG); /* lengths do not add up */
        ASSERT_ERROR(bv_group_member(g, 3, 0, &off, &len), EBADMSG);
        put_le32(g + sizeof(g) - 4, 1); /* one member: not a group */
        ASSERT_ERROR(bv_group_member(g, sizeof(g), 0, &off, &len), EBADMSG);
        put_le32(g + sizeof(g) - 4, 256);
        ASSERT_ERROR(bv_group_member(g, sizeof(g), 0, &off, &len), EBADMSG);
        put_le32(g + sizeof(g) - 4, 3);
        put_le32(g + 16 + 4, 0); /* an empty member */
        put_le32(g + 16, 6);
        ASSERT_ERROR(bv_group_member(g, sizeof(g), 0, &off, &len), EBADMSG);
        put_le32(g + 16, 0xffffffff); /* a length past the end */
        ASSERT_ERROR(bv_group_member(g, sizeof(g), 0, &off, &len), EBADMSG);
}

/* The pack index holds at most MAX_ENTRIES: one more is -EFBIG, and a full pack reads back. */
TEST(entry_limit)
{
        Repo r;
        BvPackWriter *w;
        BvPackSet *ps;
        BvPackEntry *entries, *got;
        uint8_t id[BV_ID_SIZE] = { 0 }, enc[64], pack_id[BV_PACK_ID_SIZE];
        size_t enc_len, count;

        repo_init(&r);
        ASSERT_OK(bv_object_encode(r.c, BV_OBJ_SNAPSHOT, id, NULL, 0, enc, &enc_len));
        ASSERT_OK(bv_pack_writer_new(r.packs, r.c, &w));
        for (size_t i = 0; i < MAX_ENTRIES; i++) {
                put_le32(id, (uint32_t)i);
                ASSERT_OK(bv_pack_writer_append(w, BV_OBJ_SNAPSHOT, id, 0, enc, enc_len));
        }
        ASSERT_ERROR(bv_pack_writer_append(w, BV_OBJ_SNAPSHOT, id, 0, enc, enc_len), EFBIG);
        ASSERT_OK(bv_pack_writer_commit(w, pack_id, &entries, &count));
        ASSERT_EQ(count, MAX_ENTRIES);
        ASSERT_OK(bv_packset_new(r.backend, &ps));
        ASSERT_OK(bv_packset_read_index(ps, r.c, pack_id, &got, &count));
        ASSERT_EQ(count, MAX_ENTRIES);
        assert_entries_equal(entries, got, count);
        free(got);
        free(entries);
        bv_packset_free(ps);
        bv_pack_writer_free(w);
        repo_done(&r);
}

#define MANY_PACKS 70

typedef struct Many {
        Repo *r;
        BvPackSet *ps;
        uint8_t ids[MANY_PACKS][BV_PACK_ID_SIZE];
        BvPackEntry *entries[MANY_PACKS];
} Many;

static void *reader_thread(void *arg)
{
        Many *m = arg;
        for (int round = 0; round < 3; round++)
                for (size_t p = 0; p < MANY_PACKS; p++)
                        check_obj(m->r, m->ps, m->ids[p], &m->entries[p][0], 2000 + 2 * p);
        return NULL;
}

/* More packs than the fd cache holds, read from several threads at once. */
TEST(cache_eviction_threads)
{
        Repo r, own[3];
        Many m = { .r = &r }, mi[3];
        pthread_t t[3];
        uint64_t total = 0;

        repo_init(&r);
        for (size_t p = 0; p < MANY_PACKS; p++)
                write_pack(&r, 2000 + 2 * p, 1, m.ids[p], &m.entries[p]);
        ASSERT_OK(bv_packset_new(r.backend, &m.ps));
        /* one codec per thread: the codec is not shared */
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                own[i] = r;
                ASSERT_OK(bv_object_codec_new(r.k, 3, &own[i].c));
                mi[i] = m;
                mi[i].r = &own[i];
                ASSERT_TRUE(pthread_create(&t[i], NULL, reader_thread, &mi[i]) == 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                ASSERT_TRUE(pthread_join(t[i], NULL) == 0);
                bv_object_codec_free(own[i].c);
        }
        ASSERT_EQ(bv_packset_list(m.ps, list_cb, &total), MANY_PACKS);
        for (size_t p = 0; p < MANY_PACKS; p++)
                free(m.entries[p]);
        bv_packset_free(m.ps);
        repo_done(&r);
}

/* A pack that does not fit: -ENOSPC and nothing left behind. Returns false if tmpfs cannot
 * be mounted here. */
static bool test_enospc(void)
{
        _cleanup_free_ char *dir = bvtest_tmpdir();
        Repo r = { .dir = dir };
        BvPackWriter *w;
        BvPackEntry *entries;
        uint8_t pack_id[BV_PACK_ID_SIZE];
        size_t count;
        int res = 0;

        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m,mode=0700") < 0) {
                printf("# cannot mount tmpfs on %s: %s\n", dir, strerror(errno));
                rmdir(dir);
                return false;
        }
        repo_open(&r, dir);
        ASSERT_OK(bv_pack_writer_new(r.packs, r.c, &w));
        for (uint64_t i = 3; i < 60; i += 7) { /* 1.5 MiB objects */
                _cleanup_free_ uint8_t *data = malloc(GEN_MAX), *enc = malloc(bv_object_bound(GEN_MAX));
                uint8_t id[BV_ID_SIZE];
                size_t len = gen(i, data), enc_len;
                bv_keyring_id(r.k, BV_ID_CHUNK, data, len, id);
                ASSERT_OK(bv_object_encode(r.c, BV_OBJ_CHUNK, id, data, len, enc, &enc_len));
                res = bv_pack_writer_append(w, BV_OBJ_CHUNK, id, (uint32_t)len, enc, enc_len);
                if (res < 0)
                        break;
        }
        if (res >= 0)
                res = bv_pack_writer_commit(w, pack_id, &entries, &count);
        ASSERT_ERROR(res, ENOSPC);
        ASSERT_EQ(bv_pack_writer_count(w), 0);
        bv_pack_writer_free(w);
        ASSERT_EQ(count_files(dir), 0);

        bv_object_codec_free(r.c);
        bv_keyring_free(r.k);
        safe_close(r.packs);
        bv_backend_close(r.backend);
        ASSERT_TRUE(umount(dir) == 0);
        rmdir(dir);
        return true;
}

/* Prefetch hints: nothing for scattered reads; a run of nearby reads (in any order) asks for
 * the next window once, and again as it nears the end of it; a run that starts over elsewhere
 * in the pack, even below what the old one asked for, gets its own hint. */
TEST(read_stream_prefetch)
{
        const uint64_t M = 1u << 20, K = 1024;
        BvReadStream s = { 0 };
        uint64_t from = 0;

        ASSERT_EQ(bv_read_stream_note(&s, 10 * M, 10 * M + 40 * K, &from), 0u);
        ASSERT_EQ(bv_read_stream_note(&s, 20 * M, 20 * M + 40 * K, &from), 0u);
        ASSERT_EQ(bv_read_stream_note(&s, 5 * M, 5 * M + 40 * K, &from), 0u);

        /* 20 MiB, then slightly out of order: the third nearby read starts the stream */
        ASSERT_EQ(bv_read_stream_note(&s, 20 * M, 20 * M + 40 * K, &from), 0u);
        ASSERT_EQ(bv_read_stream_note(&s, 20 * M + 80 * K, 20 * M + 120 * K, &from), 0u);
        ASSERT_EQ(bv_read_stream_note(&s, 20 * M + 40 * K, 20 * M + 80 * K, &from), (uint64_t)BV_READ_PREFETCH);
        ASSERT_EQ(from, 20 * M + 80 * K);
        /* within the first half of the window: asked for already */
        ASSERT_EQ(bv_read_stream_note(&s, 21 * M, 21 * M + 40 * K, &from), 0u);
        /* past it: the window moves on, from where the last one ended */
        ASSERT_EQ(bv_read_stream_note(&s, 22 * M + 100 * K, 22 * M + 140 * K, &from),
                  22 * M + 140 * K - from + BV_READ_PREFETCH);
        ASSERT_EQ(from, 20 * M + 80 * K + BV_READ_PREFETCH);

        /* a second pass from the start of the pack */
        ASSERT_EQ(bv_read_stream_note(&s, 0, 40 * K, &from), 0u);
        ASSERT_EQ(bv_read_stream_note(&s, 40 * K, 80 * K, &from), 0u);
        ASSERT_EQ(bv_read_stream_note(&s, 80 * K, 120 * K, &from), (uint64_t)BV_READ_PREFETCH);
        ASSERT_EQ(from, 120 * K);
}

int main(void)
{
        RUN(write_and_read_back);
        RUN(groups);
        RUN(group_trailer);
        RUN(read_stream_prefetch);
        RUN(uncommitted_pack_leaves_nothing);
        RUN(bad_arguments);
        RUN(corrupt_packs);
        RUN(truncated_and_missing);
        RUN(entry_limit);
        RUN(cache_eviction_threads);
        if (!test_enospc()) {
                printf("skip - enospc: needs root to mount a tmpfs\n");
                return 77;
        }
        printf("ok - enospc\n");
        return 0;
}
