/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The snapshot record's codec (docs/FORMAT.md, "Snapshots"): the typed BvSnapshot to and from
 * its JSON document, and the same encoders for its parts, so that the CLI's --json output uses
 * the names the record uses (docs/man/blkvault-json.7). The one library header
 * besides json-util.h that speaks json-c.
 */

#include <stddef.h>

#include "json-util.h"
#include "snapshot.h"

/* decode: -EBADMSG if malformed, -EPROTONOSUPPORT for an unknown version. Exposed for the
 * fuzzer and the tests. */
int bv_snapshot_to_json(const BvSnapshot *s, char **ret);
int bv_snapshot_from_json(const char *json, size_t len, BvSnapshot **ret);

/* New objects, NULL when out of memory. */
struct json_object *bv_snapshot_stats_json(const BvSnapshotStats *st);
/* [{"offset":O,"length":L}, ...] of the ranges the backup could not read (NULL: out of memory). */
struct json_object *bv_snapshot_unreadable_json(const BvSnapshot *s);
struct json_object *bv_snapshot_source_json(const BvSnapshotSource *src);
struct json_object *bv_chunker_params_json(const BvChunkerParams *p);
