/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <openssl/evp.h>

#include "kdf.h"
#include "macro.h"

bool bv_scrypt_params_valid(unsigned log2_n, unsigned r, unsigned p)
{
        return log2_n >= 10 && log2_n <= 22 && r >= 1 && r <= 32 && p >= 1 && p <= 16 && log2_n < 16 * r;
}

int bv_scrypt(const void *pass, size_t pass_len, const void *salt, size_t salt_len, unsigned log2_n,
              unsigned r, unsigned p, void *out, size_t out_len)
{
        uint64_t n, maxmem;

        if (!bv_scrypt_params_valid(log2_n, r, p))
                return -EINVAL;
        if ((!pass && pass_len > 0) || (!salt && salt_len > 0) || !out || out_len == 0)
                return -EINVAL;

        /* scrypt needs 128*r*N bytes for V plus 128*r*p for B (RFC 7914); leave a margin. */
        n = UINT64_C(1) << log2_n;
        maxmem = 128 * (uint64_t)r * (n + p + 2) + (UINT64_C(1) << 20);
        if (EVP_PBE_scrypt(pass ? pass : "", pass_len, salt ? salt : (const void *)"", salt_len, n, r, p,
                           maxmem, out, out_len) != 1)
                return -ENOMEM; /* the parameters were checked: only the allocation can fail */
        return 0;
}
