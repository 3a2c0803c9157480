/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The "used_only" member of a snapshot record (docs/FORMAT.md, "Snapshots"): present only when
 * the backup read only the blocks the filesystems inside its source use.
 *
 *   "used_only":{"bytes_free_skipped":N,
 *                "partitions":[{"number","name","start","size","fstype","label","reader",
 *                               "bytes_used","bytes_free_skipped","bytes_unknown",
 *                               "read_whole_because"}, ...]}
 *
 * Decoding is lenient as inside source: members absent read as zero or NULL, unknown ones are
 * ignored, a mistyped one is -EBADMSG.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "snapshot-used.h"

#define USED_MAX_PARTS 4096 /* more than any partition table holds (GPT: 128 by default) */

static void part_done(BvSnapshotUsedPart *p)
{
        free(p->fstype);
        free(p->label);
        free(p->reader);
        free(p->why);
}

void bv_snapshot_used_only_done(BvSnapshotUsedOnly *u)
{
        for (size_t i = 0; i < u->n_parts; i++)
                part_done(&u->parts[i]);
        free(u->parts);
        *u = (BvSnapshotUsedOnly){};
}

static bool str_equal(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool part_equal(const BvSnapshotUsedPart *a, const BvSnapshotUsedPart *b)
{
        return a->number == b->number && a->start == b->start && a->size == b->size &&
               str_equal(a->fstype, b->fstype) && str_equal(a->reader, b->reader) &&
               a->bytes_used == b->bytes_used && a->bytes_free == b->bytes_free &&
               a->bytes_unknown == b->bytes_unknown;
}

bool bv_snapshot_used_only_equal(const BvSnapshotUsedOnly *a, const BvSnapshotUsedOnly *b)
{
        if (!a->on || !b->on)
                return a->on == b->on;
        if (a->bytes_free != b->bytes_free || a->n_parts != b->n_parts)
                return false;
        for (size_t i = 0; i < a->n_parts; i++)
                if (!part_equal(&a->parts[i], &b->parts[i]))
                        return false;
        return true;
}

/* ---- encoding ---- */

static struct json_object *part_json(const BvSnapshotUsedPart *p)
{
        char name[16];

        snprintf(name, sizeof(name), p->number ? "p%u" : "disk", p->number);
        return BV_JSON_OBJECT({ "number", json_object_new_uint64(p->number) },
                              { "name", json_object_new_string(name) },
                              { "start", json_object_new_uint64(p->start) },
                              { "size", json_object_new_uint64(p->size) },
                              { BV_JSON_OPT_STRING("fstype", p->fstype) },
                              { BV_JSON_OPT_STRING("label", p->label) },
                              { BV_JSON_OPT_STRING("reader", p->reader) },
                              { "bytes_used", json_object_new_uint64(p->bytes_used) },
                              { "bytes_free_skipped", json_object_new_uint64(p->bytes_free) },
                              { "bytes_unknown", json_object_new_uint64(p->bytes_unknown) },
                              { BV_JSON_OPT_STRING("read_whole_because", p->why) });
}

struct json_object *bv_snapshot_used_only_json(const BvSnapshotUsedOnly *u)
{
        _cleanup_(json_object_putp) struct json_object *parts = json_object_new_array();

        for (size_t i = 0; parts && i < u->n_parts; i++) {
                struct json_object *p = part_json(&u->parts[i]);
                if (!p || json_object_array_add(parts, p) < 0) {
                        json_object_put(p);
                        return NULL;
                }
        }
        if (!parts)
                return NULL;
        return BV_JSON_OBJECT({ "bytes_free_skipped", json_object_new_uint64(u->bytes_free) },
                              { "partitions", json_object_get(parts) });
}

/* ---- decoding ---- */

static int part_from_json(struct json_object *o, BvSnapshotUsedPart *p)
{
        uint64_t number = 0;
        int r;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if ((r = bv_json_get_u64(o, "number", &number)) < 0 || (r = bv_json_get_u64(o, "start", &p->start)) < 0 ||
            (r = bv_json_get_u64(o, "size", &p->size)) < 0 || (r = bv_json_get_string(o, "fstype", &p->fstype)) < 0 ||
            (r = bv_json_get_string(o, "label", &p->label)) < 0 ||
            (r = bv_json_get_string(o, "reader", &p->reader)) < 0 ||
            (r = bv_json_get_string(o, "read_whole_because", &p->why)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_used", &p->bytes_used)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_free_skipped", &p->bytes_free)) < 0 ||
            (r = bv_json_get_u64(o, "bytes_unknown", &p->bytes_unknown)) < 0)
                return r;
        if (number > UINT32_MAX)
                return -EBADMSG;
        p->number = (uint32_t)number;
        return 0;
}

int bv_snapshot_used_only_from_json(struct json_object *o, BvSnapshotUsedOnly *u)
{
        struct json_object *v, *parts;
        int r;

        if (!json_object_object_get_ex(o, "used_only", &v))
                return 0; /* a whole read, or a record older than the member */
        if (!json_object_is_type(v, json_type_object))
                return -EBADMSG;
        u->on = true;
        r = bv_json_get_u64(v, "bytes_free_skipped", &u->bytes_free);
        if (r < 0 || !json_object_object_get_ex(v, "partitions", &parts))
                return r;
        if (!json_object_is_type(parts, json_type_array))
                return -EBADMSG;
        size_t n = json_object_array_length(parts);
        if (n == 0)
                return 0;
        if (n > USED_MAX_PARTS)
                return -EBADMSG;
        u->parts = calloc(n, sizeof(BvSnapshotUsedPart));
        if (!u->parts)
                return -ENOMEM;
        for (; u->n_parts < n; u->n_parts++) {
                r = part_from_json(json_object_array_get_idx(parts, u->n_parts), &u->parts[u->n_parts]);
                if (r < 0) {
                        u->n_parts++; /* freed with the others */
                        return r;
                }
        }
        return 0;
}
