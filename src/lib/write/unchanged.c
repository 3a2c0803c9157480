/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "maptree.h"
#include "unchanged.h"

static bool identity_equal(const BvSourceIdentity *a, const BvSourceIdentity *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
               a->ctime_ns == b->ctime_ns;
}

/* The newest snapshot of name and of the file at path read as kind (a regular file, or a disk
 * image's virtual disk: never one for the other), or NULL. */
static BvSnapshot *newest_of(BvSnapshot **list, size_t n, const char *name, BvSourceKind kind, const char *path)
{
        for (size_t i = n; i > 0; i--) {
                BvSnapshot *s = list[i - 1];
                if (s->name && strcmp(s->name, name) == 0 && s->source.kind == kind && s->source.path &&
                    strcmp(s->source.path, path) == 0)
                        return s;
        }
        return NULL;
}

typedef struct Whole {
        BvRepo *repo;
        BvObjectCodec *codec;
        BvIndex *index;
} Whole;

static int whole_fetch(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len)
{
        Whole *w = userdata;
        return bv_repo_read_object_alloc(w->repo, w->codec, BV_OBJ_MAP, id, ret_node, ret_len);
}

static int whole_check(Whole *w, const uint8_t id[BV_ID_SIZE])
{
        BvLocation loc;
        int r = bv_index_lookup(w->index, id, &loc);
        return r == -ENOENT ? -EUCLEAN : r;
}

static int whole_node(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level)
{
        return whole_check(userdata, id);
}

static int whole_extent(void *userdata, const BvMapExtent *e)
{
        return e->kind == BV_EXTENT_DATA ? whole_check(userdata, e->id) : 0;
}

/* Whether the index still locates every map node and data chunk of p: repair --force leaves
 * out what it found damaged, and a snapshot taking p's map unread would be damaged from birth.
 * 1 whole, 0 not (or its map does not read), -ENOMEM. */
static int map_whole(BvRepo *r, BvObjectCodec *codec, BvIndex *index, const BvSnapshot *p)
{
        Whole w = { .repo = r, .codec = codec, .index = index };
        int rr = bv_map_walk(p->root, p->height, p->size, whole_fetch, &w, whole_node, whole_extent, &w);
        if (rr == -ENOMEM)
                return rr;
        return rr >= 0;
}

int bv_unchanged_parent(BvRepo *r, BvObjectCodec *codec, BvIndex *index, BvSource *src, const char *name,
                        const BvBackupOptions *opts, const BvSnapshotUsedOnly *used, BvSnapshot **ret_parent,
                        char *ret_lost_from, char *ret_other_from, bool *ret_other_used_only)
{
        BvSourceIdentity id;
        BvSnapshot **list = NULL;
        size_t n = 0;
        int rr;

        *ret_parent = NULL;
        if (opts->force_read || opts->full_read_every == 1 || bv_source_identity(src, &id) < 0)
                return 0;
        rr = bv_snapshot_list(bv_repo_backend(r), codec, &list, &n);
        if (rr < 0)
                return rr;
        BvSnapshot *p = newest_of(list, n, name, bv_source_kind(src), bv_source_path(src));
        /* Ranges that did not read (--skip-unreadable) are zeroes in p's map: read them again. */
        bool ok = p && p->source.has_identity && p->n_unreadable == 0 && p->size == bv_source_size(src) &&
                  identity_equal(&p->source.identity, &id) &&
                  (opts->full_read_every == 0 || p->source.unread_backups + 1 < opts->full_read_every);
        if (ok && !bv_snapshot_used_only_equal(&p->used_only, used)) {
                snprintf(ret_other_from, 2 * BV_SNAPSHOT_ID_SIZE + 1, "%s", p->id);
                *ret_other_used_only = p->used_only.on;
                ok = false;
        }
        rr = ok ? map_whole(r, codec, index, p) : 0;
        if (ok && rr == 0)
                snprintf(ret_lost_from, 2 * BV_SNAPSHOT_ID_SIZE + 1, "%s", p->id);
        ok = rr > 0;
        if (ok) {
                for (size_t i = 0; i < n; i++)
                        if (list[i] == p)
                                list[i] = NULL;
                *ret_parent = p;
        }
        bv_snapshot_list_free(list, n);
        return rr < 0 ? rr : ok ? 1 : 0;
}
