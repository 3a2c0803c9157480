/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Writes 2*len lowercase hex digits and a NUL to out. */
void bv_hex_encode(const void *data, size_t len, char *out);

/* Decodes exactly 2*len hex digits (either case) from s into out; -EINVAL otherwise. */
int bv_hex_decode(const char *s, void *out, size_t len);
