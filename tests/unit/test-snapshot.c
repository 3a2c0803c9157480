/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Snapshot records: JSON, .snap files with a real object codec, listing and resolving. */
#include <fcntl.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "backend.h"
#include "bvtest.h"
#include "endian.h"
#include "fileio.h"
#include "hex.h"
#include "keyring.h"
#include "macro.h"
#include "object.h"
#include "snapshot-json.h"

typedef struct Env {
        char *dir;     /* the repository */
        BvBackend *b;
        int dirfd;     /* its snapshots/ */
        BvKeyring *keyring;
        BvObjectCodec *codec;
} Env;

static void env_codec(BvCipher cipher, uint8_t master_byte, BvKeyring **ret_k, BvObjectCodec **ret_c)
{
        uint8_t master[BV_MASTER_SIZE], repo_id[BV_REPO_ID_SIZE];
        memset(master, master_byte, sizeof(master));
        memset(repo_id, 0x42, sizeof(repo_id));
        ASSERT_OK(bv_keyring_new(cipher, master, repo_id, ret_k));
        ASSERT_OK(bv_object_codec_new(*ret_k, 3, ret_c));
}

static void env_init(Env *e)
{
        char *snaps;

        e->dir = bvtest_tmpdir();
        ASSERT_OK(bv_backend_open(e->dir, false, &e->b));
        ASSERT_TRUE(asprintf(&snaps, "%s/snapshots", e->dir) > 0);
        ASSERT_TRUE(mkdir(snaps, 0700) == 0);
        e->dirfd = open(snaps, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(e->dirfd >= 0);
        free(snaps);
        env_codec(BV_CIPHER_AES256GCM, 7, &e->keyring, &e->codec);
}

static void env_done(Env *e)
{
        bv_object_codec_free(e->codec);
        bv_keyring_free(e->keyring);
        close(e->dirfd);
        bv_backend_close(e->b);
        bvtest_rm_rf(e->dir);
        free(e->dir);
}

/* A snapshot with every field set; id from seed. */
static BvSnapshot *make_snapshot(uint64_t seed, const char *name, uint64_t time)
{
        BvSnapshot *s = calloc(1, sizeof(*s));
        uint8_t raw[BV_SNAPSHOT_ID_SIZE];
        ASSERT_TRUE(s);
        bvtest_fill_random(raw, sizeof(raw), seed);
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(s->id + 2 * i, 3, "%02x", raw[i]);
        s->name = strdup(name);
        s->time = time;
        s->size = (seed << 20) + 12345;
        bvtest_fill_random(s->root, sizeof(s->root), seed + 1);
        s->height = 3;
        s->source = (BvSnapshotSource){ .path = strdup("/dev/vdb"), .kind = BV_SOURCE_BLOCKDEV, .size = s->size,
                                        .probed = true };
        s->source.probe.pttype = strdup("gpt");
        s->source.probe.partitions = calloc(2, sizeof(BvProbePartition));
        s->source.probe.n_partitions = 2;
        s->source.probe.partitions[0] = (BvProbePartition){ .number = 1, .start = 1 << 20, .size = 20 << 20,
                                                            .fstype = strdup("ext4"), .label = strdup("root") };
        s->source.probe.partitions[1] = (BvProbePartition){ .number = 2, .start = 21 << 20, .size = 5 << 20 };
        s->stats = (BvSnapshotStats){ .bytes_read = 7 << 20, .bytes_zero = 1 << 20, .bytes_data = 6 << 20,
                                      .chunks = 100, .chunks_new = 42, .packs = 1, .seconds = 1.5 };
        s->chunker = (BvChunkerParams){ .kind = BV_CHUNKER_HYBRID, .min = 16384, .avg = 65536, .max = 262144 };
        return s;
}

static void assert_same(const BvSnapshot *a, const BvSnapshot *b)
{
        ASSERT_STREQ(a->id, b->id);
        ASSERT_STREQ(a->name, b->name);
        ASSERT_TRUE(a->time == b->time);
        ASSERT_TRUE(a->size == b->size);
        ASSERT_MEMEQ(a->root, b->root, BV_ID_SIZE);
        ASSERT_EQ(a->height, b->height);
        ASSERT_STREQ(a->source.path, b->source.path);
        ASSERT_EQ(a->source.kind, b->source.kind);
        ASSERT_TRUE(a->source.size == b->source.size);
        ASSERT_EQ(a->source.probed, b->source.probed);
        ASSERT_STREQ(a->source.probe.pttype, b->source.probe.pttype);
        ASSERT_TRUE(b->source.probe.fstype == NULL && b->source.probe.uuid == NULL);
        ASSERT_EQ(a->source.probe.n_partitions, b->source.probe.n_partitions);
        for (size_t i = 0; i < a->source.probe.n_partitions; i++) {
                const BvProbePartition *p = &a->source.probe.partitions[i], *q = &b->source.probe.partitions[i];
                ASSERT_EQ(p->number, q->number);
                ASSERT_TRUE(p->start == q->start && p->size == q->size);
                ASSERT_TRUE(!p->fstype == !q->fstype && (!p->fstype || strcmp(p->fstype, q->fstype) == 0));
                ASSERT_TRUE(!p->label == !q->label && (!p->label || strcmp(p->label, q->label) == 0));
                ASSERT_TRUE(q->type == NULL && q->uuid == NULL && q->fsuuid == NULL);
        }
        ASSERT_MEMEQ(&a->stats, &b->stats, sizeof(a->stats));
        ASSERT_EQ(a->chunker.kind, b->chunker.kind);
        ASSERT_TRUE(a->chunker.min == b->chunker.min && a->chunker.avg == b->chunker.avg &&
                    a->chunker.max == b->chunker.max);
}

static int from_string(const char *json)
{
        BvSnapshot *s = NULL;
        int r = bv_snapshot_from_json(json, strlen(json), &s);
        bv_snapshot_free(s);
        return r;
}

TEST(json_roundtrip)
{
        BvSnapshot *s = make_snapshot(1, "host \"db\" \xc3\xa9", 1763750000);
        BvSnapshot *t = NULL;
        char *json = NULL;

        s->size = UINT64_MAX;
        s->time = (uint64_t)INT64_MAX + 5;
        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_OK(bv_snapshot_from_json(json, strlen(json), &t));
        assert_same(s, t);
        ASSERT_TRUE(strstr(json, "\"version\":1"));
        ASSERT_TRUE(strstr(json, "\"time_utc\":\""));
        bv_snapshot_free(t);
        free(json);

        /* the human time field */
        s->time = 1763751000;
        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_TRUE(strstr(json, "\"time_utc\":\"2025-11-21T18:50:00Z\""));
        free(json);

        /* an empty source (a stream has no probe) stays empty; a NULL name becomes an empty one */
        bv_snapshot_source_done(&s->source);
        free(s->name);
        s->name = NULL;
        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_OK(bv_snapshot_from_json(json, strlen(json), &t));
        ASSERT_STREQ(t->name, "");
        ASSERT_TRUE(t->source.path == NULL && t->source.kind == 0 && !t->source.probed);
        ASSERT_TRUE(strstr(json, "\"source\":{\"size\":0}"));
        bv_snapshot_free(t);
        free(json);

        /* what cannot be written */
        strcpy(s->id, "0123456789ABCDEF0123456789abcdef");
        ASSERT_ERROR(bv_snapshot_to_json(s, &json), EINVAL);
        strcpy(s->id, "0123456789abcdef");
        ASSERT_ERROR(bv_snapshot_to_json(s, &json), EINVAL);
        strcpy(s->id, "0123456789abcdef0123456789abcdef");
        s->height = 0;
        ASSERT_ERROR(bv_snapshot_to_json(s, &json), EINVAL);
        s->height = 33;
        ASSERT_ERROR(bv_snapshot_to_json(s, &json), EINVAL);
        bv_snapshot_free(s);
}

#define GOOD_ID "00112233445566778899aabbccddeeff"
#define GOOD_ROOT "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

/* A document with one member replaced (or removed, value NULL). */
static char *doc_with(const char *key, const char *value)
{
        static const char *keys[] = {"version", "id", "name", "time", "time_utc", "size",
                                     "root", "height", "source", "stats", "chunker"};
        static const char *values[] = {"1", "\"" GOOD_ID "\"", "\"daily\"", "1700000000",
                                       "\"2023-11-14T22:13:20Z\"", "1048576", "\"" GOOD_ROOT "\"",
                                       "2", "{\"path\":\"/x\"}", "{}", "{\"kind\":\"hybrid\"}"};
        char *out = strdup("{"), *next;
        bool first = true;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const char *v = strcmp(keys[i], key) == 0 ? value : values[i];
                if (!v)
                        continue;
                ASSERT_TRUE(asprintf(&next, "%s%s\"%s\":%s", out, first ? "" : ",", keys[i], v) > 0);
                free(out);
                out = next;
                first = false;
        }
        ASSERT_TRUE(asprintf(&next, "%s}", out) > 0);
        free(out);
        return next;
}

static int from_doc(const char *key, const char *value)
{
        char *doc = doc_with(key, value);
        int r = from_string(doc);
        free(doc);
        return r;
}

TEST(json_errors)
{
        static const char *required[] = {"id", "name", "time", "time_utc", "size",
                                         "root", "height", "source", "stats", "chunker"};
        BvSnapshot *s = NULL;

        ASSERT_OK(from_doc("", NULL));
        /* members a later writer may add are ignored */
        char *doc0 = doc_with("", NULL), *extra = NULL;
        ASSERT_TRUE(asprintf(&extra, "{\"future\":[1,2],%s", doc0 + 1) > 0);
        ASSERT_OK(from_string(extra));
        free(extra);
        free(doc0);

        /* version: missing or mistyped is corrupt, another number is unknown */
        ASSERT_ERROR(from_doc("version", NULL), EBADMSG);
        ASSERT_ERROR(from_doc("version", "\"1\""), EBADMSG);
        ASSERT_ERROR(from_doc("version", "1.0"), EBADMSG);
        ASSERT_ERROR(from_doc("version", "2"), EPROTONOSUPPORT);
        ASSERT_ERROR(from_doc("version", "0"), EPROTONOSUPPORT);

        /* every member is required */
        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                ASSERT_ERROR(from_doc(required[i], NULL), EBADMSG);
        /* and typed */
        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                ASSERT_ERROR(from_doc(required[i], "[]"), EBADMSG);
        ASSERT_ERROR(from_doc("id", "\"00112233445566778899AABBCCDDEEFF\""), EBADMSG);
        ASSERT_ERROR(from_doc("id", "\"0011\""), EBADMSG);
        ASSERT_ERROR(from_doc("id", "\"00112233445566778899aabbccddeefg\""), EBADMSG);
        ASSERT_ERROR(from_doc("root", "\"" GOOD_ID "\""), EBADMSG);
        ASSERT_ERROR(from_doc("time", "-1"), EBADMSG);
        ASSERT_ERROR(from_doc("time", "\"1700000000\""), EBADMSG);
        /* time_ns is optional, a tie-break within time's second: one of another second or mistyped
         * is ignored (time stands), not taken for damage */
        static const struct {
                const char *value;
                uint64_t got;
        } ns[] = {{"1700000000123456789", 1700000000123456789ull}, {"1700000001000000000", 0},
                  {"\"1700000000123456789\"", 0}, {"-1", 0}};
        char *doc1 = doc_with("", NULL), *with_ns = NULL;
        for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
                BvSnapshot *t = NULL;
                ASSERT_TRUE(asprintf(&with_ns, "{\"time_ns\":%s,%s", ns[i].value, doc1 + 1) > 0);
                ASSERT_OK(bv_snapshot_from_json(with_ns, strlen(with_ns), &t));
                ASSERT_EQ(t->time, 1700000000);
                ASSERT_EQ(t->time_ns, ns[i].got);
                bv_snapshot_free(t);
                free(with_ns);
        }
        free(doc1);
        /* and one of another second (a tool set time) is not written */
        BvSnapshot *w = make_snapshot(30, "w", 500);
        char *wj = NULL;
        w->time_ns = 600 * 1000000000ull;
        ASSERT_OK(bv_snapshot_to_json(w, &wj));
        ASSERT_TRUE(strstr(wj, "time_ns") == NULL);
        free(wj);
        w->time_ns = 500 * 1000000000ull + 7;
        ASSERT_OK(bv_snapshot_to_json(w, &wj));
        ASSERT_TRUE(strstr(wj, "\"time_ns\":500000000007") != NULL);
        free(wj);
        bv_snapshot_free(w);
        ASSERT_ERROR(from_doc("size", "-5"), EBADMSG);
        ASSERT_ERROR(from_doc("size", "1.5"), EBADMSG);
        ASSERT_ERROR(from_doc("height", "0"), EBADMSG);
        ASSERT_ERROR(from_doc("height", "33"), EBADMSG);
        ASSERT_ERROR(from_doc("height", "-1"), EBADMSG);
        ASSERT_ERROR(from_doc("name", "null"), EBADMSG);
        ASSERT_ERROR(from_doc("source", "\"x\""), EBADMSG);
        ASSERT_OK(from_doc("height", "32"));
        /* inside source, stats and chunker: absent is zero or unknown, mistyped is corrupt */
        ASSERT_ERROR(from_doc("stats", "{\"bytes_read\":\"5\"}"), EBADMSG);
        ASSERT_ERROR(from_doc("stats", "{\"chunks\":-1}"), EBADMSG);
        ASSERT_ERROR(from_doc("source", "{\"probe\":[]}"), EBADMSG);
        ASSERT_ERROR(from_doc("source", "{\"probe\":{\"partitions\":[1]}}"), EBADMSG);
        ASSERT_ERROR(from_doc("source", "{\"probe\":{\"partitions\":[{\"number\":4294967296}]}}"), EBADMSG);
        ASSERT_ERROR(from_doc("chunker", "{\"min\":4294967296}"), EBADMSG);
        ASSERT_OK(from_doc("source", "{\"kind\":\"nbd\",\"probe\":{\"partitions\":[{\"number\":1}]}}"));
        ASSERT_OK(from_doc("size", "18446744073709551615"));

        /* not one JSON object */
        ASSERT_ERROR(from_string(""), EBADMSG);
        ASSERT_ERROR(from_string("{"), EBADMSG);
        ASSERT_ERROR(from_string("[1]"), EBADMSG);
        ASSERT_ERROR(from_string("1"), EBADMSG);
        ASSERT_ERROR(from_string("not json"), EBADMSG);
        char *doc = doc_with("", NULL);
        size_t len = strlen(doc);
        ASSERT_ERROR(bv_snapshot_from_json(doc, len - 1, &s), EBADMSG);
        char *trailing = NULL;
        ASSERT_TRUE(asprintf(&trailing, "%s{}", doc) > 0);
        ASSERT_ERROR(from_string(trailing), EBADMSG);
        free(trailing);
        /* whitespace after the object is part of a JSON text (RFC 8259) */
        ASSERT_TRUE(asprintf(&trailing, "%s \n", doc) > 0);
        ASSERT_OK(from_string(trailing));
        free(trailing);
        doc[3] = '\0'; /* an embedded NUL */
        ASSERT_ERROR(bv_snapshot_from_json(doc, len, &s), EBADMSG);
        free(doc);
        /* nesting deeper than the parser allows */
        char deep[200];
        memset(deep, '[', sizeof(deep) - 1);
        deep[sizeof(deep) - 1] = '\0';
        ASSERT_ERROR(from_doc("stats", deep), EBADMSG);
        ASSERT_ERROR(bv_snapshot_from_json(NULL, 0, &s), EBADMSG);
        ASSERT_TRUE(s == NULL);
}

/* A record written before bytes_data was stored gets it from bytes_read - bytes_zero. */
TEST(json_older_record)
{
        char *doc = doc_with("stats", "{\"bytes_read\":5000,\"bytes_zero\":1000,\"seconds\":2}");
        BvSnapshot *s = NULL;

        ASSERT_OK(bv_snapshot_from_json(doc, strlen(doc), &s));
        ASSERT_TRUE(s->stats.bytes_data == 4000 && s->stats.bytes_read == 5000 && s->stats.seconds == 2.0);
        ASSERT_STREQ(s->source.path, "/x");
        ASSERT_EQ(s->chunker.kind, BV_CHUNKER_HYBRID);
        bv_snapshot_free(s);
        free(doc);
}

/* "used_only" (backup --used-only): written only when set, read back as written; inside it absent
 * members read as zero or none, unknown ones are ignored, mistyped ones are corrupt; a record
 * without it (every record before it existed) is a whole read. */
static int from_extra(const char *member)
{
        char *doc = doc_with("", NULL), *extra = NULL;
        ASSERT_TRUE(asprintf(&extra, "{%s,%s", member, doc + 1) > 0);
        int r = from_string(extra);
        free(extra);
        free(doc);
        return r;
}

TEST(json_used_only)
{
        BvSnapshot *s = make_snapshot(1, "h", 1763750000), *t = NULL;
        char *json = NULL;

        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_TRUE(strstr(json, "used_only") == NULL);
        ASSERT_OK(bv_snapshot_from_json(json, strlen(json), &t));
        ASSERT_TRUE(!t->used_only.on && t->used_only.n_parts == 0);
        bv_snapshot_free(t);
        free(json);

        BvSnapshotUsedOnly *u = &s->used_only;
        u->on = true;
        u->bytes_free = 300;
        u->parts = calloc(2, sizeof(BvSnapshotUsedPart));
        ASSERT_TRUE(u->parts != NULL);
        u->n_parts = 2;
        u->parts[0] = (BvSnapshotUsedPart){ .number = 1, .start = 1048576, .size = 4096000, .fstype = strdup("ext4"),
                                            .label = strdup("root"), .reader = strdup("libext2fs"),
                                            .bytes_used = 700, .bytes_free = 300, .bytes_unknown = 5 };
        u->parts[1] = (BvSnapshotUsedPart){ .number = 2, .start = 5144576, .size = 1000, .why = strdup("no filesystem found"),
                                            .bytes_unknown = 1000 };
        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_TRUE(strstr(json, "\"used_only\":{\"bytes_free_skipped\":300,\"partitions\":[{\"number\":1,\"name\":\"p1\""));
        ASSERT_OK(bv_snapshot_from_json(json, strlen(json), &t));
        ASSERT_TRUE(bv_snapshot_used_only_equal(&s->used_only, &t->used_only));
        ASSERT_STREQ(t->used_only.parts[0].label, "root");
        ASSERT_STREQ(t->used_only.parts[1].why, "no filesystem found");
        ASSERT_TRUE(t->used_only.parts[1].reader == NULL && t->used_only.parts[1].fstype == NULL);
        /* what may stand for what: a whole read never for a used-only one, nor another map */
        BvSnapshotUsedOnly whole = {};
        ASSERT_TRUE(!bv_snapshot_used_only_equal(&whole, &t->used_only));
        ASSERT_TRUE(!bv_snapshot_used_only_equal(&t->used_only, &whole));
        ASSERT_TRUE(bv_snapshot_used_only_equal(&whole, &whole));
        t->used_only.parts[0].bytes_free--;
        ASSERT_TRUE(!bv_snapshot_used_only_equal(&s->used_only, &t->used_only));
        bv_snapshot_free(t);
        free(json);
        bv_snapshot_free(s);

        ASSERT_OK(from_extra("\"used_only\":{}"));
        ASSERT_OK(from_extra("\"used_only\":{\"partitions\":[{}],\"later\":[1]}"));
        ASSERT_OK(from_extra("\"used_only\":{\"partitions\":[{\"number\":1,\"later\":{\"x\":2}}]}"));
        ASSERT_ERROR(from_extra("\"used_only\":true"), EBADMSG);
        ASSERT_ERROR(from_extra("\"used_only\":{\"partitions\":{}}"), EBADMSG);
        ASSERT_ERROR(from_extra("\"used_only\":{\"partitions\":[1]}"), EBADMSG);
        ASSERT_ERROR(from_extra("\"used_only\":{\"bytes_free_skipped\":-1}"), EBADMSG);
        ASSERT_ERROR(from_extra("\"used_only\":{\"partitions\":[{\"number\":4294967296}]}"), EBADMSG);
        ASSERT_ERROR(from_extra("\"used_only\":{\"partitions\":[{\"reader\":7}]}"), EBADMSG);
}

TEST(save_load)
{
        Env e;
        BvSnapshot *s = make_snapshot(2, "nightly", 1700000000), *t = NULL;

        env_init(&e);
        ASSERT_OK(bv_snapshot_save(e.b, e.codec, s));
        ASSERT_ERROR(bv_snapshot_save(e.b, e.codec, s), EEXIST);
        ASSERT_OK(bv_snapshot_load(e.b, e.codec, s->id, &t));
        assert_same(s, t);
        bv_snapshot_free(t);
        t = NULL;

        /* the file starts with the magic and version */
        char name[BV_SNAPSHOT_FILE_MAX];
        snprintf(name, sizeof(name), "%s.snap", s->id);
        void *data = NULL;
        size_t len = 0;
        ASSERT_OK(bv_read_file(e.dirfd, name, 1 << 20, &data, &len));
        ASSERT_MEMEQ(data, "BLKVSNAP", 8);
        ASSERT_EQ(get_le32((uint8_t *)data + 8), 1);
        ASSERT_EQ(get_le32((uint8_t *)data + 12), 0);
        free(data);

        /* bad arguments and absent files */
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, "0123", &t), EINVAL);
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, "00112233445566778899AABBCCDDEEFF", &t), EINVAL);
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, GOOD_ID, &t), ENOENT);
        ASSERT_TRUE(t == NULL);
        strcpy(s->id, "nothex");
        ASSERT_ERROR(bv_snapshot_save(e.b, e.codec, s), EINVAL);
        bv_snapshot_free(s);

        /* a wrong key does not read it (authentication fails) */
        BvKeyring *k2 = NULL;
        BvObjectCodec *c2 = NULL;
        env_codec(BV_CIPHER_AES256GCM, 8, &k2, &c2);
        char id[33];
        memcpy(id, name, 32);
        id[32] = '\0';
        ASSERT_ERROR(bv_snapshot_load(e.b, c2, id, &t), EBADMSG);
        bv_object_codec_free(c2);
        bv_keyring_free(k2);

        /* an unencrypted repository's codec round-trips too */
        env_codec(BV_CIPHER_NONE, 0, &k2, &c2);
        s = make_snapshot(3, "plain", 5);
        ASSERT_OK(bv_snapshot_save(e.b, c2, s));
        ASSERT_OK(bv_snapshot_load(e.b, c2, s->id, &t));
        assert_same(s, t);
        bv_snapshot_free(t);
        bv_snapshot_free(s);
        bv_object_codec_free(c2);
        bv_keyring_free(k2);
        env_done(&e);
}

/* Rewrites a file through a function of its bytes. */
static void rewrite(int dirfd, const char *name, void (*edit)(uint8_t *data, size_t *len, size_t arg),
                    size_t arg)
{
        void *data = NULL;
        size_t len = 0;
        ASSERT_OK(bv_read_file(dirfd, name, 1 << 20, &data, &len));
        edit(data, &len, arg);
        ASSERT_TRUE(unlinkat(dirfd, name, 0) == 0);
        ASSERT_OK(bv_write_file_durable(dirfd, name, data, len, false));
        free(data);
}

static void flip(uint8_t *data, size_t *len, size_t pos)
{
        data[pos] ^= 0x10;
}
static void truncate_to(uint8_t *data, size_t *len, size_t n)
{
        *len = n;
}
static void set_version(uint8_t *data, size_t *len, size_t v)
{
        put_le32(data + 8, (uint32_t)v);
}
static void set_reserved(uint8_t *data, size_t *len, size_t v)
{
        put_le32(data + 12, (uint32_t)v);
}

TEST(damaged_files)
{
        Env e;
        BvSnapshot *s = make_snapshot(4, "x", 100), *t = NULL;
        char name[BV_SNAPSHOT_FILE_MAX], id[33];
        struct stat st;

        env_init(&e);
        ASSERT_OK(bv_snapshot_save(e.b, e.codec, s));
        snprintf(name, sizeof(name), "%s.snap", s->id);
        strcpy(id, s->id);
        ASSERT_TRUE(fstatat(e.dirfd, name, &st, 0) == 0);
        size_t size = (size_t)st.st_size;

        /* a flipped byte anywhere: magic, reserved, nonce, ciphertext, tag */
        const size_t positions[] = {0, 7, 13, 16, 20, 30, size / 2, size - 17, size - 1};
        for (size_t i = 0; i < ELEMENTSOF(positions); i++) {
                rewrite(e.dirfd, name, flip, positions[i]);
                ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, id, &t), EBADMSG);
                rewrite(e.dirfd, name, flip, positions[i]);
                ASSERT_OK(bv_snapshot_load(e.b, e.codec, id, &t));
                bv_snapshot_free(t);
                t = NULL;
        }
        /* unknown versions, reserved bits */
        rewrite(e.dirfd, name, set_version, 2);
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, id, &t), EPROTONOSUPPORT);
        rewrite(e.dirfd, name, set_version, 0);
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, id, &t), EPROTONOSUPPORT);
        rewrite(e.dirfd, name, set_version, 1);
        rewrite(e.dirfd, name, set_reserved, 1);
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, id, &t), EBADMSG);
        rewrite(e.dirfd, name, set_reserved, 0);
        ASSERT_OK(bv_snapshot_load(e.b, e.codec, id, &t));
        bv_snapshot_free(t);
        t = NULL;

        /* truncations */
        const size_t lengths[] = {size - 1, size / 2, 17, 16, 15, 8, 0};
        for (size_t i = 0; i < ELEMENTSOF(lengths); i++) {
                rewrite(e.dirfd, name, truncate_to, lengths[i]);
                ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, id, &t), EBADMSG);
        }

        /* a record renamed to another id fails authentication (the id is in the AAD) */
        bv_snapshot_free(s);
        s = make_snapshot(5, "y", 200);
        ASSERT_OK(bv_snapshot_save(e.b, e.codec, s));
        char other[BV_SNAPSHOT_FILE_MAX];
        snprintf(other, sizeof(other), "%s.snap", GOOD_ID);
        snprintf(name, sizeof(name), "%s.snap", s->id);
        ASSERT_TRUE(renameat(e.dirfd, name, e.dirfd, other) == 0);
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, GOOD_ID, &t), EBADMSG);

        /* a well-sealed record whose JSON names another snapshot */
        char *json = NULL;
        uint8_t oid[BV_ID_SIZE] = {0}, buf[4096];
        size_t olen = 0;
        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_OK(bv_hex_decode(GOOD_ID, oid, BV_SNAPSHOT_ID_SIZE));
        memcpy(buf, "BLKVSNAP\1\0\0\0\0\0\0\0", 16);
        ASSERT_TRUE(bv_object_bound(strlen(json)) + 16 <= sizeof(buf));
        ASSERT_OK(bv_object_encode(e.codec, BV_OBJ_SNAPSHOT, oid, json, strlen(json), buf + 16, &olen));
        ASSERT_TRUE(unlinkat(e.dirfd, other, 0) == 0);
        ASSERT_OK(bv_write_file_durable(e.dirfd, other, buf, 16 + olen, false));
        ASSERT_ERROR(bv_snapshot_load(e.b, e.codec, GOOD_ID, &t), EBADMSG);
        /* the same object with the matching id loads */
        strcpy(s->id, GOOD_ID);
        free(json);
        ASSERT_OK(bv_snapshot_to_json(s, &json));
        ASSERT_OK(bv_object_encode(e.codec, BV_OBJ_SNAPSHOT, oid, json, strlen(json), buf + 16, &olen));
        ASSERT_TRUE(unlinkat(e.dirfd, other, 0) == 0);
        ASSERT_OK(bv_write_file_durable(e.dirfd, other, buf, 16 + olen, false));
        ASSERT_OK(bv_snapshot_load(e.b, e.codec, GOOD_ID, &t));
        bv_snapshot_free(t);
        free(json);
        bv_snapshot_free(s);
        env_done(&e);
}

static void set_mtime(Env *e, const BvSnapshot *s, time_t seconds)
{
        char name[BV_SNAPSHOT_FILE_MAX];
        struct timespec ts[2] = {{.tv_sec = seconds}, {.tv_sec = seconds}};
        snprintf(name, sizeof(name), "%s.snap", s->id);
        ASSERT_TRUE(utimensat(e->dirfd, name, ts, 0) == 0);
}

static size_t list_index(BvSnapshot **list, size_t n, const BvSnapshot *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(list[i]->id, s->id) == 0)
                        return i;
        return (size_t)-1;
}

typedef struct Skipped {
        size_t n;
        char name[BV_SNAPSHOT_FILE_MAX];
        int error;
} Skipped;

static void on_skip(const char *file, int error, void *userdata)
{
        Skipped *s = userdata;

        s->n++;
        snprintf(s->name, sizeof(s->name), "%s", file);
        s->error = error;
}

TEST(list_and_resolve)
{
        Env e;
        BvSnapshot **list = NULL;
        const BvSnapshot *got = NULL;
        size_t n = 99;
        Skipped skipped = {};

        env_init(&e);
        ASSERT_OK(bv_snapshot_list(e.b, e.codec, &list, &n));
        ASSERT_EQ(n, 0);
        ASSERT_ERROR(bv_snapshot_resolve(list, n, "latest", &got), ENOENT);
        bv_snapshot_list_free(list, n);

        /* saved out of order; two share a time (then the id decides) and two share a name */
        static const struct {
                uint64_t seed, time;
                const char *name;
        } def[] = {{10, 300, "web"}, {11, 100, "db"}, {12, 200, "web"}, {13, 200, "db"}, {14, 50, "old"}};
        BvSnapshot *made[ELEMENTSOF(def)];
        for (size_t i = 0; i < ELEMENTSOF(def); i++) {
                made[i] = make_snapshot(def[i].seed, def[i].name, def[i].time);
                ASSERT_OK(bv_snapshot_save(e.b, e.codec, made[i]));
        }
        /* strays the list must ignore: a temporary file, a stray, a directory, wrong case */
        ASSERT_OK(bv_write_file_durable(e.dirfd, ".tmp-123456", "junk", 4, false));
        ASSERT_OK(bv_write_file_durable(e.dirfd, "README", "junk", 4, false));
        ASSERT_OK(bv_write_file_durable(e.dirfd, "00112233445566778899AABBCCDDEEFF.snap", "junk", 4, false));
        ASSERT_OK(bv_write_file_durable(e.dirfd, GOOD_ID ".snap.tmp", "junk", 4, false));
        ASSERT_TRUE(mkdirat(e.dirfd, "sub", 0700) == 0);

        /* file times in the order written, one second apart */
        for (size_t i = 0; i < ELEMENTSOF(def); i++)
                set_mtime(&e, made[i], 1000 + i);

        ASSERT_OK(bv_snapshot_list_report(e.b, e.codec, &list, &n, on_skip, &skipped));
        ASSERT_EQ(n, ELEMENTSOF(def));
        ASSERT_EQ(skipped.n, 0);
        for (size_t i = 1; i < n; i++)
                ASSERT_TRUE(list[i - 1]->time <= list[i]->time);
        /* the same second: the order written (made[2] before made[3]) */
        ASSERT_EQ(list_index(list, n, made[2]) + 1, list_index(list, n, made[3]));
        ASSERT_STREQ(list[0]->name, "old");
        ASSERT_STREQ(list[n - 1]->name, "web");

        /* resolve */
        ASSERT_OK(bv_snapshot_resolve(list, n, "latest", &got));
        ASSERT_STREQ(got->id, made[0]->id);
        ASSERT_OK(bv_snapshot_resolve(list, n, made[3]->id, &got));
        ASSERT_STREQ(got->id, made[3]->id);
        ASSERT_OK(bv_snapshot_resolve(list, n, "db", &got));
        ASSERT_STREQ(got->id, made[3]->id);
        ASSERT_OK(bv_snapshot_resolve(list, n, "web", &got));
        ASSERT_STREQ(got->id, made[0]->id);
        ASSERT_OK(bv_snapshot_resolve(list, n, "old", &got));
        ASSERT_STREQ(got->id, made[4]->id);
        /* the shortest unique prefix of made[1] and an ambiguous one */
        char prefix[33];
        size_t plen = 1;
        for (;; plen++) {
                size_t hits = 0;
                for (size_t i = 0; i < n; i++)
                        hits += strncmp(list[i]->id, made[1]->id, plen) == 0;
                if (hits == 1)
                        break;
        }
        memcpy(prefix, made[1]->id, plen);
        prefix[plen] = '\0';
        ASSERT_OK(bv_snapshot_resolve(list, n, prefix, &got));
        ASSERT_STREQ(got->id, made[1]->id);
        /* a prefix shared by two: a fake list of two snapshots that share their first digit */
        BvSnapshot *pair[2] = {made[0], made[1]};
        char saved = made[1]->id[0];
        made[1]->id[0] = made[0]->id[0];
        memcpy(prefix, made[0]->id, 1);
        prefix[1] = '\0';
        ASSERT_ERROR(bv_snapshot_resolve(pair, 2, prefix, &got), ENOTUNIQ);
        made[1]->id[0] = saved;
        ASSERT_ERROR(bv_snapshot_resolve(list, n, "nosuch", &got), ENOENT);
        ASSERT_ERROR(bv_snapshot_resolve(list, n, "", &got), ENOENT);
        ASSERT_ERROR(bv_snapshot_resolve(list, n, "zz", &got), ENOENT);
        ASSERT_ERROR(bv_snapshot_resolve(list, n, NULL, &got), EINVAL);
        /* a name that is another snapshot's 8-digit id (written before names were checked): the id
         * wins; a 3-digit name wins over a 3-digit prefix; an ambiguous 4-digit prefix is refused
         * even when a snapshot bears it as its name */
        char id8[9], id3[4];
        memcpy(id8, made[1]->id, 8);
        id8[8] = '\0';
        memcpy(id3, made[1]->id, 3);
        id3[3] = '\0';
        BvSnapshot *l2 = list[list_index(list, n, made[2])];
        char *old_name = l2->name;
        l2->name = id8;
        ASSERT_OK(bv_snapshot_resolve(list, n, id8, &got));
        ASSERT_STREQ(got->id, made[1]->id);
        l2->name = id3;
        ASSERT_OK(bv_snapshot_resolve(list, n, id3, &got));
        ASSERT_TRUE(got == l2);
        l2->name = old_name;
        old_name = made[2]->name;
        BvSnapshot *twins[3] = {made[0], made[1], made[2]};
        char keep[4];
        memcpy(keep, made[1]->id, 4);
        memcpy(made[1]->id, made[0]->id, 4);
        memcpy(id8, made[0]->id, 4);
        id8[4] = '\0';
        made[2]->name = id8;
        ASSERT_ERROR(bv_snapshot_resolve(twins, 3, id8, &got), ENOTUNIQ);
        made[2]->name = old_name;
        memcpy(made[1]->id, keep, 4);
        /* of two with the same time, the later in the list is the newer */
        BvSnapshot *same[2] = {made[2], made[3]};
        ASSERT_OK(bv_snapshot_resolve(same, 2, "latest", &got));
        ASSERT_TRUE(got == made[3]);
        same[0] = made[3];
        same[1] = made[2];
        ASSERT_OK(bv_snapshot_resolve(same, 2, "latest", &got));
        ASSERT_TRUE(got == made[2]);
        bv_snapshot_list_free(list, n);

        /* written the other way round, the order follows; with equal file times the id decides */
        set_mtime(&e, made[3], 1002);
        set_mtime(&e, made[2], 1003);
        ASSERT_OK(bv_snapshot_list(e.b, e.codec, &list, &n));
        ASSERT_EQ(list_index(list, n, made[3]) + 1, list_index(list, n, made[2]));
        bv_snapshot_list_free(list, n);
        set_mtime(&e, made[2], 1002);
        ASSERT_OK(bv_snapshot_list(e.b, e.codec, &list, &n));
        size_t lo = strcmp(made[2]->id, made[3]->id) < 0 ? 2 : 3;
        ASSERT_EQ(list_index(list, n, made[lo]) + 1, list_index(list, n, made[5 - lo]));
        bv_snapshot_list_free(list, n);

        /* a damaged record is skipped and named; the others are listed */
        char name[BV_SNAPSHOT_FILE_MAX];
        snprintf(name, sizeof(name), "%s.snap", made[2]->id);
        rewrite(e.dirfd, name, flip, 40);
        ASSERT_OK(bv_snapshot_list_report(e.b, e.codec, &list, &n, on_skip, &skipped));
        ASSERT_EQ(n, ELEMENTSOF(def) - 1);
        ASSERT_EQ(list_index(list, n, made[2]), (size_t)-1);
        ASSERT_EQ(skipped.n, 1);
        ASSERT_STREQ(skipped.name, name);
        ASSERT_EQ(skipped.error, -EBADMSG);
        bv_snapshot_list_free(list, n);
        ASSERT_OK(bv_snapshot_list(e.b, e.codec, &list, &n));
        ASSERT_EQ(n, ELEMENTSOF(def) - 1);
        bv_snapshot_list_free(list, n);
        rewrite(e.dirfd, name, set_version, 9);
        skipped.n = 0;
        ASSERT_OK(bv_snapshot_list_report(e.b, e.codec, &list, &n, on_skip, &skipped));
        ASSERT_EQ(skipped.n, 1);
        ASSERT_EQ(skipped.error, -EPROTONOSUPPORT);
        bv_snapshot_list_free(list, n);
        /* a record that is a FIFO is skipped without hanging */
        ASSERT_OK(unlinkat(e.dirfd, name, 0));
        ASSERT_OK(mkfifoat(e.dirfd, name, 0600));
        skipped.n = 0;
        ASSERT_OK(bv_snapshot_list_report(e.b, e.codec, &list, &n, on_skip, &skipped));
        ASSERT_EQ(skipped.n, 1);
        ASSERT_EQ(skipped.error, -EBADFD);
        bv_snapshot_list_free(list, n);
        /* not a directory: the list fails */
        BvBackend *other;
        char *snaps;
        ASSERT_TRUE(asprintf(&snaps, "%s/other", e.dir) > 0);
        ASSERT_OK(bv_backend_open(snaps, true, &other));
        ASSERT_TRUE(unlinkat(e.dirfd, "../other/snapshots", AT_REMOVEDIR) == 0);
        ASSERT_TRUE(renameat(e.dirfd, "README", e.dirfd, "../other/snapshots") == 0);
        ASSERT_ERROR(bv_snapshot_list_report(other, e.codec, &list, &n, on_skip, &skipped), ENOTDIR);
        bv_backend_close(other);
        free(snaps);

        for (size_t i = 0; i < ELEMENTSOF(def); i++)
                bv_snapshot_free(made[i]);
        env_done(&e);
}

TEST(name_rules)
{
        char name[300];

        ASSERT_TRUE(bv_snapshot_name_problem("nightly") == NULL);
        ASSERT_TRUE(bv_snapshot_name_problem("host \"db\" \xc3\xa9") == NULL);
        ASSERT_TRUE(bv_snapshot_name_problem("abc") == NULL);
        ASSERT_TRUE(bv_snapshot_name_problem("0123456789abcdef0123456789abcdef0") == NULL);
        ASSERT_TRUE(bv_snapshot_name_problem("cafe-1") == NULL);
        ASSERT_STREQ(bv_snapshot_name_problem("a\nb"), "it contains a control character");
        ASSERT_STREQ(bv_snapshot_name_problem("\x1b[2J"), "it contains a control character");
        ASSERT_STREQ(bv_snapshot_name_problem("del\x7f"), "it contains a control character");
        ASSERT_STREQ(bv_snapshot_name_problem("cafe"), "4 to 32 hex digits would be taken for a snapshot id");
        ASSERT_STREQ(bv_snapshot_name_problem("DeadBeef"), "4 to 32 hex digits would be taken for a snapshot id");
        ASSERT_STREQ(bv_snapshot_name_problem("0123456789abcdef0123456789abcdef"),
                     "4 to 32 hex digits would be taken for a snapshot id");
        ASSERT_STREQ(bv_snapshot_name_problem("latest"), "'latest' means the newest snapshot");
        memset(name, 'n', 255);
        name[255] = '\0';
        ASSERT_TRUE(bv_snapshot_name_problem(name) == NULL);
        name[255] = 'n';
        name[256] = '\0';
        ASSERT_STREQ(bv_snapshot_name_problem(name), "longer than 255 bytes");
}

/* Snapshots of one second whose records say their start in nanoseconds are listed in that
 * order, whatever their files' times (a copy does not keep them); a record without it falls back
 * to its file's time. */
TEST(list_time_ns)
{
        Env e;
        BvSnapshot **list = NULL;
        size_t n = 0;

        env_init(&e);
        BvSnapshot *first = make_snapshot(20, "vm", 500), *second = make_snapshot(21, "vm", 500),
                   *old = make_snapshot(22, "vm", 500);
        first->time_ns = 500 * 1000000000ull + 200;
        second->time_ns = 500 * 1000000000ull + 900;
        ASSERT_OK(bv_snapshot_save(e.b, e.codec, first));
        ASSERT_OK(bv_snapshot_save(e.b, e.codec, second));
        ASSERT_OK(bv_snapshot_save(e.b, e.codec, old));
        set_mtime(&e, second, 1000);
        set_mtime(&e, first, 1001);
        set_mtime(&e, old, 1002);
        ASSERT_OK(bv_snapshot_list(e.b, e.codec, &list, &n));
        ASSERT_EQ(n, 3);
        ASSERT_EQ(list_index(list, n, first) + 1, list_index(list, n, second));
        ASSERT_EQ(list[list_index(list, n, first)]->time_ns, first->time_ns);
        ASSERT_EQ(list_index(list, n, second) + 1, list_index(list, n, old)); /* by file time */
        bv_snapshot_list_free(list, n);
        bv_snapshot_free(first);
        bv_snapshot_free(second);
        bv_snapshot_free(old);
        env_done(&e);
}

int main(void)
{
        RUN(name_rules);
        RUN(json_roundtrip);
        RUN(json_errors);
        RUN(json_older_record);
        RUN(json_used_only);
        RUN(save_load);
        RUN(damaged_files);
        RUN(list_and_resolve);
        RUN(list_time_ns);
        return 0;
}
