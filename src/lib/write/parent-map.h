/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The map of a backup's parent snapshot, for reusing what a changed-block source reports as
 * unchanged (backup.c). Used from the reading thread only. */

#include "index.h"
#include "maptree.h"
#include "repo.h"

typedef struct BvParentMap BvParentMap;

int bv_parent_map_open(BvRepo *r, const BvSnapshot *parent, BvParentMap **ret);
void bv_parent_map_free(BvParentMap *p);
/* The parent's extent holding offset; -ERANGE past the parent's end. */
int bv_parent_map_lookup(BvParentMap *p, uint64_t offset, BvMapExtent *ret);
/* The bytes of the parent's data chunk e (its id and length), stored at loc, read from the
 * repository and checked against its id: the clean parts of a chunk that a changed range cuts
 * into are taken from there instead of being read from the source again. *ret stays valid until
 * the next call (the last chunk is kept: both edges of a short changed run often lie in one).
 * -EUCLEAN, -EBADMSG: not stored (whole) any more; -ENOMEM. */
int bv_parent_map_chunk(BvParentMap *p, const BvMapExtent *e, const BvLocation *loc, const uint8_t **ret);
