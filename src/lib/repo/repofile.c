/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The two small JSON files of a repository (docs/FORMAT.md, "Config and key files"): the
 * config and keys/default. Parsing is strict: every field must be present with the right
 * type and range; unknown fields are ignored. The MAC and the seal are checked by repo.c.
 */
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "hex.h"
#include "macro.h"
#include "repo.h"
#include "json-util.h"
#include "kdf.h"

#define CONFIG_FORMAT "blkvault-repository"
#define CONFIG_VERSION 1
#define KEYFILE_FORMAT "blkvault-key"
#define KEYFILE_VERSION 1
#define JSON_MAX_DEPTH 8
#define PACK_TARGET_MIN (64u * 1024)
#define PACK_TARGET_MAX (1024u * 1024 * 1024)
#define ZSTD_LEVEL_MIN (-7)
#define ZSTD_LEVEL_MAX 19
/* scrypt memory (128 * r * N) accepted in a key file: at most 2 GiB. */
#define SCRYPT_MAX_MEM (UINT64_C(2) << 30)


static int get_field(json_object *o, const char *key, json_type type, json_object **ret)
{
        *ret = bv_json_member(o, key, type);
        return *ret ? 0 : -EBADMSG;
}

static int get_string(json_object *o, const char *key, const char **ret)
{
        json_object *v;
        int r = get_field(o, key, json_type_string, &v);
        if (r < 0)
                return r;
        *ret = json_object_get_string(v);
        return 0;
}

static int get_int(json_object *o, const char *key, int64_t min, int64_t max, int64_t *ret)
{
        json_object *v;
        int64_t x;
        int r = get_field(o, key, json_type_int, &v);
        if (r < 0)
                return r;
        errno = 0;
        x = json_object_get_int64(v);
        if (errno != 0 || x < min || x > max)
                return -EBADMSG;
        *ret = x;
        return 0;
}

static int get_hex(json_object *o, const char *key, void *out, size_t len)
{
        const char *s;
        int r = get_string(o, key, &s);
        if (r < 0)
                return r;
        return bv_hex_decode(s, out, len) < 0 ? -EBADMSG : 0;
}

/* A nested object o[key] and its string field name (e.g. "chunker" and its "kind"). */
static int get_section(json_object *o, const char *key, const char *name, json_object **ret, const char **ret_name)
{
        int r = get_field(o, key, json_type_object, ret);
        if (r < 0)
                return r;
        return get_string(*ret, name, ret_name);
}

/* Parses a document and checks its "format" and "version" first, so that a newer version says so
 * instead of failing on a field it changed. */
static int parse_document(const char *json, size_t len, const char *format, int64_t version,
                          json_object **ret)
{
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *s;
        json_object *v;
        int r;

        r = bv_json_parse_object(json, len, JSON_MAX_DEPTH, &o);
        if (r < 0)
                return r;
        r = get_string(o, "format", &s);
        if (r < 0)
                return r;
        if (strcmp(s, format) != 0)
                return -EBADMSG;
        r = get_field(o, "version", json_type_int, &v);
        if (r < 0)
                return r;
        if (json_object_get_int64(v) != version)
                return -EPROTONOSUPPORT;
        *ret = TAKE_PTR(o);
        return 0;
}

static int parse_chunker(json_object *o, BvRepoConfig *c)
{
        json_object *ch;
        const char *kind;
        int64_t min, avg, max;
        int r;

        r = get_section(o, "chunker", "kind", &ch, &kind);
        if (r < 0)
                return r;
        r = bv_chunker_kind_from_name(kind, &c->chunker.kind);
        if (r < 0)
                return -EPROTONOSUPPORT;
        if (get_int(ch, "min", 1, BV_CHUNK_MAX_LIMIT, &min) < 0 ||
            get_int(ch, "avg", 1, BV_CHUNK_MAX_LIMIT, &avg) < 0 ||
            get_int(ch, "max", 1, BV_CHUNK_MAX_LIMIT, &max) < 0)
                return -EBADMSG;
        c->chunker.min = (uint32_t)min;
        c->chunker.avg = (uint32_t)avg;
        c->chunker.max = (uint32_t)max;
        return bv_chunker_params_check(&c->chunker) < 0 ? -EBADMSG : 0;
}

static int parse_compression(json_object *o, BvRepoConfig *c)
{
        json_object *co;
        const char *codec;
        int64_t level;
        int r;

        r = get_section(o, "compression", "codec", &co, &codec);
        if (r < 0)
                return r;
        r = get_int(co, "level", ZSTD_LEVEL_MIN, ZSTD_LEVEL_MAX, &level);
        if (r < 0)
                return r;
        c->compress_mode = BV_COMPRESS_LEVEL;
        if (strcmp(codec, "none") == 0) {
                if (level != 0)
                        return -EBADMSG;
        } else if (strcmp(codec, "zstd") == 0 || strcmp(codec, "auto") == 0) {
                if (level == 0)
                        return -EBADMSG;
                if (codec[0] == 'a')
                        c->compress_mode = BV_COMPRESS_AUTO;
        } else
                return -EPROTONOSUPPORT;
        c->zstd_level = (int)level;
        return 0;
}

int bv_repo_config_parse(const char *json, size_t len, BvRepoConfigFile *ret)
{
        _cleanup_(json_object_putp) json_object *o = NULL;
        BvRepoConfigFile f = {};
        const char *enc;
        int64_t created, pack_target;
        int r;

        if (!ret)
                return -EINVAL;
        r = parse_document(json, len, CONFIG_FORMAT, CONFIG_VERSION, &o);
        if (r < 0)
                return r;
        r = get_hex(o, "id", f.id, sizeof(f.id));
        if (r < 0)
                return r;
        r = get_int(o, "created", 0, INT64_MAX, &created);
        if (r < 0)
                return r;
        f.created = (uint64_t)created;
        r = get_string(o, "encryption", &enc);
        if (r < 0)
                return r;
        r = bv_cipher_from_name(enc, &f.config.cipher);
        if (r < 0)
                return -EPROTONOSUPPORT;
        r = parse_chunker(o, &f.config);
        if (r < 0)
                return r;
        r = parse_compression(o, &f.config);
        if (r < 0)
                return r;
        r = get_int(o, "pack_target", PACK_TARGET_MIN, PACK_TARGET_MAX, &pack_target);
        if (r < 0)
                return r;
        f.config.pack_target = (uint32_t)pack_target;
        r = get_hex(o, "mac", f.mac, sizeof(f.mac));
        if (r < 0)
                return r;
        *ret = f;
        return 0;
}

/* The config's compression.codec: "none" (level 0, whatever the mode), "auto" or "zstd". */
static const char *compression_codec(const BvRepoConfig *c)
{
        if (c->zstd_level == 0)
                return "none";
        return c->compress_mode == BV_COMPRESS_AUTO ? "auto" : "zstd";
}

int bv_repo_config_canonical(const BvRepoConfigFile *f, char **ret)
{
        char id[2 * BV_REPO_ID_SIZE + 1];
        const BvRepoConfig *c = &f->config;
        const char *cipher = bv_cipher_name(c->cipher), *kind = bv_chunker_kind_name(c->chunker.kind);
        char *s;

        if (!cipher || !kind)
                return -EINVAL;
        bv_hex_encode(f->id, sizeof(f->id), id);
        if (asprintf(&s,
                     "blkvault-config-v1\n"
                     "format=" CONFIG_FORMAT "\n"
                     "version=%d\n"
                     "id=%s\n"
                     "created=%" PRIu64 "\n"
                     "encryption=%s\n"
                     "chunker.kind=%s\n"
                     "chunker.min=%" PRIu32 "\n"
                     "chunker.avg=%" PRIu32 "\n"
                     "chunker.max=%" PRIu32 "\n"
                     "compression.codec=%s\n"
                     "compression.level=%d\n"
                     "pack_target=%" PRIu32 "\n",
                     CONFIG_VERSION, id, f->created, cipher, kind, c->chunker.min, c->chunker.avg, c->chunker.max,
                     compression_codec(c), c->zstd_level, c->pack_target) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* A new JSON string of the hex digits of data; NULL: -ENOMEM. */
static json_object *hex_json(const void *data, size_t len)
{
        _cleanup_free_ char *h = malloc(2 * len + 1);
        if (!h)
                return NULL;
        bv_hex_encode(data, len, h);
        return json_object_new_string(h);
}

/* Serializes o (pretty, trailing newline) into a malloc'd string. */
static int to_text(json_object *o, char **ret)
{
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                                  JSON_C_TO_STRING_SPACED |
                                                                  JSON_C_TO_STRING_NOSLASHESCAPE);
        char *t;
        if (!s || asprintf(&t, "%s\n", s) < 0)
                return -ENOMEM;
        *ret = t;
        return 0;
}

static json_object *chunker_json(const BvChunkerParams *p, const char *kind)
{
        return BV_JSON_OBJECT({ "kind", json_object_new_string(kind) },
                              { "min", json_object_new_int64(p->min) },
                              { "avg", json_object_new_int64(p->avg) },
                              { "max", json_object_new_int64(p->max) });
}

static json_object *compression_json(const BvRepoConfig *c)
{
        return BV_JSON_OBJECT({ "codec", json_object_new_string(compression_codec(c)) },
                              { "level", json_object_new_int(c->zstd_level) });
}

int bv_repo_config_format(const BvRepoConfigFile *f, char **ret)
{
        _cleanup_(json_object_putp) json_object *o = NULL;
        const BvRepoConfig *c = &f->config;
        const char *cipher = bv_cipher_name(c->cipher), *kind = bv_chunker_kind_name(c->chunker.kind);

        if (!cipher || !kind)
                return -EINVAL;
        o = BV_JSON_OBJECT({ "format", json_object_new_string(CONFIG_FORMAT) },
                           { "version", json_object_new_int(CONFIG_VERSION) },
                           { "id", hex_json(f->id, sizeof(f->id)) },
                           { "created", json_object_new_int64((int64_t)f->created) },
                           { "encryption", json_object_new_string(cipher) },
                           { "chunker", chunker_json(&c->chunker, kind) },
                           { "compression", compression_json(c) },
                           { "pack_target", json_object_new_int64(c->pack_target) },
                           { "mac", hex_json(f->mac, sizeof(f->mac)) });
        if (!o)
                return -ENOMEM;
        return to_text(o, ret);
}

static int parse_kdf(json_object *o, BvKeyFile *kf)
{
        json_object *kdf;
        const char *alg;
        int64_t log2_n, rr, p;
        int r;

        r = get_section(o, "kdf", "algorithm", &kdf, &alg);
        if (r < 0)
                return r;
        if (strcmp(alg, "scrypt") == 0) {
                if (get_int(kdf, "log2_n", 10, 22, &log2_n) < 0 || get_int(kdf, "r", 1, 32, &rr) < 0 ||
                    get_int(kdf, "p", 1, 16, &p) < 0)
                        return -EBADMSG;
                if (((UINT64_C(128) * (uint64_t)rr) << log2_n) > SCRYPT_MAX_MEM)
                        return -EBADMSG;
                /* each in range, but a combination scrypt refuses: a corrupt key file */
                if (!bv_scrypt_params_valid((unsigned)log2_n, (unsigned)rr, (unsigned)p))
                        return -EBADMSG;
                kf->scrypt = true;
                kf->log2_n = (uint32_t)log2_n;
                kf->r = (uint32_t)rr;
                kf->p = (uint32_t)p;
        } else if (strcmp(alg, "hkdf-sha256") != 0)
                return -EPROTONOSUPPORT;
        return get_hex(kdf, "salt", kf->salt, sizeof(kf->salt));
}

int bv_repo_keyfile_parse(const char *json, size_t len, BvKeyFile *ret)
{
        _cleanup_(json_object_putp) json_object *o = NULL;
        BvKeyFile kf = {};
        const char *cipher;
        int r;

        if (!ret)
                return -EINVAL;
        r = parse_document(json, len, KEYFILE_FORMAT, KEYFILE_VERSION, &o);
        if (r < 0)
                return r;
        r = get_hex(o, "repository", kf.repository, sizeof(kf.repository));
        if (r < 0)
                return r;
        r = parse_kdf(o, &kf);
        if (r < 0)
                return r;
        r = get_string(o, "cipher", &cipher);
        if (r < 0)
                return r;
        if (strcmp(cipher, "aes-256-gcm") != 0)
                return -EPROTONOSUPPORT;
        r = get_hex(o, "nonce", kf.nonce, sizeof(kf.nonce));
        if (r < 0)
                return r;
        r = get_hex(o, "sealed", kf.sealed, sizeof(kf.sealed));
        if (r < 0)
                return r;
        *ret = kf;
        return 0;
}

static json_object *kdf_json(const BvKeyFile *kf)
{
        bool sc = kf->scrypt;

        return BV_JSON_OBJECT({ "algorithm", json_object_new_string(sc ? "scrypt" : "hkdf-sha256") },
                              { sc ? "log2_n" : NULL, sc ? json_object_new_int64(kf->log2_n) : NULL },
                              { sc ? "r" : NULL, sc ? json_object_new_int64(kf->r) : NULL },
                              { sc ? "p" : NULL, sc ? json_object_new_int64(kf->p) : NULL },
                              { "salt", hex_json(kf->salt, sizeof(kf->salt)) });
}

int bv_repo_keyfile_format(const BvKeyFile *kf, char **ret)
{
        _cleanup_(json_object_putp) json_object *o =
                BV_JSON_OBJECT({ "format", json_object_new_string(KEYFILE_FORMAT) },
                               { "version", json_object_new_int(KEYFILE_VERSION) },
                               { "repository", hex_json(kf->repository, sizeof(kf->repository)) },
                               { "kdf", kdf_json(kf) },
                               { "cipher", json_object_new_string("aes-256-gcm") },
                               { "nonce", hex_json(kf->nonce, sizeof(kf->nonce)) },
                               { "sealed", hex_json(kf->sealed, sizeof(kf->sealed)) });

        if (!o)
                return -ENOMEM;
        return to_text(o, ret);
}
