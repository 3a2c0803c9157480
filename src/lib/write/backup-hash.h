/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Chunk ids of a batch on two cores: the caller's thread and one helper thread split the
 * batch's chunks (by bytes, at a chunk edge) and each computes the 4 KiB prefix ids of its
 * share (bv_keyring_id_prefixes), fork-join. The ids are what one thread would compute.
 */

#include <stdbool.h>
#include <stddef.h>

#include "extent.h"
#include "keyring.h"

typedef struct BvBatchHasher BvBatchHasher;

/* Starts the helper thread (without `helper`, the caller hashes alone). */
int bv_batch_hasher_new(const BvKeyring *k, bool helper, BvBatchHasher **ret);
/* Stops and joins it; NULL is a no-op. */
void bv_batch_hasher_free(BvBatchHasher *h);

/* The prefix ids of e[i] (ceil(length / 4 KiB) of them, the whole chunk's id last) into
 * ids + first[i], where first[i] is the sum of the counts before it (first[n] the total);
 * ids holds at least that many. */
void bv_batch_hasher_run(BvBatchHasher *h, const BvExtent *e, size_t n, uint8_t (*ids)[BV_ID_SIZE], size_t *first);
