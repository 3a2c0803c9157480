/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "bvtest.h"
#include "fileio.h"
#include "macro.h"
#include "repo.h"

/* A repository directory inside a fresh temporary directory, plus a key file. */
typedef struct Fixture {
        char *dir, *repo, *key, *key2;
} Fixture;

static void write_file(const char *path, const void *data, size_t len)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(bv_write_all(fd, data, len));
}

static void write_key(const char *path, uint64_t seed)
{
        uint8_t key[32];

        bvtest_fill_random(key, sizeof(key), seed);
        write_file(path, key, sizeof(key));
}

static Fixture fixture_new(void)
{
        Fixture f = { .dir = bvtest_tmpdir() };

        ASSERT_TRUE(asprintf(&f.repo, "%s/repo", f.dir) > 0);
        ASSERT_TRUE(asprintf(&f.key, "%s/key", f.dir) > 0);
        ASSERT_TRUE(asprintf(&f.key2, "%s/key2", f.dir) > 0);
        write_key(f.key, 1);
        write_key(f.key2, 2);
        return f;
}

static void fixture_done(Fixture *f)
{
        bvtest_rm_rf(f->dir);
        free(f->dir);
        free(f->repo);
        free(f->key);
        free(f->key2);
}

static BvRepoConfig small_config(BvCipher cipher)
{
        BvRepoConfig c;
        bv_repo_config_default(&c);
        c.cipher = cipher;
        return c;
}

/* Rewrites repo/config through fn (a json-c edit) without fixing the MAC. */
static void edit_config(const char *repo, void (*fn)(json_object *o))
{
        _cleanup_close_ int dfd = open(repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        json_object *o;
        size_t len;

        ASSERT_TRUE(dfd >= 0);
        ASSERT_OK(bv_read_file(dfd, "config", 65536, (void **)&text, &len));
        o = json_tokener_parse(text);
        ASSERT_TRUE(o != NULL);
        fn(o);
        const char *s = json_object_to_json_string(o);
        ASSERT_OK(bv_write_file_durable(dfd, "config", s, strlen(s), true));
        json_object_put(o);
}

/* Removes repo/leases (0), or says why not (-ENOENT: there is none). */
static int rmdir_leases(const char *repo)
{
        _cleanup_free_ char *p = NULL;
        ASSERT_TRUE(asprintf(&p, "%s/leases", repo) > 0);
        return rmdir(p) < 0 ? -errno : 0;
}

TEST(init_open_key_file)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM), peek;
        BvSecret s = { .key_file = f.key };
        BvRepo *r = NULL;

        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        ASSERT_OK(bv_repo_peek_config(f.repo, &peek));
        ASSERT_MEMEQ(&peek, &c, sizeof(c));

        ASSERT_OK(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r));
        ASSERT_MEMEQ(bv_repo_config(r), &c, sizeof(c));
        ASSERT_EQ(strlen(bv_repo_id_hex(r)), 32);
        ASSERT_STREQ(bv_repo_path(r), f.repo);
        ASSERT_TRUE(bv_repo_dirfd(r, "packs") >= 0);
        ASSERT_TRUE(bv_repo_dirfd(r, "snapshots") >= 0);
        ASSERT_ERROR(bv_repo_dirfd(r, "nope"), ENOENT);

        BvChunkerParams p;
        bv_repo_chunker_params(r, &p);
        ASSERT_EQ(p.avg, c.chunker.avg);

        /* an id nobody stored: referenced but not indexed means repair */
        uint8_t id[BV_ID_SIZE] = { 1 }, buf[16];
        size_t len;
        BvObjectCodec *codec;
        ASSERT_OK(bv_object_codec_new(bv_repo_keyring(r), 3, &codec));
        ASSERT_ERROR(bv_repo_read_object(r, codec, BV_OBJ_CHUNK, id, buf, sizeof(buf), &len), EUCLEAN);
        bv_object_codec_free(codec);

        BvSnapshot *const *list;
        size_t n = 99;
        ASSERT_OK(bv_repo_snapshots(r, &list, &n));
        ASSERT_EQ(n, 0);
        const BvSnapshot *snap;
        ASSERT_ERROR(bv_repo_find_snapshot(r, "latest", &snap), ENOENT);
        bv_repo_close(r);

        /* wrong, missing, or the wrong kind of secret */
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .key_file = f.key2 }, BV_OPEN_READ, &r), ENOKEY);
        ASSERT_ERROR(bv_repo_open(f.repo, NULL, BV_OPEN_READ, &r), ENOKEY);
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){}, BV_OPEN_READ, &r), ENOKEY);
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .passphrase = "x" }, BV_OPEN_READ, &r), ENOKEY);
        fixture_done(&f);
}

TEST(init_refuses)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM), bad;
        BvSecret s = { .key_file = f.key };
        char *other;

        ASSERT_ERROR(bv_repo_init(f.repo, &c, NULL), ENOKEY);
        ASSERT_ERROR(bv_repo_init(f.repo, &c, &(BvSecret){ .passphrase = "a", .key_file = f.key }), EINVAL);
        BvRepoConfig none = small_config(BV_CIPHER_NONE);
        ASSERT_ERROR(bv_repo_init(f.repo, &none, &s), EINVAL);
        bad = c;
        bad.chunker.avg = 5000; /* not a multiple of 4 KiB */
        ASSERT_ERROR(bv_repo_init(f.repo, &bad, &s), EINVAL);
        bad = c;
        bad.pack_target = 1;
        ASSERT_ERROR(bv_repo_init(f.repo, &bad, &s), EINVAL);
        /* a key file too short to be a key */
        char *tiny;
        ASSERT_TRUE(asprintf(&tiny, "%s/tiny", f.dir) > 0);
        write_file(tiny, "short", 5);
        ASSERT_ERROR(bv_repo_init(f.repo, &c, &(BvSecret){ .key_file = tiny }), EINVAL);
        free(tiny);
        /* failed attempts left nothing behind */
        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        ASSERT_ERROR(bv_repo_init(f.repo, &c, &s), EEXIST);

        /* a directory holding something else */
        ASSERT_TRUE(asprintf(&other, "%s/other", f.dir) > 0);
        ASSERT_TRUE(mkdir(other, 0700) == 0);
        _cleanup_close_ int dfd = open(other, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(bv_write_file_durable(dfd, "stuff", "x", 1, false));
        ASSERT_ERROR(bv_repo_init(other, &c, &s), ENOTEMPTY);
        free(other);

        BvRepoConfig peek;
        ASSERT_ERROR(bv_repo_peek_config(f.dir, &peek), ENOENT);
        fixture_done(&f);
}

TEST(unencrypted)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_NONE);
        BvRepo *r = NULL;
        struct stat st;
        char *keypath;

        c.zstd_level = 0;
        ASSERT_OK(bv_repo_init(f.repo, &c, NULL));
        ASSERT_TRUE(asprintf(&keypath, "%s/keys/default", f.repo) > 0);
        ASSERT_TRUE(stat(keypath, &st) < 0 && errno == ENOENT);
        free(keypath);
        ASSERT_OK(bv_repo_open(f.repo, NULL, BV_OPEN_WRITE, &r));
        ASSERT_EQ(bv_repo_config(r)->zstd_level, 0);
        ASSERT_ERROR(bv_repo_change_key(r, &(BvSecret){ .key_file = f.key }), EOPNOTSUPP);
        bv_repo_close(r);

        /* a secret given for it is refused (it would open with any), before anything is locked or
         * written: no leases/, in every mode */
        ASSERT_OK(rmdir_leases(f.repo));
        BvOpenFlags modes[] = { BV_OPEN_READ, BV_OPEN_WRITE, BV_OPEN_GC, BV_OPEN_READ | BV_OPEN_EXPORT };
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                BvRepoProblem p;
                ASSERT_ERROR(bv_repo_open_report(f.repo, &(BvSecret){ .key_file = f.key }, modes[i], &p, &r),
                             EKEYREJECTED);
                ASSERT_STREQ(p.path, "config");
                ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .passphrase = "x" }, modes[i], &r), EKEYREJECTED);
        }
        ASSERT_ERROR(bv_repo_prove(f.repo, &(BvSecret){ .key_file = f.key }, NULL), EKEYREJECTED);
        ASSERT_ERROR(bv_repo_prove(f.repo, &(BvSecret){}, NULL), ENOKEY);
        ASSERT_ERROR(rmdir_leases(f.repo), ENOENT);
        fixture_done(&f);
}

TEST(prove)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM);
        BvSecret s = { .key_file = f.key };

        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        ASSERT_OK(bv_repo_prove(f.repo, &s, NULL));
        ASSERT_ERROR(bv_repo_prove(f.repo, &(BvSecret){ .key_file = f.key2 }, NULL), ENOKEY);
        ASSERT_ERROR(bv_repo_prove(f.repo, NULL, NULL), ENOKEY);
        ASSERT_ERROR(bv_repo_prove(f.dir, &s, NULL), ENOENT);
        /* the proof took no lease and no lock */
        ASSERT_ERROR(rmdir_leases(f.repo), ENOENT);
        fixture_done(&f);
}

/* A repository reopened with the keys another open of it holds (the backup that collects garbage
 * once on a full target: its secret is gone by then). */
TEST(reopen_with_keyring)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM);
        BvSecret s = { .key_file = f.key };
        BvRepo *r = NULL, *r2 = NULL;
        BvKeyring *k = NULL;

        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        ASSERT_OK(bv_repo_open(f.repo, &s, BV_OPEN_WRITE, &r));
        ASSERT_OK(bv_keyring_dup(bv_repo_keyring(r), &k));
        bv_repo_close(r);
        BvSecret ks = { .keyring = k };
        ASSERT_OK(bv_repo_open(f.repo, &ks, BV_OPEN_WRITE, &r));
        ASSERT_ERROR(bv_repo_open(f.repo, &ks, BV_OPEN_READ | BV_OPEN_KEYS, &r2), EINVAL);
        bv_repo_close(r);

        /* another repository's keys do not open this one */
        char other[PATH_MAX];
        snprintf(other, sizeof(other), "%s/other", f.dir);
        ASSERT_OK(bv_repo_init(other, &c, &s));
        ASSERT_ERROR(bv_repo_open(other, &ks, BV_OPEN_READ, &r2), EBADMSG);
        /* nor keys stand in for a secret an unencrypted repository does not have */
        char plain[PATH_MAX];
        BvRepoConfig cn = small_config(BV_CIPHER_NONE);
        snprintf(plain, sizeof(plain), "%s/plain", f.dir);
        ASSERT_OK(bv_repo_init(plain, &cn, NULL));
        ASSERT_ERROR(bv_repo_open(plain, &ks, BV_OPEN_READ, &r2), EKEYREJECTED);
        bv_keyring_free(k);
        fixture_done(&f);
}

TEST(passphrase_and_change_key)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM);
        BvSecret pass = { .passphrase = "correct horse battery staple" };
        BvSecret kf = { .key_file = f.key }, kf2 = { .key_file = f.key2 };
        BvRepo *r = NULL;

        ASSERT_OK(bv_repo_init(f.repo, &c, &pass));
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .passphrase = "wrong" }, BV_OPEN_READ, &r), ENOKEY);
        ASSERT_ERROR(bv_repo_open(f.repo, &kf, BV_OPEN_READ, &r), ENOKEY);

        ASSERT_OK(bv_repo_open(f.repo, &pass, BV_OPEN_READ, &r));
        ASSERT_ERROR(bv_repo_change_key(r, &kf), EPERM); /* needs the writer lock */
        bv_repo_close(r);

        ASSERT_OK(bv_repo_open(f.repo, &pass, BV_OPEN_WRITE, &r));
        ASSERT_ERROR(bv_repo_change_key(r, &kf), EPERM); /* the master secret is gone: BV_OPEN_KEYS */
        bv_repo_close(r);

        ASSERT_OK(bv_repo_open(f.repo, &pass, BV_OPEN_WRITE | BV_OPEN_KEYS, &r));
        ASSERT_ERROR(bv_repo_change_key(r, NULL), ENOKEY);
        ASSERT_ERROR(bv_repo_change_key(r, &(BvSecret){ .passphrase = "a", .key_file = f.key }), EINVAL);
        ASSERT_OK(bv_repo_change_key(r, &kf));
        bv_repo_close(r);

        ASSERT_ERROR(bv_repo_open(f.repo, &pass, BV_OPEN_READ, &r), ENOKEY);
        ASSERT_OK(bv_repo_open(f.repo, &kf, BV_OPEN_WRITE | BV_OPEN_KEYS, &r));
        ASSERT_OK(bv_repo_change_key(r, &kf2));
        bv_repo_close(r);
        ASSERT_ERROR(bv_repo_open(f.repo, &kf, BV_OPEN_READ, &r), ENOKEY);
        ASSERT_OK(bv_repo_open(f.repo, &kf2, BV_OPEN_READ, &r));
        bv_repo_close(r);
        fixture_done(&f);
}

static void halve_avg(json_object *o)
{
        json_object *ch;
        ASSERT_TRUE(json_object_object_get_ex(o, "chunker", &ch));
        json_object_object_add(ch, "avg", json_object_new_int(32768));
}

static void version_2(json_object *o)
{
        json_object_object_add(o, "version", json_object_new_int(2));
}

static void drop_mac(json_object *o)
{
        json_object_object_del(o, "mac");
}

static void drop_to_none(json_object *o)
{
        json_object_object_add(o, "encryption", json_object_new_string("none"));
}

TEST(config_tampering)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM), peek;
        BvSecret s = { .key_file = f.key };
        BvRepo *r = NULL;

        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        edit_config(f.repo, halve_avg);
        ASSERT_OK(bv_repo_peek_config(f.repo, &peek)); /* peeking does not authenticate */
        ASSERT_EQ(peek.chunker.avg, 32768);
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r), EBADMSG);

        /* downgrading to "none" does not get past the MAC either */
        edit_config(f.repo, drop_to_none);
        ASSERT_ERROR(bv_repo_open(f.repo, NULL, BV_OPEN_READ, &r), EBADMSG);

        edit_config(f.repo, drop_mac);
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r), EBADMSG);

        edit_config(f.repo, version_2);
        ASSERT_ERROR(bv_repo_peek_config(f.repo, &peek), EPROTONOSUPPORT);
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r), EPROTONOSUPPORT);

        _cleanup_close_ int dfd = open(f.repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_OK(bv_write_file_durable(dfd, "config", "not json", 8, true));
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r), EBADMSG);
        fixture_done(&f);
}

/* What opening refuses besides a wrong secret: a key file that cannot be a key, a key sealed
 * for another repository, a config too large to be one, a missing directory. */
TEST(open_refuses)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM), peek;
        BvSecret s = { .key_file = f.key };
        _cleanup_free_ char *other = NULL, *big = NULL, *key_path = NULL, *other_key = NULL;
        _cleanup_free_ char *padded = NULL, *index_dir = NULL;
        _cleanup_free_ void *text = NULL;
        BvRepo *r = NULL;
        size_t len;

        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        _cleanup_close_ int dfd = open(f.repo, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);

        /* key files: missing, a directory, larger than a key file may be */
        ASSERT_TRUE(asprintf(&big, "%s/big", f.dir) > 0);
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .key_file = big }, BV_OPEN_READ, &r), ENOENT);
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .key_file = f.dir }, BV_OPEN_READ, &r), EBADFD);
        padded = calloc(1, 64 * 1024 + 1);
        ASSERT_TRUE(padded != NULL);
        write_file(big, padded, 64 * 1024 + 1);
        ASSERT_ERROR(bv_repo_open(f.repo, &(BvSecret){ .key_file = big }, BV_OPEN_READ, &r), EFBIG);

        /* keys/default of another repository, though sealed under the same key file */
        ASSERT_TRUE(asprintf(&other, "%s/other", f.dir) > 0);
        ASSERT_OK(bv_repo_init(other, &c, &s));
        ASSERT_TRUE(asprintf(&key_path, "%s/keys/default", f.repo) > 0);
        ASSERT_TRUE(asprintf(&other_key, "%s/keys/default", other) > 0);
        ASSERT_OK(bv_read_file(AT_FDCWD, other_key, 65536, &text, &len));
        write_file(key_path, text, len);
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r), ENOKEY);
        /* and no key at all: named, not taken for a wrong secret */
        ASSERT_TRUE(unlink(key_path) == 0);
        BvRepoProblem kp;
        ASSERT_ERROR(bv_repo_open_report(f.repo, &s, BV_OPEN_READ, &kp, &r), ENOENT);
        ASSERT_STREQ(kp.path, "keys/default");

        /* a directory of the layout is missing: the repository needs repair */
        ASSERT_OK(bv_repo_open(other, &s, BV_OPEN_READ, &r));
        bv_repo_close(r);
        ASSERT_TRUE(asprintf(&index_dir, "%s/index", other) > 0);
        ASSERT_TRUE(rmdir(index_dir) == 0);
        ASSERT_ERROR(bv_repo_open(other, &s, BV_OPEN_READ, &r), EUCLEAN);

        /* a config larger than any config is not one, even if it would parse */
        free(text);
        ASSERT_OK(bv_read_file(dfd, "config", 65536, &text, &len));
        memset(padded, ' ', 64 * 1024 + 1);
        memcpy(padded, text, len);
        ASSERT_OK(bv_write_file_durable(dfd, "config", padded, 64 * 1024 + 1, true));
        ASSERT_ERROR(bv_repo_peek_config(f.repo, &peek), EBADMSG);
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_READ, &r), EBADMSG);
        fixture_done(&f);
}

typedef struct Release {
        BvRepo *r;
} Release;

static void *close_later(void *ud)
{
        Release *rel = ud;
        usleep(200 * 1000);
        bv_repo_close(rel->r);
        return NULL;
}

TEST(locks)
{
        Fixture f = fixture_new();
        BvRepoConfig c = small_config(BV_CIPHER_AES256GCM);
        BvSecret s = { .key_file = f.key };
        BvRepo *w = NULL, *w2 = NULL, *rd = NULL;
        char *junk;
        struct stat st;

        ASSERT_OK(bv_repo_init(f.repo, &c, &s));
        ASSERT_TRUE(asprintf(&junk, "%s/tmp/junk", f.repo) > 0);
        write_file(junk, "x", 1);

        ASSERT_OK(bv_repo_open(f.repo, &s, BV_OPEN_WRITE, &w));
        ASSERT_TRUE(stat(junk, &st) < 0 && errno == ENOENT); /* the writer emptied tmp/ */
        ASSERT_ERROR(bv_repo_open(f.repo, &s, BV_OPEN_WRITE, &w2), EBUSY);
        ASSERT_OK(bv_repo_open(f.repo, &s, BV_OPEN_READ, &rd)); /* readers do not wait */
        bv_repo_close(w);
        ASSERT_OK(bv_repo_open(f.repo, &s, BV_OPEN_WRITE, &w2));

        /* BV_OPEN_WAIT waits for the writer to go instead of failing */
        pthread_t t;
        Release rel = { .r = w2 };
        ASSERT_TRUE(pthread_create(&t, NULL, close_later, &rel) == 0);
        ASSERT_OK(bv_repo_open(f.repo, &s, BV_OPEN_WRITE | BV_OPEN_WAIT, &w));
        pthread_join(t, NULL);
        bv_repo_close(w);
        bv_repo_close(rd);
        free(junk);
        fixture_done(&f);
}

TEST(file_parsers_round_trip)
{
        BvRepoConfigFile cf = { .created = 1700000000, .config = small_config(BV_CIPHER_AES256GCM) }, cf2;
        BvKeyFile kf = { .scrypt = true, .log2_n = 15, .r = 8, .p = 1 }, kf2;
        _cleanup_free_ char *json = NULL, *json2 = NULL, *canon = NULL;

        bvtest_fill_random(cf.id, sizeof(cf.id), 3);
        bvtest_fill_random(cf.mac, sizeof(cf.mac), 4);
        ASSERT_OK(bv_repo_config_format(&cf, &json));
        ASSERT_OK(bv_repo_config_parse(json, strlen(json), &cf2));
        ASSERT_MEMEQ(&cf.config, &cf2.config, sizeof(cf.config));
        ASSERT_MEMEQ(cf.id, cf2.id, sizeof(cf.id));
        ASSERT_MEMEQ(cf.mac, cf2.mac, sizeof(cf.mac));
        ASSERT_EQ(cf.created, cf2.created);
        ASSERT_OK(bv_repo_config_canonical(&cf, &canon));
        ASSERT_TRUE(strncmp(canon, "blkvault-config-v1\nformat=blkvault-repository\nversion=1\nid=", 58) == 0);
        ASSERT_TRUE(strstr(canon, "\nchunker.avg=65536\nchunker.max=262144\ncompression.codec=auto\ncompression.level=3\n"));
        ASSERT_TRUE(strstr(json, "\"codec\": \"auto\""));
        ASSERT_EQ(cf2.config.compress_mode, BV_COMPRESS_AUTO);
        ASSERT_ERROR(bv_repo_config_parse(json, strlen(json) - 3, &cf2), EBADMSG);
        ASSERT_ERROR(bv_repo_config_parse("[]", 2, &cf2), EBADMSG);
        const char *v7 = "{\"format\":\"blkvault-repository\",\"version\":7}";
        ASSERT_ERROR(bv_repo_config_parse(v7, strlen(v7), &cf2), EPROTONOSUPPORT);

        bvtest_fill_random(kf.repository, sizeof(kf.repository), 5);
        bvtest_fill_random(kf.salt, sizeof(kf.salt), 6);
        bvtest_fill_random(kf.nonce, sizeof(kf.nonce), 7);
        bvtest_fill_random(kf.sealed, sizeof(kf.sealed), 8);
        ASSERT_OK(bv_repo_keyfile_format(&kf, &json2));
        ASSERT_OK(bv_repo_keyfile_parse(json2, strlen(json2), &kf2));
        ASSERT_TRUE(kf2.scrypt && kf2.log2_n == 15 && kf2.r == 8 && kf2.p == 1);
        ASSERT_MEMEQ(kf.repository, kf2.repository, sizeof(kf.repository));
        ASSERT_MEMEQ(kf.salt, kf2.salt, sizeof(kf.salt));
        ASSERT_MEMEQ(kf.nonce, kf2.nonce, sizeof(kf.nonce));
        ASSERT_MEMEQ(kf.sealed, kf2.sealed, sizeof(kf.sealed));
        const char *k2 = "{\"format\":\"blkvault-key\",\"version\":2}";
        const char *k1 = "{\"format\":\"blkvault-key\",\"version\":1}";
        ASSERT_ERROR(bv_repo_keyfile_parse(k2, strlen(k2), &kf2), EPROTONOSUPPORT);
        ASSERT_ERROR(bv_repo_keyfile_parse(k1, strlen(k1), &kf2), EBADMSG);

        /* N = 2^16 with r = 1 is in each field's range but breaks RFC 7914's N < 2^(16 r):
         * a corrupt key file (-EBADMSG), not a failed allocation. r = 2 makes it valid. */
        kf.log2_n = 16;
        kf.r = 1;
        free(json2);
        json2 = NULL;
        ASSERT_OK(bv_repo_keyfile_format(&kf, &json2));
        ASSERT_ERROR(bv_repo_keyfile_parse(json2, strlen(json2), &kf2), EBADMSG);
        kf.r = 2;
        free(json2);
        json2 = NULL;
        ASSERT_OK(bv_repo_keyfile_format(&kf, &json2));
        ASSERT_OK(bv_repo_keyfile_parse(json2, strlen(json2), &kf2));
}

int main(void)
{
        RUN(file_parsers_round_trip);
        RUN(init_open_key_file);
        RUN(init_refuses);
        RUN(unencrypted);
        RUN(prove);
        RUN(reopen_with_keyring);
        RUN(passphrase_and_change_key);
        RUN(config_tampering);
        RUN(open_refuses);
        RUN(locks);
        return 0;
}
