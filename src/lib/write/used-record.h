/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a snapshot records of a backup --used-only (snapshot.h, BvSnapshotUsedOnly), made from
 * the used-block map the source read by (fs/used.h). */

#include "snapshot.h"
#include "used.h"

/* m NULL: a whole read (ret->on false). 0 or -ENOMEM (then ret is empty). */
int bv_used_record(const BvFsUsedMap *m, BvSnapshotUsedOnly *ret);
