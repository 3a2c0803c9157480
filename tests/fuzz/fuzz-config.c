/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The config file parser. A config that parses must format back to JSON that parses to the
 * same values, and its canonical MAC text must be deterministic. The parsed values then go
 * through the checks repository open applies (bv_repo_config_check), whose verdict must not
 * change across the round trip. A config that passes them is then used as a repository uses
 * it: a keyring for its cipher (from a fixed master secret), a splitter built from its chunker
 * parameters cutting an image made from the input (data, a zero run, a hole), and an object
 * codec at its compression level that must round-trip every chunk it cut.
 */
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "keyring.h"
#include "object.h"
#include "repo.h"

#define IMAGE_DATA (96u * 1024)
#define IMAGE_ZERO (32u * 1024)
#define IMAGE_HOLE (64u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
        const BvChunkerParams *params;
        const BvKeyring *keyring;
        BvObjectCodec *codec;
        uint64_t next; /* where the next extent must start */
        size_t chunks;
} Cut;

/* Every extent follows the previous one; every data chunk is at most max bytes and decodes
 * back to itself after encoding. */
static int on_extent(const BvExtent *e, void *userdata)
{
        Cut *c = userdata;
        uint8_t id[BV_ID_SIZE];
        size_t len, out_len;
        void *enc, *dec = NULL;

        if (e->offset != c->next || e->length == 0)
                abort();
        c->next += e->length;
        if (e->kind != BV_EXTENT_DATA)
                return 0;
        if (e->length > c->params->max || c->chunks++ > 8) /* the first chunks are enough */
                return 0;
        len = (size_t)e->length;
        bv_keyring_id(c->keyring, BV_ID_CHUNK, e->data, len, id);
        enc = malloc(bv_object_bound(len));
        if (!enc || bv_object_encode(c->codec, BV_OBJ_CHUNK, id, e->data, len, enc, &out_len) < 0 ||
            bv_object_decode_alloc(c->codec, BV_OBJ_CHUNK, id, enc, out_len, &dec, &len) < 0 ||
            len != e->length || memcmp(dec, e->data, len) != 0)
                abort();
        free(enc);
        free(dec);
        return 0;
}

static void use_config(const BvRepoConfigFile *f, const uint8_t *data, size_t size)
{
        static const uint8_t master[BV_MASTER_SIZE] = "fuzz master secret of 32 bytes!";
        BvChunkerParams p = f->config.chunker;
        BvKeyring *k = NULL;
        BvSplitter *s = NULL;
        uint8_t *image;
        Cut cut = { .params = &p };

        if (bv_keyring_new(f->config.cipher, master, f->id, &k) < 0)
                abort();
        memcpy(p.key, bv_keyring_chunker_key(k), sizeof(p.key));
        image = calloc(1, IMAGE_DATA + IMAGE_ZERO);
        if (!image)
                abort();
        for (size_t i = 0; size > 0 && i < IMAGE_DATA; i++) /* the input, varied at each repetition */
                image[i] = (uint8_t)(data[i % size] + (i / size) * 131);
        cut.keyring = k;
        if (bv_object_codec_new(k, f->config.zstd_level, &cut.codec) < 0 || bv_splitter_new(&p, &s) < 0 ||
            bv_splitter_feed(s, 0, image, IMAGE_DATA + IMAGE_ZERO, on_extent, &cut) < 0 ||
            bv_splitter_hole(s, IMAGE_DATA + IMAGE_ZERO, IMAGE_HOLE, on_extent, &cut) < 0 ||
            bv_splitter_feed(s, IMAGE_DATA + IMAGE_ZERO + IMAGE_HOLE, image, BV_BLOCK_SIZE, on_extent, &cut) < 0 ||
            bv_splitter_finish(s, on_extent, &cut) < 0 || cut.next != IMAGE_DATA + IMAGE_ZERO + IMAGE_HOLE + BV_BLOCK_SIZE)
                abort();
        bv_splitter_free(s);
        bv_object_codec_free(cut.codec);
        bv_keyring_free(k);
        free(image);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        BvRepoConfigFile f, g;
        char *json = NULL, *c1 = NULL, *c2 = NULL;
        int r;

        if (bv_repo_config_parse((const char *)data, size, &f) < 0)
                return 0;
        if (bv_repo_config_format(&f, &json) < 0 || bv_repo_config_parse(json, strlen(json), &g) < 0)
                abort();
        if (memcmp(&f.config, &g.config, sizeof(f.config)) != 0 || memcmp(f.id, g.id, sizeof(f.id)) != 0 ||
            memcmp(f.mac, g.mac, sizeof(f.mac)) != 0 || f.created != g.created)
                abort();
        if (bv_repo_config_canonical(&f, &c1) < 0 || bv_repo_config_canonical(&g, &c2) < 0 || strcmp(c1, c2) != 0)
                abort();
        r = bv_repo_config_check(&f.config);
        if (r != bv_repo_config_check(&g.config))
                abort();
        if (r >= 0)
                use_config(&f, data, size);
        free(json);
        free(c1);
        free(c2);
        return 0;
}
