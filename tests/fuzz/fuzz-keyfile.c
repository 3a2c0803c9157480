/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The key file (keys/default) parser. A key file that parses must format back to JSON that
 * parses to the same values. Then unsealing as repository open does, with a fixed secret:
 * always for hkdf key files, and for scrypt ones only with tiny costs (log2_n <= 4, r*p <= 4)
 * so that runs stay fast; a forged key file must fail with -ENOKEY or -EINVAL, and both copies
 * must give the same verdict.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "repo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_open(const BvKeyFile *k, const BvKeyFile *l)
{
        static const char material[] = "fuzz key material, 32 bytes long";
        uint8_t m1[BV_MASTER_SIZE], m2[BV_MASTER_SIZE];
        int r1, r2;

        if (k->scrypt && (k->log2_n > 4 || (uint64_t) k->r * k->p > 4))
                return;
        r1 = bv_repo_keyfile_open(k, "fuzz", material, sizeof(material) - 1, m1);
        r2 = bv_repo_keyfile_open(l, "fuzz", material, sizeof(material) - 1, m2);
        if (r1 != r2 || (r1 < 0 && r1 != -ENOKEY && r1 != -EINVAL))
                abort();
        if (r1 >= 0 && memcmp(m1, m2, sizeof(m1)) != 0)
                abort();
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
