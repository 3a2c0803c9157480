/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* scrypt (RFC 7914) through OpenSSL. Default cost for new keys: N=2^17, r=8, p=1 (128 MiB). */
#define BV_SCRYPT_DEFAULT_LOG2_N 17
#define BV_SCRYPT_DEFAULT_R 8
#define BV_SCRYPT_DEFAULT_P 1

/* Whether scrypt takes these parameters: log2_n 10..22, r 1..32, p 1..16, and RFC 7914's
 * N < 2^(128 r / 8), i.e. log2_n < 16 r (OpenSSL refuses the rest). */
bool bv_scrypt_params_valid(unsigned log2_n, unsigned r, unsigned p);

/* -EINVAL for parameters bv_scrypt_params_valid refuses; -ENOMEM when scrypt's memory cannot be
 * allocated. */
int bv_scrypt(const void *pass, size_t pass_len, const void *salt, size_t salt_len, unsigned log2_n,
              unsigned r, unsigned p, void *out, size_t out_len);
