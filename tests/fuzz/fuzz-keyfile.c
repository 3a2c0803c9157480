/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The key file (keys/default) parser. A key file that parses must format back to JSON that
 * parses to the same values. (Unsealing is not fuzzed: it is one AES-GCM open whose failure
 * is a plain -ENOKEY.)
 */
#include <stdlib.h>
#include <string.h>

#include "repo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
        free(json);
        return 0;
}
