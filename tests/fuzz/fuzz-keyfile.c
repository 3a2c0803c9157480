/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The key file (keys/default) parser. A key file that parses must format back to JSON that
 * parses to the same values. Then unsealing as repository open does, with a fixed secret:
 * always for hkdf key files, and for scrypt ones only with the cheapest valid costs (log2_n 10,
 * r*p <= 2) so that runs stay fast; a forged key file must fail with -ENOKEY or -EINVAL, and
 * both copies must give the same verdict. The seeds scrypt-opens and hkdf-opens are sealed
 * with these secrets: a master secret they open goes on as repository open takes it, into a
 * keyring whose subkeys, ids and data codec are exercised.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keyring.h"
#include "object.h"
#include "repo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What repository open does with an unsealed master secret. */
static void use_master(const BvKeyFile *k, const uint8_t master[BV_MASTER_SIZE])
{
        static const char text[] = "fuzz object";
        uint8_t id[BV_ID_SIZE], ids[2][BV_ID_SIZE], enc[256], dec[sizeof(text)];
        BvKeyring *ring = NULL;
        BvObjectCodec *codec = NULL;
        size_t len, out_len;

        if (bv_keyring_new(BV_CIPHER_AES256GCM, master, k->repository, &ring) < 0 ||
            bv_object_codec_new(ring, 3, &codec) < 0)
                abort();
        bv_keyring_id(ring, BV_ID_MAP, text, sizeof(text), id);
        bv_keyring_id_prefixes(ring, BV_ID_MAP, text, sizeof(text), 8, ids);
        if (memcmp(ids[1], id, sizeof(id)) != 0 || bv_object_bound(sizeof(text)) > sizeof(enc) ||
            bv_object_encode(codec, BV_OBJ_MAP, id, text, sizeof(text), enc, &out_len) < 0 ||
            bv_object_decode(codec, BV_OBJ_MAP, id, enc, out_len, dec, sizeof(dec), &len) < 0 ||
            len != sizeof(text) || memcmp(dec, text, len) != 0)
                abort();
        enc[out_len - 1] ^= 1; /* a flipped tag bit never decodes */
        if (bv_object_decode(codec, BV_OBJ_MAP, id, enc, out_len, dec, sizeof(dec), &len) >= 0)
                abort();
        bv_object_codec_free(codec);
        bv_keyring_free(ring);
}

static void try_open(const BvKeyFile *k, const BvKeyFile *l)
{
        static const char material[] = "fuzz key material, 32 bytes long";
        uint8_t m1[BV_MASTER_SIZE], m2[BV_MASTER_SIZE];
        int r1, r2;

        if (k->scrypt && (k->log2_n > 10 || (uint64_t)k->r * k->p > 2))
                return;
        r1 = bv_repo_keyfile_open(k, "fuzz", material, sizeof(material) - 1, m1);
        r2 = bv_repo_keyfile_open(l, "fuzz", material, sizeof(material) - 1, m2);
        if (r1 != r2 || (r1 < 0 && r1 != -ENOKEY && r1 != -EINVAL))
                abort();
        if (r1 >= 0 && memcmp(m1, m2, sizeof(m1)) != 0)
                abort();
        if (r1 >= 0) {
                use_master(k, m1);
                /* another secret of the same kind does not open it */
                if (bv_repo_keyfile_open(k, "fuzz?", "fuzz key material, 32 bytes lonG", sizeof(material) - 1, m2) !=
                    -ENOKEY)
                        abort();
        }
        /* the wrong kind of secret never opens it */
        if (bv_repo_keyfile_open(k, k->scrypt ? NULL : "fuzz", k->scrypt ? material : NULL,
                                 k->scrypt ? sizeof(material) - 1 : 0, m1) != -ENOKEY)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        BvKeyFile k, l;
        char *json = NULL;

        if (bv_repo_keyfile_parse((const char *)data, size, &k) < 0)
                return 0;
        if (bv_repo_keyfile_format(&k, &json) < 0 || bv_repo_keyfile_parse(json, strlen(json), &l) < 0)
                abort();
        if (k.scrypt != l.scrypt || k.log2_n != l.log2_n || k.r != l.r || k.p != l.p ||
            memcmp(k.repository, l.repository, sizeof(k.repository)) != 0 ||
            memcmp(k.salt, l.salt, sizeof(k.salt)) != 0 || memcmp(k.nonce, l.nonce, sizeof(k.nonce)) != 0 ||
            memcmp(k.sealed, l.sealed, sizeof(k.sealed)) != 0)
                abort();
        try_open(&k, &l);
        free(json);
        return 0;
}
