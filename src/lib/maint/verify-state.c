/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verify-state: a text file, one line per pack, sorted by pack id:
 *
 *     blkvault-verify-state 1
 *     <32 hex pack id> <ns since the epoch, decimal> ok|bad
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "fileio.h"
#include "hex.h"
#include "macro.h"
#include "verify-state.h"

#define STATE_MAGIC "blkvault-verify-state 1\n"
#define STATE_MAX (256u << 20)
#define LINE_MAX_LEN 80u

static int id_cmp(const void *a, const void *b)
{
        return memcmp(((const BvVerifyPackState *)a)->id, ((const BvVerifyPackState *)b)->id, BV_PACK_ID_SIZE);
}

static int due_cmp(const void *a, const void *b)
{
        const BvVerifyPackState *x = a, *y = b;

        if (x->bad != y->bad)
                return x->bad ? -1 : 1;
        if (x->verified_ns != y->verified_ns)
                return x->verified_ns < y->verified_ns ? -1 : 1;
        return id_cmp(a, b);
}

void bv_verify_state_sort_id(BvVerifyPackState *s, size_t n)
{
        if (n > 0)
                qsort(s, n, sizeof(*s), id_cmp);
}

void bv_verify_state_sort_due(BvVerifyPackState *s, size_t n)
{
        if (n > 0)
                qsort(s, n, sizeof(*s), due_cmp);
}

BvVerifyPackState *bv_verify_state_find(BvVerifyPackState *s, size_t n, const uint8_t id[BV_PACK_ID_SIZE])
{
        BvVerifyPackState key;

        if (n == 0)
                return NULL;
        memcpy(key.id, id, BV_PACK_ID_SIZE);
        return bsearch(&key, s, n, sizeof(*s), id_cmp);
}

/* One line "<hex> <ns> ok|bad" (without its newline). */
static int parse_line(const char *line, size_t len, BvVerifyPackState *ret)
{
        char buf[LINE_MAX_LEN + 1], hex[2 * BV_PACK_ID_SIZE + 1], word[4];
        uint64_t ns;
        int used = 0;

        if (len > LINE_MAX_LEN)
                return -EBADMSG;
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (sscanf(buf, "%32[0-9a-f] %" SCNu64 " %3s%n", hex, &ns, word, &used) != 3 || (size_t)used != len ||
            strlen(hex) != 2 * BV_PACK_ID_SIZE || bv_hex_decode(hex, ret->id, BV_PACK_ID_SIZE) < 0)
                return -EBADMSG;
        if (strcmp(word, "ok") != 0 && strcmp(word, "bad") != 0)
                return -EBADMSG;
        ret->verified_ns = ns;
        ret->bad = word[0] == 'b';
        ret->size = 0;
        return 0;
}

int bv_verify_state_load(BvBackend *b, BvVerifyPackState **ret, size_t *ret_n)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ BvVerifyPackState *s = NULL;
        size_t len, n = 0, cap = 0;
        int r;

        r = bv_backend_get(b, BV_KIND_VERIFY_STATE, NULL, STATE_MAX, (void **)&text, &len);
        if (r == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return r;
        if (len < strlen(STATE_MAGIC) || memcmp(text, STATE_MAGIC, strlen(STATE_MAGIC)) != 0 ||
            text[len - 1] != '\n')
                return -EBADMSG;
        for (const char *p = text + strlen(STATE_MAGIC), *end = text + len; p < end;) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                if (BV_ARRAY_RESERVE(s, cap, n + 1, 256) < 0)
                        return -ENOMEM;
                r = parse_line(p, (size_t)(nl - p), &s[n]);
                if (r < 0)
                        return r;
                n++;
                p = nl + 1;
        }
        bv_verify_state_sort_id(s, n);
        for (size_t i = 1; i < n; i++)
                if (id_cmp(&s[i - 1], &s[i]) == 0)
                        return -EBADMSG;
        *ret = TAKE_PTR(s);
        *ret_n = n;
        return 0;
}

int bv_verify_state_save(BvBackend *b, const BvVerifyPackState *s, size_t n)
{
        _cleanup_free_ BvVerifyPackState *sorted = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0, cap = strlen(STATE_MAGIC) + n * (LINE_MAX_LEN + 1) + 1;

        sorted = malloc(MAX(n, (size_t)1) * sizeof(*s));
        text = malloc(cap);
        if (!sorted || !text)
                return -ENOMEM;
        if (n > 0)
                memcpy(sorted, s, n * sizeof(*s));
        bv_verify_state_sort_id(sorted, n);
        len = (size_t)snprintf(text, cap, "%s", STATE_MAGIC);
        for (size_t i = 0; i < n; i++) {
                char hex[2 * BV_PACK_ID_SIZE + 1];

                bv_hex_encode(sorted[i].id, BV_PACK_ID_SIZE, hex);
                len += (size_t)snprintf(text + len, cap - len, "%s %" PRIu64 " %s\n", hex, sorted[i].verified_ns,
                                        sorted[i].bad ? "bad" : "ok");
        }
        return bv_backend_put(b, BV_KIND_VERIFY_STATE, NULL, text, len, BV_PUT_REPLACE);
}
