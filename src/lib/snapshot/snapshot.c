/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Snapshot records (docs/FORMAT.md, "Snapshots"): snapshots/<32 hex id>.snap is
 *
 *   "BLKVSNAP" | u32 format version (1) | u32 reserved (0) | SNAPSHOT object
 *
 * where the object's id is the 16 snapshot id bytes followed by 16 zero bytes (so a record
 * renamed to another id fails authentication) and its payload is the JSON document.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "buf.h"
#include "endian.h"
#include "fileio.h"
#include "hex.h"
#include "macro.h"
#include "maptree.h"
#include "snapshot-json.h"
#include "timeutil.h"

#define SNAP_MAGIC "BLKVSNAP"
#define SNAP_MAGIC_SIZE 8
#define SNAP_HEADER_SIZE 16
#define SNAP_VERSION 1
#define SNAP_SUFFIX ".snap"
#define SNAP_HEX_SIZE (2 * BV_SNAPSHOT_ID_SIZE)

#define streq(a, b) (strcmp((a), (b)) == 0)

DEFINE_TRIVIAL_CLEANUP_FUNC(BvSnapshot, bv_snapshot_free);

void bv_snapshot_source_done(BvSnapshotSource *s)
{
        free(s->path);
        free(s->host);
        free(s->abs_path);
        free(s->stable_name);
        free(s->changed_map);
        free(s->image_format);
        free(s->libvirt.domain);
        free(s->libvirt.uuid);
        free(s->libvirt.disk);
        free(s->libvirt.checkpoint);
        bv_probe_done(&s->probe);
        *s = (BvSnapshotSource){};
}

void bv_snapshot_free(BvSnapshot *s)
{
        if (!s)
                return;
        free(s->name);
        free(s->unreadable);
        bv_snapshot_used_only_done(&s->used_only);
        bv_snapshot_source_done(&s->source);
        free(s);
}

/* The SNAPSHOT object id of a snapshot id (hex): 16 id bytes, 16 zero bytes. */
static int object_id(const char *id, uint8_t ret[BV_ID_SIZE])
{
        uint8_t oid[BV_ID_SIZE] = {0};

        if (!bv_hex_is_lower(id, SNAP_HEX_SIZE) || bv_hex_decode(id, oid, BV_SNAPSHOT_ID_SIZE) < 0)
                return -EINVAL;
        memcpy(ret, oid, BV_ID_SIZE);
        return 0;
}

/* ---- files ---- */

static void snapshot_file_name(const char *id, char out[BV_SNAPSHOT_FILE_MAX])
{
        memcpy(out, id, SNAP_HEX_SIZE);
        memcpy(out + SNAP_HEX_SIZE, SNAP_SUFFIX, sizeof(SNAP_SUFFIX));
}

int bv_snapshot_save(BvBackend *b, BvObjectCodec *codec, const BvSnapshot *s)
{
        _cleanup_free_ char *json = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        uint8_t oid[BV_ID_SIZE];
        char name[BV_SNAPSHOT_FILE_MAX];
        size_t len, olen = 0;
        int r;

        if (!codec || !s || object_id(s->id, oid) < 0)
                return -EINVAL;
        r = bv_snapshot_to_json(s, &json);
        if (r < 0)
                return r;
        len = strlen(json);
        if (len > BV_OBJECT_MAX_RAW)
                return -EFBIG;
        buf = malloc(SNAP_HEADER_SIZE + bv_object_bound(len));
        if (!buf)
                return -ENOMEM;
        memcpy(buf, SNAP_MAGIC, SNAP_MAGIC_SIZE);
        put_le32(buf + 8, SNAP_VERSION);
        put_le32(buf + 12, 0);
        r = bv_object_encode(codec, BV_OBJ_SNAPSHOT, oid, json, len, buf + SNAP_HEADER_SIZE, &olen);
        if (r < 0)
                return r;
        snapshot_file_name(s->id, name);
        return bv_backend_put(b, BV_KIND_SNAPSHOT, name, buf, SNAP_HEADER_SIZE + olen, BV_PUT_CREATE);
}

/* Decodes the bytes of snapshots/<id>.snap. */
static int snapshot_decode(BvObjectCodec *codec, const char *id, const uint8_t *data, size_t len,
                           BvSnapshot **ret)
{
        _cleanup_(bv_snapshot_freep) BvSnapshot *s = NULL;
        _cleanup_free_ char *json = NULL;
        uint8_t oid[BV_ID_SIZE];
        size_t jlen = 0;
        int r;

        r = object_id(id, oid);
        if (r < 0)
                return r;
        if (len < SNAP_HEADER_SIZE || memcmp(data, SNAP_MAGIC, SNAP_MAGIC_SIZE) != 0)
                return -EBADMSG;
        if (get_le32(data + 8) != SNAP_VERSION)
                return -EPROTONOSUPPORT;
        if (get_le32(data + 12) != 0)
                return -EBADMSG;
        data += SNAP_HEADER_SIZE;
        len -= SNAP_HEADER_SIZE;

        r = bv_object_decode_alloc(codec, BV_OBJ_SNAPSHOT, oid, data, len, (void **)&json, &jlen);
        if (r < 0)
                return r;
        r = bv_snapshot_from_json(json, jlen, &s);
        if (r < 0)
                return r;
        if (strcmp(s->id, id) != 0)
                return -EBADMSG; /* a record that names another snapshot */
        *ret = TAKE_PTR(s);
        return 0;
}

int bv_snapshot_load(BvBackend *b, BvObjectCodec *codec, const char *id, BvSnapshot **ret)
{
        _cleanup_free_ void *data = NULL;
        char name[BV_SNAPSHOT_FILE_MAX];
        size_t len = 0;
        int r;

        if (!codec || !ret || !bv_hex_is_lower(id, SNAP_HEX_SIZE))
                return -EINVAL;
        snapshot_file_name(id, name);
        r = bv_backend_get(b, BV_KIND_SNAPSHOT, name, SNAP_HEADER_SIZE + bv_object_bound(BV_OBJECT_MAX_RAW), &data,
                           &len);
        if (r == -EFBIG)
                return -EBADMSG;
        if (r < 0)
                return r;
        return snapshot_decode(codec, id, data, len, ret);
}

/* ---- listing and resolving ---- */

/* A listed snapshot and the modification time of its file (ns), which orders snapshots of one
 * second whose records do not say their start in nanoseconds. */
typedef struct ListItem {
        BvSnapshot *snapshot;
        uint64_t mtime_ns;
} ListItem;

static int list_item_cmp(const void *x, const void *y)
{
        const ListItem *a = x, *b = y;

        if (a->snapshot->time != b->snapshot->time)
                return a->snapshot->time < b->snapshot->time ? -1 : 1;
        if (a->snapshot->time_ns && b->snapshot->time_ns && a->snapshot->time_ns != b->snapshot->time_ns)
                return a->snapshot->time_ns < b->snapshot->time_ns ? -1 : 1;
        if (a->mtime_ns != b->mtime_ns)
                return a->mtime_ns < b->mtime_ns ? -1 : 1;
        return strcmp(a->snapshot->id, b->snapshot->id);
}

bool bv_snapshot_file_id(const char *name, char id[SNAP_HEX_SIZE + 1])
{
        if (strlen(name) != SNAP_HEX_SIZE + strlen(SNAP_SUFFIX))
                return false;
        if (strcmp(name + SNAP_HEX_SIZE, SNAP_SUFFIX) != 0)
                return false;
        memcpy(id, name, SNAP_HEX_SIZE);
        id[SNAP_HEX_SIZE] = '\0';
        return bv_hex_is_lower(id, SNAP_HEX_SIZE);
}

static void list_items_free(ListItem *items, size_t n)
{
        for (size_t i = 0; i < n; i++)
                bv_snapshot_free(items[i].snapshot);
        free(items);
}

/* Whether a record that fails to load is that record's damage (skipped), rather than a failure
 * of the process that must fail the list. */
static bool load_error_is_damage(int r)
{
        return r != -ENOMEM && r != -EMFILE && r != -ENFILE && r != -EINTR;
}

/* The records a listing of snapshots/ met: their ids and the times their files were written;
 * and the protection markers it met (any type: one that is not a regular file still protects). */
typedef struct Found {
        struct FoundItem {
                char id[SNAP_HEX_SIZE + 1];
                uint64_t mtime_ns;
        } *items;
        size_t n, cap;
        char (*marks)[SNAP_HEX_SIZE + 1];
        size_t nmarks, markcap;
} Found;

#define PROTECT_SUFFIX ".protect"

static int mark_add(Found *f, const char *name)
{
        size_t len = strlen(name);
        if (len != SNAP_HEX_SIZE + strlen(PROTECT_SUFFIX) || strcmp(name + SNAP_HEX_SIZE, PROTECT_SUFFIX) != 0)
                return 0;
        int r = BV_ARRAY_RESERVE(f->marks, f->markcap, f->nmarks + 1, 16);
        if (r < 0)
                return r;
        memcpy(f->marks[f->nmarks], name, SNAP_HEX_SIZE);
        f->marks[f->nmarks++][SNAP_HEX_SIZE] = '\0';
        return 0;
}

static int mark_cmp(const void *a, const void *b)
{
        return strcmp(a, b);
}

/* After the listing sorted the marks. */
static bool marked(const Found *f, const char *id)
{
        return f->nmarks > 0 && bsearch(id, f->marks, f->nmarks, sizeof(*f->marks), mark_cmp);
}

static int found_add(const BvObjEntry *e, void *userdata)
{
        Found *f = userdata;
        char id[SNAP_HEX_SIZE + 1];
        int r;

        if (!bv_snapshot_file_id(e->name, id))
                return mark_add(f, e->name);
        r = BV_ARRAY_RESERVE(f->items, f->cap, f->n + 1, 16);
        if (r < 0)
                return r;
        memcpy(f->items[f->n].id, id, sizeof(id));
        f->items[f->n++].mtime_ns = (uint64_t)MAX(e->mtime_ns, (int64_t)0);
        return 0;
}

/* Loads every record listed, skipping (and reporting) those that do not load. */
static int list_read(BvBackend *b, BvObjectCodec *codec, ListItem **ret, size_t *ret_count,
                     bv_snapshot_skip_fn skip, void *userdata)
{
        _cleanup_free_ struct FoundItem *found = NULL;
        ListItem *items = NULL;
        Found f = {};
        size_t n = 0;
        int r;

        r = bv_backend_list(b, BV_KIND_SNAPSHOT, found_add, &f);
        found = f.items;
        _cleanup_free_ char(*marks)[SNAP_HEX_SIZE + 1] = f.marks;
        if (r < 0)
                return r;
        if (f.nmarks > 1)
                qsort(f.marks, f.nmarks, sizeof(*f.marks), mark_cmp);
        items = calloc(f.n ? f.n : 1, sizeof(*items));
        if (!items)
                return -ENOMEM;
        for (size_t i = 0; i < f.n; i++) {
                r = bv_snapshot_load(b, codec, found[i].id, &items[n].snapshot);
                if (r == -ENOENT || (r < 0 && load_error_is_damage(r))) {
                        char name[BV_SNAPSHOT_FILE_MAX];

                        snapshot_file_name(found[i].id, name);
                        if (skip && r != -ENOENT) /* ENOENT: deleted meanwhile */
                                skip(name, r, userdata);
                        continue;
                }
                if (r < 0) {
                        list_items_free(items, n);
                        return r;
                }
                items[n].snapshot->protect_listed = marked(&f, found[i].id);
                items[n++].mtime_ns = found[i].mtime_ns;
        }
        *ret = items;
        *ret_count = n;
        return 0;
}

int bv_snapshot_list_report(BvBackend *b, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count,
                            bv_snapshot_skip_fn skip, void *userdata)
{
        _cleanup_free_ ListItem *items = NULL;
        BvSnapshot **list;
        size_t n = 0;
        int r;

        if (!codec || !ret || !ret_count)
                return -EINVAL;
        r = list_read(b, codec, &items, &n, skip, userdata);
        if (r < 0)
                return r;
        list = calloc(n ? n : 1, sizeof(*list));
        if (!list) {
                list_items_free(TAKE_PTR(items), n);
                return -ENOMEM;
        }
        if (n > 0)
                qsort(items, n, sizeof(*items), list_item_cmp);
        for (size_t i = 0; i < n; i++)
                list[i] = items[i].snapshot;
        *ret = list;
        *ret_count = n;
        return 0;
}

int bv_snapshot_list(BvBackend *b, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count)
{
        return bv_snapshot_list_report(b, codec, ret, ret_count, NULL, NULL);
}

void bv_snapshot_list_free(BvSnapshot **list, size_t n)
{
        if (!list)
                return;
        for (size_t i = 0; i < n; i++)
                bv_snapshot_free(list[i]);
        free(list);
}

/* The newest snapshot of the list, or the newest with that name. Of snapshots with the same
 * time the later in the list wins (bv_snapshot_list puts them in the order written). */
static const BvSnapshot *newest(BvSnapshot *const *list, size_t n, const char *name)
{
        const BvSnapshot *best = NULL;

        for (size_t i = 0; i < n; i++) {
                if (name && (!list[i]->name || !streq(list[i]->name, name)))
                        continue;
                if (!best || list[i]->time >= best->time)
                        best = list[i];
        }
        return best;
}

const char *bv_snapshot_name_problem(const char *name)
{
        size_t len, hex = 0;

        if (!name)
                return "it is missing";
        len = strlen(name);
        if (len > BV_SNAPSHOT_NAME_MAX)
                return "longer than 255 bytes";
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)name[i];
                if (c < 0x20 || c == 0x7f)
                        return "it contains a control character";
                hex += (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        }
        if (hex == len && len >= BV_SNAPSHOT_NAME_HEX_MIN && len <= SNAP_HEX_SIZE)
                return "4 to 32 hex digits would be taken for a snapshot id";
        if (streq(name, "latest"))
                return "'latest' means the newest snapshot";
        return NULL;
}

/* The snapshot whose id starts with the len hex digits of spec: -ENOENT for none, -ENOTUNIQ for
 * several. */
static int find_prefix(BvSnapshot *const *list, size_t n, const char *spec, size_t len, const BvSnapshot **ret)
{
        const BvSnapshot *found = NULL;

        for (size_t i = 0; i < n; i++)
                if (strncmp(list[i]->id, spec, len) == 0) {
                        if (found)
                                return -ENOTUNIQ;
                        found = list[i];
                }
        if (!found)
                return -ENOENT;
        *ret = found;
        return 0;
}

int bv_snapshot_resolve(BvSnapshot *const *list, size_t n, const char *spec, const BvSnapshot **ret)
{
        const BvSnapshot *best;
        size_t len;
        bool prefix;
        int r;

        if ((!list && n > 0) || !spec || !ret)
                return -EINVAL;
        len = strlen(spec);
        prefix = len > 0 && len < SNAP_HEX_SIZE && bv_hex_is_lower_prefix(spec, len);

        /* "latest", a full id, an id prefix of at least 4 digits (ids before names: a name can
         * never shadow an id), a name (its newest snapshot), a shorter id prefix. */
        if (streq(spec, "latest")) {
                best = newest(list, n, NULL);
                if (!best)
                        return -ENOENT;
                *ret = best;
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (streq(spec, list[i]->id)) {
                        *ret = list[i];
                        return 0;
                }
        if (prefix && len >= BV_SNAPSHOT_NAME_HEX_MIN) {
                r = find_prefix(list, n, spec, len, ret);
                if (r != -ENOENT)
                        return r;
        }
        best = newest(list, n, spec);
        if (best) {
                *ret = best;
                return 0;
        }
        return prefix && len < BV_SNAPSHOT_NAME_HEX_MIN ? find_prefix(list, n, spec, len, ret) : -ENOENT;
}
