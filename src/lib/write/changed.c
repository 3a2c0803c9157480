/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockscan.h"
#include "changed.h"
#include "macro.h"

#define CHECK_READ (1024u * 1024) /* bytes read at once when a zero run is checked */

/* The newest snapshot of name, or NULL. */
static BvSnapshot *newest_named(BvSnapshot **list, size_t n, const char *name)
{
        for (size_t i = n; i > 0; i--)
                if (list[i - 1]->name && strcmp(list[i - 1]->name, name) == 0)
                        return list[i - 1];
        return NULL;
}

/* Whether p was taken of src: the same path, or the same disk of the same libvirt domain (by its
 * UUID: a domain renamed with virsh domrename is the same one, and its checkpoints go with it). */
static bool same_source(const BvSnapshot *p, BvSource *src)
{
        const BvSourceLibvirt *l = bv_source_libvirt(src);
        const BvSnapshotLibvirt *pl = &p->source.libvirt;

        if (p->source.kind != bv_source_kind(src) || !p->source.path)
                return false;
        if (strcmp(p->source.path, bv_source_path(src)) == 0)
                return true;
        return l && l->uuid && l->disk && pl->uuid && pl->disk && strcmp(pl->uuid, l->uuid) == 0 &&
               strcmp(pl->disk, l->disk) == 0;
}

/* Why p cannot be paired with src's map (a phrase in reason), or NULL when it can. */
static const char *pairing_problem(const BvSnapshot *p, BvIndex *index, BvSource *src, const char *name,
                                   char *reason, size_t size)
{
        const char *map = bv_source_parent_map(src);
        bool bitmap = strncmp(map, "qemu:dirty-bitmap:", strlen("qemu:dirty-bitmap:")) == 0;
        BvSourceIdentity base;
        bool has_base = bv_source_base_identity(src, &base) >= 0;
        BvLocation loc;

        if (!p)
                snprintf(reason, size, "no earlier snapshot is named '%s'", name);
        else if (!same_source(p, src))
                snprintf(reason, size, "the last snapshot named '%s' (%.8s) is of another source", name, p->id);
        else if (has_base && (!p->source.has_identity || p->source.identity.size != base.size ||
                              p->source.identity.mtime_ns != base.mtime_ns))
                snprintf(reason, size, "'%s' is not the version snapshot %.8s read (its size or mtime differs: keep "
                         "it with cp --reflink=always --preserve=timestamps, or in a btrfs snapshot)",
                         map + strlen("fiemap:"), p->id);
        else if (!has_base && (!p->source.changed_map || strcmp(p->source.changed_map, map) != 0))
                snprintf(reason, size, "snapshot %.8s was not taken with %s%s", p->id, map,
                         bitmap ? " (a new bitmap)" : "");
        else if (p->used_only.on)
                snprintf(reason, size, "snapshot %.8s was taken --used-only (its free blocks were not read)", p->id);
        else if (p->size != bv_source_size(src))
                snprintf(reason, size, "the size changed from %llu to %llu bytes since snapshot %.8s",
                         (unsigned long long)p->size, (unsigned long long)bv_source_size(src), p->id);
        else if (bv_index_lookup(index, p->root, &loc) < 0)
                snprintf(reason, size, "the map of snapshot %.8s is no longer stored", p->id);
        else
                return NULL;
        return reason;
}

int bv_changed_parent(BvRepo *r, BvObjectCodec *codec, BvIndex *index, BvSource *src, const char *name,
                      const BvBackupOptions *opts, BvSnapshot **ret_parent, char *reason, size_t reason_size)
{
        BvSnapshot **list = NULL;
        size_t n = 0;
        int rr;

        *ret_parent = NULL;
        rr = bv_snapshot_list(bv_repo_backend(r), codec, &list, &n);
        if (rr < 0)
                return rr;
        BvSnapshot *p = newest_named(list, n, name);
        bool paired = false;
        if (!pairing_problem(p, index, src, name, reason, reason_size)) {
                if (opts->force_read)
                        snprintf(reason, reason_size, "--force-read");
                else if (opts->full_read_every > 0 && p->source.changed_backups + 1 >= opts->full_read_every)
                        snprintf(reason, reason_size, "a whole read every %u backups (--full-read-every)",
                                 opts->full_read_every);
                else
                        paired = true;
                for (size_t i = 0; i < n; i++)
                        if (list[i] == p)
                                list[i] = NULL;
                *ret_parent = p;
        }
        bv_snapshot_list_free(list, n);
        if (paired)
                reason[0] = 0;
        return paired ? 1 : 0;
}

/* Whether the source holds, in [offset, offset+len), what a parent's extent e says (read again). */
static int source_matches(BvRepo *r, BvSource *src, const BvMapExtent *e, uint8_t *buf)
{
        uint8_t id[BV_ID_SIZE];
        int rr;

        if (e->kind == BV_EXTENT_DATA) {
                if (e->length > BV_CHUNK_MAX_LIMIT)
                        return -EBADMSG;
                rr = bv_source_read_at(src, buf, (size_t)e->length, e->offset);
                if (rr < 0)
                        return rr;
                bv_keyring_id(bv_repo_keyring(r), BV_ID_CHUNK, buf, (size_t)e->length, id);
                return memcmp(id, e->id, BV_ID_SIZE) == 0;
        }
        for (uint64_t pos = e->offset; pos < e->offset + e->length;) {
                size_t len = (size_t)MIN((uint64_t)CHECK_READ, e->offset + e->length - pos);
                rr = bv_source_read_at(src, buf, len, pos);
                if (rr < 0)
                        return rr;
                if (!bv_is_zero(buf, len))
                        return 0;
                pos += len;
        }
        return 1;
}

/* Whether the new map holds the parent's extent pe as it is (no read needed). */
static int maps_agree(BvParentMap *now, const BvMapExtent *pe)
{
        BvMapExtent ne;
        int rr = bv_parent_map_lookup(now, pe->offset, &ne);

        if (rr < 0)
                return rr;
        if (pe->kind == BV_EXTENT_DATA)
                return ne.kind == BV_EXTENT_DATA && ne.offset == pe->offset && ne.length == pe->length &&
                       memcmp(ne.id, pe->id, BV_ID_SIZE) == 0;
        return ne.kind != BV_EXTENT_DATA && ne.offset + ne.length >= pe->offset + pe->length;
}

/* The parent's extents wholly inside [offset, offset+len), each compared. */
static int check_range(BvRepo *r, BvSource *src, BvParentMap *before, BvParentMap *now, uint64_t offset,
                       uint64_t len, uint8_t *buf, uint64_t *checked, uint64_t *wrong)
{
        for (uint64_t pos = offset; pos < offset + len;) {
                BvMapExtent pe;
                int rr = bv_parent_map_lookup(before, pos, &pe);
                if (rr < 0)
                        return rr;
                if (pe.offset + pe.length > offset + len)
                        break;
                pos = pe.offset + pe.length;
                if (pe.offset < offset)
                        continue;
                rr = maps_agree(now, &pe);
                if (rr == 0)
                        rr = source_matches(r, src, &pe, buf);
                if (rr < 0)
                        return rr;
                *checked += pe.length;
                if (rr == 0)
                        *wrong += pe.length;
        }
        return 0;
}

int bv_changed_check(BvRepo *r, BvSource *src, const BvSnapshot *parent, const uint8_t root[BV_ID_SIZE],
                     uint32_t height, uint64_t size, uint64_t *ret_checked, uint64_t *ret_wrong)
{
        BvSnapshot now_snap = { .size = size, .height = height };
        BvParentMap *before = NULL, *now = NULL;
        _cleanup_free_ uint8_t *buf = malloc(MAX((size_t)CHECK_READ, (size_t)BV_CHUNK_MAX_LIMIT));
        uint64_t checked = 0, wrong = 0;
        const BvByteRange *ranges;
        size_t n;
        int rr;

        if (!buf)
                return -ENOMEM;
        if (parent->size != size)
                return -EINVAL;
        memcpy(now_snap.root, root, BV_ID_SIZE);
        bv_source_unchanged_ranges(src, &ranges, &n);
        rr = bv_parent_map_open(r, parent, &before);
        if (rr >= 0)
                rr = bv_parent_map_open(r, &now_snap, &now);
        for (size_t i = 0; rr >= 0 && i < n; i++)
                rr = check_range(r, src, before, now, ranges[i].offset, ranges[i].length, buf, &checked, &wrong);
        bv_parent_map_free(before);
        bv_parent_map_free(now);
        if (rr < 0)
                return rr;
        *ret_checked = checked;
        *ret_wrong = wrong;
        return 0;
}
