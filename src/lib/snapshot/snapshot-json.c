/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The JSON document of a snapshot record (docs/FORMAT.md, "Snapshots"):
 *
 *   {"version":1, "id", "name", "time", "time_ns" (optional), "time_utc", "size", "root", "height",
 *    "source":{"path","kind","size","probe":{...}, "dev","ino","mtime_ns","ctime_ns",
 *              "reused_from","unread_backups", "changed_map","changed_from","changed_backups",
 *              "libvirt":{"domain","uuid","disk","disk_size","checkpoint"}},
 *    "stats":{...}, "chunker":{...}, "unreadable":[...], "used_only":{...}}
 *
 * Decoding is strict about the record's frame (every top-level member present and typed) and
 * lenient inside source, stats and chunker: a member that is absent reads as zero or unknown
 * (records written before "bytes_data" existed get it as bytes_read - bytes_zero), one of the
 * wrong type is -EBADMSG.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hex.h"
#include "macro.h"
#include "maptree.h"
#include "snapshot-json.h"
#include "snapshot-used.h"
#include "timeutil.h"

#define SNAP_JSON_VERSION 1
#define SNAP_JSON_MAX_DEPTH 32
#define SNAP_HEX_SIZE (2 * BV_SNAPSHOT_ID_SIZE)

DEFINE_TRIVIAL_CLEANUP_FUNC(BvSnapshot, bv_snapshot_free);

/* ---- encoding ---- */

struct json_object *bv_snapshot_stats_json(const BvSnapshotStats *st)
{
        bool checked = st->bytes_map_checked > 0;

        return BV_JSON_OBJECT({ "bytes_read", json_object_new_uint64(st->bytes_read) },
                              { "bytes_read_cached", json_object_new_uint64(st->bytes_read_cached) },
                              { "bytes_read_direct", json_object_new_uint64(st->bytes_read_direct) },
                              { "bytes_zero", json_object_new_uint64(st->bytes_zero) },
                              { "bytes_hole", json_object_new_uint64(st->bytes_hole) },
                              { "bytes_data", json_object_new_uint64(st->bytes_data) },
                              { "bytes_new", json_object_new_uint64(st->bytes_new) },
                              { "bytes_stored", json_object_new_uint64(st->bytes_stored) },
                              { "chunks", json_object_new_uint64(st->chunks) },
                              { "chunks_new", json_object_new_uint64(st->chunks_new) },
                              { "packs", json_object_new_uint64(st->packs) },
                              { checked ? "bytes_map_checked" : NULL,
                                checked ? json_object_new_uint64(st->bytes_map_checked) : NULL },
                              { checked ? "bytes_map_wrong" : NULL,
                                checked ? json_object_new_uint64(st->bytes_map_wrong) : NULL },
                              { "seconds", json_object_new_double(st->seconds) });
}

struct json_object *bv_chunker_params_json(const BvChunkerParams *p)
{
        const char *kind = bv_chunker_kind_name(p->kind); /* NULL when unknown */

        return BV_JSON_OBJECT({ BV_JSON_OPT_STRING("kind", kind) },
                              { "min", json_object_new_uint64(p->min) },
                              { "avg", json_object_new_uint64(p->avg) },
                              { "max", json_object_new_uint64(p->max) });
}

static struct json_object *partition_json(const BvProbePartition *p)
{
        return BV_JSON_OBJECT({ "number", json_object_new_int64(p->number) },
                              { "start", json_object_new_uint64(p->start) },
                              { "size", json_object_new_uint64(p->size) },
                              { BV_JSON_OPT_STRING("type", p->type) },
                              { BV_JSON_OPT_STRING("uuid", p->uuid) },
                              { BV_JSON_OPT_STRING("fstype", p->fstype) },
                              { BV_JSON_OPT_STRING("label", p->label) },
                              { BV_JSON_OPT_STRING("fsuuid", p->fsuuid) });
}

static struct json_object *partitions_json(const BvProbe *p)
{
        _cleanup_(json_object_putp) struct json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < p->n_partitions; i++) {
                struct json_object *o = partition_json(&p->partitions[i]);
                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return NULL;
                }
        }
        return TAKE_PTR(a);
}

static struct json_object *probe_json(const BvProbe *p)
{
        bool parts = p->n_partitions > 0;

        return BV_JSON_OBJECT({ BV_JSON_OPT_STRING("pttype", p->pttype) },
                              { BV_JSON_OPT_STRING("ptuuid", p->ptuuid) },
                              { BV_JSON_OPT_STRING("fstype", p->fstype) },
                              { BV_JSON_OPT_STRING("label", p->label) },
                              { BV_JSON_OPT_STRING("uuid", p->uuid) },
                              { parts ? "partitions" : NULL, parts ? partitions_json(p) : NULL });
}

static struct json_object *libvirt_json(const BvSnapshotLibvirt *l)
{
        return BV_JSON_OBJECT({ BV_JSON_OPT_STRING("domain", l->domain) }, { BV_JSON_OPT_STRING("uuid", l->uuid) },
                              { BV_JSON_OPT_STRING("disk", l->disk) },
                              { "disk_size", json_object_new_uint64(l->disk_size) },
                              { BV_JSON_OPT_STRING("checkpoint", l->checkpoint) });
}

struct json_object *bv_snapshot_source_json(const BvSnapshotSource *src)
{
        const char *kind = src->kind ? bv_source_kind_name(src->kind) : NULL;
        const BvSourceIdentity *id = &src->identity;
        bool ident = src->has_identity, image = src->image_format != NULL, reused = src->reused_from[0] != 0, changed = src->changed_from[0] != 0;

        return BV_JSON_OBJECT({ BV_JSON_OPT_STRING("path", src->path) },
                              { BV_JSON_OPT_STRING("host", src->host) },
                              { BV_JSON_OPT_STRING("abs_path", src->abs_path) },
                              { BV_JSON_OPT_STRING("stable_name", src->stable_name) },
                              { BV_JSON_OPT_STRING("kind", kind) },
                              { "size", json_object_new_uint64(src->size) },
                              { src->probed ? "probe" : NULL, src->probed ? probe_json(&src->probe) : NULL },
                              { ident ? "dev" : NULL, ident ? json_object_new_uint64(id->dev) : NULL },
                              { ident ? "ino" : NULL, ident ? json_object_new_uint64(id->ino) : NULL },
                              { ident ? "mtime_ns" : NULL, ident ? json_object_new_uint64(id->mtime_ns) : NULL },
                              { ident ? "ctime_ns" : NULL, ident ? json_object_new_uint64(id->ctime_ns) : NULL },
                              { reused ? "reused_from" : NULL, reused ? json_object_new_string(src->reused_from) : NULL },
                              { src->unread_backups ? "unread_backups" : NULL,
                                src->unread_backups ? json_object_new_uint64(src->unread_backups) : NULL },
                              { BV_JSON_OPT_STRING("changed_map", src->changed_map) },
                              { changed ? "changed_from" : NULL,
                                changed ? json_object_new_string(src->changed_from) : NULL },
                              { src->changed_backups ? "changed_backups" : NULL,
                                src->changed_backups ? json_object_new_uint64(src->changed_backups) : NULL },
                              { BV_JSON_OPT_STRING("image_format", src->image_format) },
                              { image && ident ? "file_size" : NULL,
                                image && ident ? json_object_new_uint64(id->size) : NULL },
                              { src->libvirt.domain ? "libvirt" : NULL,
                                src->libvirt.domain ? libvirt_json(&src->libvirt) : NULL });
}

struct json_object *bv_snapshot_unreadable_json(const BvSnapshot *s)
{
        struct json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < s->n_unreadable; i++) {
                struct json_object *e = BV_JSON_OBJECT({ "offset", json_object_new_uint64(s->unreadable[i].offset) },
                                                       { "length", json_object_new_uint64(s->unreadable[i].length) });
                if (!e || json_object_array_add(a, e) < 0) {
                        json_object_put(e);
                        json_object_put(a);
                        return NULL;
                }
        }
        return a;
}

int bv_snapshot_to_json(const BvSnapshot *s, char **ret)
{
        char root[2 * BV_ID_SIZE + 1], utc[32];
        const char *text;
        char *copy;

        if (!s || !ret)
                return -EINVAL;
        if (!bv_hex_is_lower(s->id, SNAP_HEX_SIZE) || s->height == 0 || s->height > BV_MAP_MAX_HEIGHT)
                return -EINVAL;
        bv_hex_encode(s->root, BV_ID_SIZE, root);
        bv_format_time_utc(s->time, utc);
        /* time_ns only when it is of time's second (a tool that sets time leaves it behind) */
        bool has_ns = s->time_ns && s->time_ns / 1000000000ull == s->time;

        _cleanup_(json_object_putp) struct json_object *o =
                BV_JSON_OBJECT({ "version", json_object_new_int(SNAP_JSON_VERSION) },
                               { "id", json_object_new_string(s->id) },
                               { "name", json_object_new_string(s->name ? s->name : "") },
                               { "time", json_object_new_uint64(s->time) },
                               { has_ns ? "time_ns" : NULL, has_ns ? json_object_new_uint64(s->time_ns) : NULL },
                               { "time_utc", json_object_new_string(utc) },
                               { "size", json_object_new_uint64(s->size) },
                               { "root", json_object_new_string(root) },
                               { "height", json_object_new_int((int32_t)s->height) },
                               { "source", bv_snapshot_source_json(&s->source) },
                               { "stats", bv_snapshot_stats_json(&s->stats) },
                               { "chunker", bv_chunker_params_json(&s->chunker) });
        if (!o)
                return -ENOMEM;
        if (s->used_only.on) {
                struct json_object *u = bv_snapshot_used_only_json(&s->used_only);
                if (!u || json_object_object_add(o, "used_only", u) < 0) {
                        json_object_put(u);
                        return -ENOMEM;
                }
        }
        if (s->n_unreadable > 0) {
                struct json_object *a = bv_snapshot_unreadable_json(s);
                if (!a || json_object_object_add(o, "unreadable", a) < 0) {
                        json_object_put(a);
                        return -ENOMEM;
                }
        }
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        if (!text)
                return -ENOMEM;
        copy = strdup(text);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

/* ---- decoding ---- */

/* "unreadable": [{"offset":O,"length":L}, ...], ascending, not overlapping, inside the image. */
static int unreadable_from_json(struct json_object *o, BvSnapshot *s)
{
        struct json_object *a = NULL;
        uint64_t end = 0;
        size_t n;

        if (!json_object_object_get_ex(o, "unreadable", &a))
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        if (n == 0)
                return 0;
        s->unreadable = calloc(n, sizeof(*s->unreadable));
        if (!s->unreadable)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct json_object *e = json_object_array_get_idx(a, i);
                BvByteRange *rg = &s->unreadable[i];
                if (!json_object_is_type(e, json_type_object) || bv_json_get_u64(e, "offset", &rg->offset) < 0 ||
                    bv_json_get_u64(e, "length", &rg->length) < 0 || rg->length == 0 || rg->offset < end ||
                    rg->offset > s->size || rg->length > s->size - rg->offset)
                        return -EBADMSG;
                end = rg->offset + rg->length;
        }
        s->n_unreadable = n;
        return 0;
}

static int stats_from_json(struct json_object *o, BvSnapshotStats *st)
{
        bool has_data = json_object_object_get_ex(o, "bytes_data", NULL);
        int r;

        if ((r = bv_json_get_u64(o, "bytes_read", &st->bytes_read)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_read_cached", &st->bytes_read_cached)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_read_direct", &st->bytes_read_direct)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_zero", &st->bytes_zero)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_hole", &st->bytes_hole)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_data", &st->bytes_data)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_new", &st->bytes_new)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_stored", &st->bytes_stored)) < 0 ||
            (r = bv_json_get_u64(o, "chunks", &st->chunks)) < 0 ||
            (r = bv_json_get_u64(o, "chunks_new", &st->chunks_new)) < 0 ||
            (r = bv_json_get_u64(o, "packs", &st->packs)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_map_checked", &st->bytes_map_checked)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_map_wrong", &st->bytes_map_wrong)) < 0 ||
            (r = bv_json_get_double(o, "seconds", &st->seconds)) < 0)
                return r;
        if (!has_data)
                st->bytes_data = st->bytes_read > st->bytes_zero ? st->bytes_read - st->bytes_zero : 0;
        return 0;
}

static int chunker_from_json(struct json_object *o, BvChunkerParams *p)
{
        _cleanup_free_ char *kind = NULL;
        uint64_t min = 0, avg = 0, max = 0;
        int r;

        if ((r = bv_json_get_string(o, "kind", &kind)) < 0 || (r = bv_json_get_u64(o, "min", &min)) < 0 ||
            (r = bv_json_get_u64(o, "avg", &avg)) < 0 || (r = bv_json_get_u64(o, "max", &max)) < 0)
                return r;
        if (min > UINT32_MAX || avg > UINT32_MAX || max > UINT32_MAX)
                return -EBADMSG;
        *p = (BvChunkerParams){ .min = (uint32_t)min, .avg = (uint32_t)avg, .max = (uint32_t)max };
        if (kind)
                (void)bv_chunker_kind_from_name(kind, &p->kind); /* unknown: left 0 */
        return 0;
}

static int partition_from_json(struct json_object *o, BvProbePartition *p)
{
        uint64_t number = 0;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if ((r = bv_json_get_u64(o, "number", &number)) < 0 || (r = bv_json_get_u64(o, "start", &p->start)) < 0 ||
            (r = bv_json_get_u64(o, "size", &p->size)) < 0 || (r = bv_json_get_string(o, "type", &p->type)) < 0 ||
            (r = bv_json_get_string(o, "uuid", &p->uuid)) < 0 ||
            (r = bv_json_get_string(o, "fstype", &p->fstype)) < 0 ||
            (r = bv_json_get_string(o, "label", &p->label)) < 0 ||
            (r = bv_json_get_string(o, "fsuuid", &p->fsuuid)) < 0)
                return r;
        if (number > UINT32_MAX)
                return -EBADMSG;
        p->number = (uint32_t)number;
        return 0;
}

static int probe_from_json(struct json_object *o, BvProbe *p)
{
        struct json_object *parts;
        int r;

        if ((r = bv_json_get_string(o, "pttype", &p->pttype)) < 0 ||
            (r = bv_json_get_string(o, "ptuuid", &p->ptuuid)) < 0 ||
            (r = bv_json_get_string(o, "fstype", &p->fstype)) < 0 ||
            (r = bv_json_get_string(o, "label", &p->label)) < 0 || (r = bv_json_get_string(o, "uuid", &p->uuid)) < 0)
                return r;
        if (!json_object_object_get_ex(o, "partitions", &parts))
                return 0;
        if (!json_object_is_type(parts, json_type_array))
                return -EBADMSG;
        size_t n = json_object_array_length(parts);
        if (n == 0)
                return 0;
        p->partitions = calloc(n, sizeof(BvProbePartition));
        if (!p->partitions)
                return -ENOMEM;
        for (; p->n_partitions < n; p->n_partitions++) {
                r = partition_from_json(json_object_array_get_idx(parts, p->n_partitions),
                                        &p->partitions[p->n_partitions]);
                if (r < 0) {
                        p->n_partitions++; /* freed with the others */
                        return r;
                }
        }
        return 0;
}

/* A snapshot id member (absent: left ""). */
static int snap_id_from_json(struct json_object *o, const char *key, char ret[SNAP_HEX_SIZE + 1])
{
        _cleanup_free_ char *id = NULL;
        int r = bv_json_get_string(o, key, &id);

        if (r < 0 || !id)
                return r;
        if (!bv_hex_is_lower(id, SNAP_HEX_SIZE) || id[SNAP_HEX_SIZE] != 0)
                return -EBADMSG;
        memcpy(ret, id, SNAP_HEX_SIZE + 1);
        return 0;
}

/* The file identity (all four members, or none) and the reuse record. */
static int identity_from_json(struct json_object *o, BvSnapshotSource *src)
{
        BvSourceIdentity *id = &src->identity;
        int r;

        if ((r = bv_json_get_u64(o, "dev", &id->dev)) < 0 || (r = bv_json_get_u64(o, "ino", &id->ino)) < 0 ||
            (r = bv_json_get_u64(o, "mtime_ns", &id->mtime_ns)) < 0 ||
            (r = bv_json_get_u64(o, "ctime_ns", &id->ctime_ns)) < 0 ||
            (r = bv_json_get_u64(o, "unread_backups", &src->unread_backups)) < 0 ||
            (r = snap_id_from_json(o, "reused_from", src->reused_from)) < 0 ||
            (r = snap_id_from_json(o, "changed_from", src->changed_from)) < 0 ||
            (r = bv_json_get_u64(o, "changed_backups", &src->changed_backups)) < 0 ||
            (r = bv_json_get_string(o, "changed_map", &src->changed_map)) < 0 ||
            (r = bv_json_get_string(o, "image_format", &src->image_format)) < 0)
                return r;
        src->has_identity = json_object_object_get_ex(o, "dev", NULL) && json_object_object_get_ex(o, "ino", NULL) &&
                            json_object_object_get_ex(o, "mtime_ns", NULL) &&
                            json_object_object_get_ex(o, "ctime_ns", NULL);
        id->size = src->size; /* an image's is the file's, not its virtual disk's */
        if (src->image_format && !json_object_object_get_ex(o, "file_size", NULL))
                src->has_identity = false;
        return bv_json_get_u64(o, "file_size", &id->size);
}

/* The "libvirt" member (absent: left empty); it must name its domain and disk. */
static int libvirt_from_json(struct json_object *o, BvSnapshotLibvirt *l)
{
        struct json_object *v;
        int r;

        if (!json_object_object_get_ex(o, "libvirt", &v))
                return 0;
        if (!json_object_is_type(v, json_type_object))
                return -EBADMSG;
        if ((r = bv_json_get_string(v, "domain", &l->domain)) < 0 || (r = bv_json_get_string(v, "uuid", &l->uuid)) < 0 ||
            (r = bv_json_get_string(v, "disk", &l->disk)) < 0 ||
            (r = bv_json_get_u64(v, "disk_size", &l->disk_size)) < 0 ||
            (r = bv_json_get_string(v, "checkpoint", &l->checkpoint)) < 0)
                return r;
        return l->domain && l->disk ? 0 : -EBADMSG;
}

static int source_from_json(struct json_object *o, BvSnapshotSource *src)
{
        _cleanup_free_ char *kind = NULL;
        struct json_object *probe;
        int r;

        if ((r = bv_json_get_string(o, "path", &src->path)) < 0 || (r = bv_json_get_string(o, "kind", &kind)) < 0 ||
            (r = bv_json_get_u64(o, "size", &src->size)) < 0 || (r = bv_json_get_string(o, "host", &src->host)) < 0 ||
            (r = bv_json_get_string(o, "abs_path", &src->abs_path)) < 0 ||
            (r = bv_json_get_string(o, "stable_name", &src->stable_name)) < 0)
                return r;
        if (kind)
                (void)bv_source_kind_from_name(kind, &src->kind); /* unknown: left 0 */
        r = identity_from_json(o, src);
        if (r >= 0)
                r = libvirt_from_json(o, &src->libvirt);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(o, "probe", &probe))
                return 0;
        if (!json_object_is_type(probe, json_type_object))
                return -EBADMSG;
        src->probed = true;
        return probe_from_json(probe, &src->probe);
}

static int json_get_hex(struct json_object *o, const char *key, size_t len, const char **ret)
{
        struct json_object *v = bv_json_member(o, key, json_type_string);
        const char *s = v ? json_object_get_string(v) : NULL;

        if (!s || !bv_hex_is_lower(s, 2 * len))
                return -EBADMSG;
        *ret = s;
        return 0;
}

/* Fills s from the members of o (version already checked). */
static int snapshot_fill(BvSnapshot *s, struct json_object *o)
{
        struct json_object *name, *utc, *height, *source, *stats, *chunker;
        const char *id, *root;
        int64_t h;
        int r;

        name = bv_json_member(o, "name", json_type_string);
        utc = bv_json_member(o, "time_utc", json_type_string);
        height = bv_json_member(o, "height", json_type_int);
        source = bv_json_member(o, "source", json_type_object);
        stats = bv_json_member(o, "stats", json_type_object);
        chunker = bv_json_member(o, "chunker", json_type_object);
        if (!name || !utc || !height || !source || !stats || !chunker)
                return -EBADMSG;
        if (json_get_hex(o, "id", BV_SNAPSHOT_ID_SIZE, &id) < 0 || json_get_hex(o, "root", BV_ID_SIZE, &root) < 0)
                return -EBADMSG;
        if (!json_object_object_get_ex(o, "time", NULL) || !json_object_object_get_ex(o, "size", NULL) ||
            bv_json_get_u64(o, "time", &s->time) < 0 || bv_json_get_u64(o, "size", &s->size) < 0)
                return -EBADMSG;
        /* The start in nanoseconds (records older than it have none): only a tie-break within time's
         * second, so one that is mistyped or of another second is ignored, and time stands. */
        if (json_object_object_get_ex(o, "time_ns", NULL) &&
            (bv_json_get_u64(o, "time_ns", &s->time_ns) < 0 || s->time_ns / 1000000000ull != s->time))
                s->time_ns = 0;
        h = json_object_get_int64(height);
        if (h < 1 || h > BV_MAP_MAX_HEIGHT)
                return -EBADMSG;

        s->height = (uint32_t)h;
        memcpy(s->id, id, SNAP_HEX_SIZE + 1);
        if (bv_hex_decode(root, s->root, BV_ID_SIZE) < 0)
                return -EBADMSG;
        s->name = strdup(json_object_get_string(name));
        if (!s->name)
                return -ENOMEM;
        if ((r = source_from_json(source, &s->source)) < 0 || (r = stats_from_json(stats, &s->stats)) < 0 ||
            (r = chunker_from_json(chunker, &s->chunker)) < 0 || (r = unreadable_from_json(o, s)) < 0 ||
            (r = bv_snapshot_used_only_from_json(o, &s->used_only)) < 0)
                return r;
        return 0;
}

int bv_snapshot_from_json(const char *json, size_t len, BvSnapshot **ret)
{
        _cleanup_(json_object_putp) struct json_object *o = NULL;
        _cleanup_(bv_snapshot_freep) BvSnapshot *s = NULL;
        struct json_object *version;
        int r;

        if (!ret)
                return -EINVAL;
        r = bv_json_parse_object(json, len, SNAP_JSON_MAX_DEPTH, &o);
        if (r < 0)
                return r;
        version = bv_json_member(o, "version", json_type_int);
        if (!version)
                return -EBADMSG;
        if (json_object_get_int64(version) != SNAP_JSON_VERSION)
                return -EPROTONOSUPPORT;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        r = snapshot_fill(s, o);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}
