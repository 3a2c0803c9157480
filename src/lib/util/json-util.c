/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"

int bv_json_add(struct json_object *o, const char *key, struct json_object *v)
{
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int bv_json_parse_object(const char *json, size_t len, int max_depth, struct json_object **ret)
{
        struct json_tokener *tok;
        struct json_object *o;
        bool ok;

        if (!json || len == 0 || len > INT_MAX || memchr(json, '\0', len))
                return -EBADMSG;
        tok = json_tokener_new_ex(max_depth);
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, json, (int)len);
        ok = o && json_tokener_get_error(tok) == json_tokener_success && json_object_is_type(o, json_type_object);
        for (size_t i = ok ? json_tokener_get_parse_end(tok) : len; i < len && ok; i++)
                ok = strchr(" \t\r\n", json[i]) != NULL;
        json_tokener_free(tok);
        if (!ok) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

struct json_object *bv_json_member(struct json_object *o, const char *key, json_type type)
{
        struct json_object *v = NULL;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
                return NULL;
        return v;
}

struct json_object *bv_json_object_new(const BvJsonField *f, size_t n)
{
        struct json_object *o = json_object_new_object();
        int r = o ? 0 : -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                if (!f[i].key)
                        continue;
                if (r == 0)
                        r = bv_json_add(o, f[i].key, f[i].value);
                else
                        json_object_put(f[i].value);
        }
        if (r < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

int bv_json_get_u64(struct json_object *o, const char *key, uint64_t *ret)
{
        struct json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = json_object_get_uint64(v);
        return 0;
}

int bv_json_get_double(struct json_object *o, const char *key, double *ret)
{
        struct json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        *ret = json_object_get_double(v);
        return 0;
}

int bv_json_get_string(struct json_object *o, const char *key, char **ret)
{
        struct json_object *v;
        char *copy;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return -EBADMSG;
        copy = strdup(json_object_get_string(v));
        if (!copy)
                return -ENOMEM;
        free(*ret);
        *ret = copy;
        return 0;
}

size_t bv_utf8_sequence(const unsigned char *s, uint32_t *ret_cp)
{
        unsigned char lo = 0x80, hi = 0xBF;
        uint32_t cp;
        size_t n;

        if (s[0] < 0x80) {
                if (ret_cp)
                        *ret_cp = s[0];
                return 1;
        }
        if (s[0] >= 0xC2 && s[0] <= 0xDF)
                n = 2;
        else if (s[0] >= 0xE0 && s[0] <= 0xEF)
                n = 3;
        else if (s[0] >= 0xF0 && s[0] <= 0xF4)
                n = 4;
        else
                return 0;
        if (s[0] == 0xE0)
                lo = 0xA0; /* overlong */
        else if (s[0] == 0xED)
                hi = 0x9F; /* surrogates */
        else if (s[0] == 0xF0)
                lo = 0x90; /* overlong */
        else if (s[0] == 0xF4)
                hi = 0x8F; /* beyond U+10FFFF */
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++) /* stops at the NUL: it is no continuation byte */
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
        cp = s[0] & (0x7F >> n);
        for (size_t i = 1; i < n; i++)
                cp = cp << 6 | (s[i] & 0x3F);
        if (ret_cp)
                *ret_cp = cp;
        return n;
}

int bv_json_text_utf8(const char *text, char **ret)
{
        static const char replacement[] = "\\ufffd";
        const unsigned char *s = (const unsigned char *)text;
        size_t len, n;
        char *out, *p;

        if (!text || !ret)
                return -EINVAL;
        len = strlen(text);
        if (len > (SIZE_MAX - 1) / (sizeof(replacement) - 1))
                return -ENOMEM;
        out = p = malloc(len * (sizeof(replacement) - 1) + 1);
        if (!out)
                return -ENOMEM;
        while (*s) {
                n = bv_utf8_sequence(s, NULL);
                if (n == 0) {
                        memcpy(p, replacement, sizeof(replacement) - 1);
                        p += sizeof(replacement) - 1;
                        s++;
                        continue;
                }
                memcpy(p, s, n);
                p += n;
                s += n;
        }
        *p = 0;
        *ret = out;
        return 0;
}
