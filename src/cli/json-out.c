/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the commands print with --json: one set of field names (docs/man/blkvault.1, "JSON
 * OUTPUT"). A snapshot's source, stats and chunker come from the snapshot record's own encoders,
 * so they read as the record does. Names of earlier releases stay for one release as aliases.
 */
#include <json-c/json.h>
#include <string.h>

#include "cli.h"
#include "snapshot-json.h"
#include "snapshot-used.h"
#include "timeutil.h"

struct json_object *json_snapshot(const BvSnapshot *s)
{
        char when[32];

        bv_format_time_utc(s->time, when);
        return BV_JSON_OBJECT({ "snapshot", json_object_new_string(s->id) },
                              { "id", json_object_new_string(s->id) }, /* alias of "snapshot", until 0.3 */
                              { "name", json_object_new_string(s->name ? s->name : "") },
                              { "time", json_object_new_uint64(s->time) },
                              { "time_utc", json_object_new_string(when) },
                              { "size", json_object_new_uint64(s->size) },
                              { "source", bv_snapshot_source_json(&s->source) },
                              { "chunker", bv_chunker_params_json(&s->chunker) },
                              { "stats", bv_snapshot_stats_json(&s->stats) },
                              { s->n_unreadable ? "unreadable" : NULL,
                                s->n_unreadable ? bv_snapshot_unreadable_json(s) : NULL },
                              { s->used_only.on ? "used_only" : NULL,
                                s->used_only.on ? bv_snapshot_used_only_json(&s->used_only) : NULL });
}

int json_add_aliases(struct json_object *o, const char *const *pairs, size_t n)
{
        for (size_t i = 0; i + 1 < n; i += 2) {
                struct json_object *v;
                if (!json_object_object_get_ex(o, pairs[i + 1], &v))
                        continue;
                if (bv_json_add(o, pairs[i], json_object_get(v)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int json_add_members(struct json_object *o, struct json_object *from)
{
        json_object_object_foreach(from, key, v)
                if (bv_json_add(o, key, json_object_get(v)) < 0)
                        return -ENOMEM;
        return 0;
}
