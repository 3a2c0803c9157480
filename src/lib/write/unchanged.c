/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "unchanged.h"

static bool identity_equal(const BvSourceIdentity *a, const BvSourceIdentity *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
               a->ctime_ns == b->ctime_ns;
}

/* The newest snapshot of name and of the regular file at path, or NULL. */
static BvSnapshot *newest_of(BvSnapshot **list, size_t n, const char *name, const char *path)
{
        for (size_t i = n; i > 0; i--) {
                BvSnapshot *s = list[i - 1];
                if (s->name && strcmp(s->name, name) == 0 && s->source.kind == BV_SOURCE_FILE && s->source.path &&
                    strcmp(s->source.path, path) == 0)
                        return s;
        }
        return NULL;
}

int bv_unchanged_parent(BvRepo *r, BvObjectCodec *codec, BvIndex *index, BvSource *src, const char *name,
                        const BvBackupOptions *opts, BvSnapshot **ret_parent)
{
        BvSourceIdentity id;
        BvSnapshot **list = NULL;
        BvLocation loc;
        size_t n = 0;
        int rr;

        *ret_parent = NULL;
        if (opts->force_read || opts->full_read_every == 1 || bv_source_identity(src, &id) < 0)
                return 0;
        rr = bv_snapshot_list(bv_repo_dirfd(r, "snapshots"), codec, &list, &n);
        if (rr < 0)
                return rr;
        BvSnapshot *p = newest_of(list, n, name, bv_source_path(src));
        bool ok = p && p->source.has_identity && p->size == id.size &&
                  identity_equal(&p->source.identity, &id) &&
                  (opts->full_read_every == 0 || p->source.unread_backups + 1 < opts->full_read_every) &&
                  bv_index_lookup(index, p->root, &loc) >= 0;
        if (ok) {
                for (size_t i = 0; i < n; i++)
                        if (list[i] == p)
                                list[i] = NULL;
                *ret_parent = p;
        }
        bv_snapshot_list_free(list, n);
        return ok ? 1 : 0;
}
