/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "repo.h"

typedef struct BvRepoInfo {
        uint64_t snapshots;
        uint64_t logical_bytes;   /* sum of snapshot image sizes */
        uint64_t data_bytes;      /* sum over snapshots of their data (non-zero, non-hole) bytes */
        uint64_t unique_raw;      /* raw bytes of distinct chunks */
        uint64_t stored_bytes;    /* pack files on disk */
        uint64_t chunks;          /* distinct objects in the index */
        uint64_t groups;          /* compression groups (GROUP objects) in the packs */
        uint64_t grouped_chunks;  /* chunks stored in them */
        uint64_t packs;
        uint64_t index_segments, index_bytes;
        double dedup_ratio;       /* data_bytes / unique_raw */
        double compression_ratio; /* unique_raw / stored_bytes */
} BvRepoInfo;

int bv_repo_info(BvRepo *r, BvRepoInfo *ret);

/* The bytes of snap's data (its DATA extents, each time one occurs) whose chunk parent's map
 * references too: what snap shares with parent, exactly. Both maps are read. */
int bv_snapshot_shared_bytes(BvRepo *r, const BvSnapshot *snap, const BvSnapshot *parent, uint64_t *ret);
