/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The map of a backup's parent snapshot, for reusing what a changed-block source reports as
 * unchanged (backup.c). Used from the reading thread only. */

#include "maptree.h"
#include "repo.h"

typedef struct BvParentMap BvParentMap;

int bv_parent_map_open(BvRepo *r, const BvSnapshot *parent, BvParentMap **ret);
void bv_parent_map_free(BvParentMap *p);
/* The parent's extent holding offset; -ERANGE past the parent's end. */
int bv_parent_map_lookup(BvParentMap *p, uint64_t offset, BvMapExtent *ret);
