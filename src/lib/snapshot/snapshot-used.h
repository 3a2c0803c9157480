/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The "used_only" member of a snapshot record (docs/FORMAT.md, "Snapshots"): what a backup
 * --used-only skipped, per partition. Absent: the source was read whole.
 */

#include "json-util.h"
#include "snapshot.h"

/* A new object, NULL when out of memory. */
struct json_object *bv_snapshot_used_only_json(const BvSnapshotUsedOnly *u);
/* Fills u from o's "used_only" member (absent: u->on stays false). -EBADMSG if mistyped. */
int bv_snapshot_used_only_from_json(struct json_object *o, BvSnapshotUsedOnly *u);
