/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a repository's open refuses or finds damaged, named for the caller (docs/FORMAT.md,
 * "Paths" and "Damage"), and the writer's check that every pack the index names exists.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fileio.h"
#include "macro.h"
#include "repo-internal.h"

int bv_repo_problem_note(BvRepoProblem *p, BvBackend *b, const char *path, bool want_dir, int error)
{
        mode_t mode = 0;
        int k;

        if (!p)
                return error;
        *p = (BvRepoProblem){ .error = error, .want_dir = want_dir };
        snprintf(p->path, sizeof(p->path), "%.63s", path);
        if (error != -ELOOP && error != -EBADFD && error != -ENOTDIR && error != -EISDIR)
                return error;
        k = bv_backend_culprit(b, path, want_dir, &mode);
        if (k > 0 && (size_t)k < sizeof(p->path)) {
                if ((size_t)k < strlen(path))
                        p->want_dir = true; /* a component on the way */
                p->path[k] = '\0';
                p->mode = mode;
        }
        return error;
}

int repo_index_damage(BvBackend *b, BvIndex *index, BvRepoProblem **list, size_t *n)
{
        _cleanup_free_ BvIndexDamage *d = NULL;
        size_t nd = 0;
        BvRepoProblem *p;
        int r;

        r = bv_index_damaged(index, &d, &nd);
        if (r < 0 || nd == 0)
                return r;
        p = reallocarray(*list, *n + nd, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *list = p;
        for (size_t i = 0; i < nd; i++) {
                char path[64];

                snprintf(path, sizeof(path), "index/%.32s", d[i].name);
                (void)bv_repo_problem_note(&p[(*n)++], b, path, false, d[i].error);
        }
        return 0;
}

typedef struct PackIds {
        uint8_t (*ids)[BV_PACK_ID_SIZE];
        size_t n, cap;
} PackIds;

static int ids_push(PackIds *l, const uint8_t id[BV_PACK_ID_SIZE])
{
        int r = BV_ARRAY_RESERVE(l->ids, l->cap, l->n + 1, 64);
        if (r < 0)
                return r;
        memcpy(l->ids[l->n++], id, BV_PACK_ID_SIZE);
        return 0;
}

static int id_cmp(const void *a, const void *b)
{
        return memcmp(a, b, BV_PACK_ID_SIZE);
}

static int on_present(const uint8_t pack_id[BV_PACK_ID_SIZE], uint64_t size, void *userdata)
{
        return ids_push(userdata, pack_id);
}

typedef struct Compare {
        PackIds present, missing;
} Compare;

static int on_named(const uint8_t pack_id[BV_PACK_ID_SIZE], void *userdata)
{
        Compare *c = userdata;

        if (c->present.n > 0 && bsearch(pack_id, c->present.ids, c->present.n, BV_PACK_ID_SIZE, id_cmp))
                return 0;
        return ids_push(&c->missing, pack_id);
}

/* Sorts and drops duplicates (a pack named by several segments). */
static void ids_unique(PackIds *l)
{
        size_t k = 0;

        if (l->n == 0)
                return;
        qsort(l->ids, l->n, BV_PACK_ID_SIZE, id_cmp);
        for (size_t i = 1; i < l->n; i++)
                if (memcmp(l->ids[i], l->ids[k], BV_PACK_ID_SIZE) != 0)
                        memcpy(l->ids[++k], l->ids[i], BV_PACK_ID_SIZE);
        l->n = k + 1;
}

int repo_check_packs(BvBackend *b, BvIndex *index, BvPackSet *packs, BvRepoProblem *p,
                     uint8_t (**ret_missing)[BV_PACK_ID_SIZE], size_t *ret_count)
{
        Compare c = {};
        char refused[64] = "", path[80];
        int r;

        /* A listing, not a read of each pack: a few hundred directories at most. */
        r = bv_packset_list_strict(packs, on_present, &c.present, refused);
        if (r < 0 && refused[0]) {
                snprintf(path, sizeof(path), "packs/%s", refused);
                r = bv_repo_problem_note(p, b, path, !strchr(refused, '/'), r);
        }
        if (r >= 0 && c.present.n > 0)
                qsort(c.present.ids, c.present.n, BV_PACK_ID_SIZE, id_cmp);
        if (r >= 0)
                r = bv_index_packs(index, on_named, &c);
        if (r >= 0) {
                ids_unique(&c.missing);
                r = bv_index_set_missing_packs(index, (const uint8_t(*)[BV_PACK_ID_SIZE])c.missing.ids, c.missing.n);
        }
        free(c.present.ids);
        if (r < 0) {
                free(c.missing.ids);
                return r;
        }
        *ret_missing = c.missing.ids;
        *ret_count = c.missing.n;
        return 0;
}
