/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Writes 2*len lowercase hex digits and a NUL to out. */
void bv_hex_encode(const void *data, size_t len, char *out);

/* Decodes exactly 2*len hex digits (either case) from s into out; -EINVAL otherwise. */
int bv_hex_decode(const char *s, void *out, size_t len);

/* The first len characters of s are lowercase hex digits (s has at least len). */
bool bv_hex_is_lower_prefix(const char *s, size_t len);
/* s is exactly len lowercase hex digits. */
bool bv_hex_is_lower(const char *s, size_t len);
