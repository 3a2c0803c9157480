/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What backup --used-only (and a job's used-only = yes) read: per partition, the bytes its
 * filesystem uses (read), the free ones skipped and those read whole for want of a map; as the
 * lines after the backup's result, and as the "used_only" member of --json.
 */
#include <json-c/json.h>
#include <stdio.h>

#include "cli.h"
#include "used.h"

static struct json_object *json_part(const BvFsUsedPart *p)
{
        return BV_JSON_OBJECT({ "number", json_object_new_uint64(p->number) },
                              { "start", json_object_new_uint64(p->start) },
                              { "size", json_object_new_uint64(p->size) },
                              { BV_JSON_OPT_STRING("fstype", p->fstype[0] ? p->fstype : NULL) },
                              { BV_JSON_OPT_STRING("reader", p->reader) },
                              { "bytes_used", json_object_new_uint64(p->bytes_used) },
                              { "bytes_free_skipped", json_object_new_uint64(p->bytes_free) },
                              { "bytes_unknown", json_object_new_uint64(p->bytes_unknown) },
                              { BV_JSON_OPT_STRING("read_whole_because", p->why[0] ? p->why : NULL) });
}

struct json_object *json_used_only(const BvFsUsedMap *m, const char *why)
{
        _cleanup_(json_object_putp) struct json_object *parts = json_object_new_array();

        for (size_t i = 0; parts && i < m->n_parts; i++) {
                struct json_object *p = json_part(&m->parts[i]);
                if (!p || json_object_array_add(parts, p) < 0) {
                        json_object_put(p);
                        return NULL;
                }
        }
        if (!parts)
                return NULL;
        return BV_JSON_OBJECT({ BV_JSON_OPT_STRING("read_whole_because", why && why[0] ? why : NULL) },
                              { "bytes_free_skipped", json_object_new_uint64(m->bytes_free) },
                              { "partitions", json_object_get(parts) });
}

void log_used_only(const BvFsUsedMap *m, const char *why, const char *source, bool json)
{
        char a[32], b[32], c[32], name[16];

        if (why && why[0]) {
                log_warning("'%s' read whole, not only its used blocks: %s", source, why);
                return;
        }
        if (json)
                return;
        for (size_t i = 0; i < m->n_parts; i++) {
                const BvFsUsedPart *p = &m->parts[i];
                snprintf(name, sizeof(name), p->number ? "p%u" : "disk", p->number);
                if (p->reader)
                        log_info("%s %s: %s used (read), %s free (not read), %s read whole (%s)", name, p->fstype,
                                 format_bytes(p->bytes_used, a), format_bytes(p->bytes_free, b),
                                 format_bytes(p->bytes_unknown, c), p->reader);
                else if (p->bytes_unknown == 0) /* an extended partition: its logical ones follow */
                        log_info("%s: %s", name, p->why);
                else
                        log_info("%s%s%s: %s read whole because %s", name, p->fstype[0] ? " " : "", p->fstype,
                                 format_bytes(p->bytes_unknown, a), p->why);
        }
        if (m->n_parts == 0)
                log_info("'%s' read whole: no partition or filesystem found", source);
}
