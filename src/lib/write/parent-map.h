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
/* Before a pass that takes what is not in changed (ranges in order, as a changed-block source
 * gives them) from the parent: starts, all at once, the reads the pass would otherwise wait for
 * one by one on a cold repository: the index (when small enough to read whole), every node of
 * the parent's map, level by level, and the stored group of every chunk of the parent that a
 * changed range cuts into. From then on the repository's reads prefetch nothing more
 * (bv_repo_set_exact_reads) until p is freed; with changed NULL (the source cannot tell) only
 * the index and the map are announced, and reads prefetch as they would. Only hints: nothing read here is trusted or kept
 * (the pass reads and checks everything again). Errors: those of reading the map's internal
 * nodes, -EFBIG for a map too large to announce whole (then nothing is set). */
int bv_parent_map_prefetch(BvParentMap *p, const BvByteRange *changed, size_t n);

/* Reads ahead in a thread of its own what backups from these parents will read first (for each,
 * the index and the map: bv_parent_map_prefetch without changed ranges) while the caller waits
 * for something else (libvirt beginning a backup job); only hints, nothing kept. With n == 0
 * nothing starts (*ret NULL). -ENOMEM, or pthread_create's error. */
typedef struct BvParentWarm BvParentWarm;
int bv_parent_warm_start(BvRepo *r, const BvSnapshot *const *parents, size_t n, BvParentWarm **ret);
/* Waits for the thread and frees w (NULL: nothing). */
void bv_parent_warm_join(BvParentWarm *w);
