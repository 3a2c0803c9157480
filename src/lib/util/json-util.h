/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object, json_object_put);

/* Adds v to o under key, taking ownership of v in every case. v may be NULL (its allocation
 * failed): then -ENOMEM. Returns 0 or -ENOMEM. */
int bv_json_add(struct json_object *o, const char *key, struct json_object *v);

/* Parses [json, json+len) as one JSON object nested at most max_depth deep, followed by
 * nothing but whitespace (RFC 8259). -EBADMSG for anything else (NUL bytes included), -ENOMEM. */
int bv_json_parse_object(const char *json, size_t len, int max_depth, struct json_object **ret);

/* o[key] if o has that member and it is of the type; else NULL. */
struct json_object *bv_json_member(struct json_object *o, const char *key, json_type type);

/* A member of an object being built: key NULL leaves it out (then value must be NULL too). */
typedef struct BvJsonField {
        const char *key;
        struct json_object *value; /* NULL (with a key): its allocation failed */
} BvJsonField;

/* A new object of the fields; it takes every value, also on failure. NULL: -ENOMEM. */
struct json_object *bv_json_object_new(const BvJsonField *f, size_t n);
#define BV_JSON_OBJECT(...)                                                                             \
        bv_json_object_new((const BvJsonField[]){ __VA_ARGS__ },                                        \
                           sizeof((const BvJsonField[]){ __VA_ARGS__ }) / sizeof(BvJsonField))

/* A new string, or NULL key and value when s is NULL: { BV_JSON_OPT_STRING("label", s) }. */
#define BV_JSON_OPT_STRING(key, s) (s) ? (key) : NULL, (s) ? json_object_new_string(s) : NULL

/* Optional members of a decoded object: absent leaves *ret alone and returns 0; present with
 * another type (or a negative number) is -EBADMSG. */
int bv_json_get_u64(struct json_object *o, const char *key, uint64_t *ret);
int bv_json_get_double(struct json_object *o, const char *key, double *ret);
/* *ret = a copy of the string (freed first). */
int bv_json_get_string(struct json_object *o, const char *key, char **ret);

/* The length of the valid UTF-8 sequence s starts with (1 to 4; an ASCII byte, NUL too, is 1),
 * or 0 (Unicode 15, table 3-7: no stray continuation, overlong form, surrogate, beyond U+10FFFF or
 * cut sequence); its code point into *ret_cp (if not NULL). */
size_t bv_utf8_sequence(const unsigned char *s, uint32_t *ret_cp);

/* JSON text as valid UTF-8 (RFC 8259 8.1): json-c copies the bytes of strings as they are, so a
 * name or a path that is not UTF-8 would make the text invalid. Each byte that does not begin a
 * valid UTF-8 sequence (stray continuation, overlong form, surrogate, beyond U+10FFFF, cut
 * short) becomes the escape \ufffd; such bytes never occur outside strings. *ret is malloc'd. */
int bv_json_text_utf8(const char *text, char **ret);
