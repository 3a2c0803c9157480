/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An S3 location at a point in time (backend-s3-pit.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-s3-pit.h"
#include "buf.h"
#include "macro.h"

#define ULID_LEN 26
#define ULID_MIN_MS 978307200000ll /* 2001-01-01: an id that decodes before is not a time */

int64_t s3_ulid_ms(const char *s)
{
        static const char alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
        int64_t ms = 0;

        if (!s || strlen(s) != ULID_LEN)
                return -1;
        for (size_t i = 0; i < ULID_LEN; i++) {
                const char *p = s[i] ? strchr(alphabet, s[i]) : NULL;
                if (!p)
                        return -1;
                if (i < 10)
                        ms = (ms << 5) | (p - alphabet); /* 10 characters: the 48-bit time (50 bits) */
        }
        if (ms < ULID_MIN_MS || ms > ((int64_t)time(NULL) + 86400) * 1000)
                return -1;
        return ms;
}

/* Every entry of the listing, kept until all are seen: a store may list a page's delete markers
 * apart from its versions (versitygw does), so a key's entries need not come together. */
typedef struct PitVer {
        char *key;
        char *version_id;
        uint64_t size;
        int64_t mtime;
        int64_t when_ms; /* created: the ULID's time, else Last-Modified */
        size_t seq;      /* listing order: newest first among a key's versions, and among its markers */
        bool latest, marker;
} PitVer;

typedef struct PitList {
        PitVer *v;
        size_t n, cap;
} PitList;

static int collect(const bv_s3_object *o, void *userdata)
{
        PitList *l = userdata;
        if (BV_ARRAY_RESERVE(l->v, l->cap, l->n + 1, 256) < 0)
                return -ENOMEM;
        int64_t ms = s3_ulid_ms(o->version_id);
        PitVer *e = &l->v[l->n];
        *e = (PitVer){ .key = strdup(o->key), .version_id = strdup(o->version_id ?: "null"), .size = o->size,
                       .mtime = o->mtime, .when_ms = ms >= 0 ? ms : o->mtime * 1000, .seq = l->n,
                       .latest = o->is_latest, .marker = o->delete_marker };
        l->n++;
        return e->key && e->version_id ? 0 : -ENOMEM;
}

/* By key, then newest first: the later time, the current one (IsLatest) of equals, then the
 * listing's order. */
static int ver_cmp(const void *a, const void *b)
{
        const PitVer *x = a, *y = b;
        int c = strcmp(x->key, y->key);
        if (c != 0)
                return c;
        if (x->when_ms != y->when_ms)
                return x->when_ms > y->when_ms ? -1 : 1;
        if (x->latest != y->latest)
                return x->latest ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int entry_cmp(const void *key, const void *entry)
{
        return strcmp(key, ((const S3PitEntry *)entry)->key);
}

const S3PitEntry *s3_pit_find(const S3PitEntry *v, size_t n, const char *key)
{
        return n > 0 ? bsearch(key, v, n, sizeof(*v), entry_cmp) : NULL;
}

void s3_pit_free(S3PitEntry *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].key);
                free(v[i].version_id);
        }
        free(v);
}

/* Each key's newest entry not newer than the time, when it is an object, into out (the strings
 * move there). */
static int pick(PitList *l, int64_t at, S3PitEntry **ret, size_t *ret_n)
{
        int64_t limit_ms = at * 1000 + 999;
        S3PitEntry *out = calloc(l->n + 1, sizeof(*out));
        size_t n = 0;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0, j; i < l->n; i = j) {
                for (j = i + 1; j < l->n && strcmp(l->v[j].key, l->v[i].key) == 0; j++)
                        ;
                size_t k = i; /* the key's entries are [i, j), newest first */
                while (k < j && l->v[k].when_ms > limit_ms)
                        k++;
                if (k == j || l->v[k].marker)
                        continue; /* not there yet, or deleted then */
                PitVer *e = &l->v[k];
                out[n++] = (S3PitEntry){ .key = TAKE_PTR(e->key), .version_id = TAKE_PTR(e->version_id),
                                         .size = e->size, .mtime = e->mtime };
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

int s3_pit_load(bv_s3 *s3, int64_t at, S3PitEntry **ret, size_t *ret_n)
{
        PitList l = {};
        int r = bv_s3_list_versions(s3, "", collect, &l);
        if (r >= 0) {
                if (l.n > 1)
                        qsort(l.v, l.n, sizeof(*l.v), ver_cmp);
                r = pick(&l, at, ret, ret_n);
        }
        for (size_t i = 0; i < l.n; i++) {
                free(l.v[i].key);
                free(l.v[i].version_id);
        }
        free(l.v);
        return r;
}
