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

/* For batches of at most `bytes` plus one chunk (chunker.h); starts the helper thread
 * (without `helper`, the caller hashes alone). */
int bv_batch_hasher_new(const BvKeyring *k, size_t bytes, bool helper, BvBatchHasher **ret);
/* Stops and joins it; NULL is a no-op. */
void bv_batch_hasher_free(BvBatchHasher *h);

/* Hashes a batch of n <= BV_SPLITTER_BATCH_MAX chunks: the prefix ids of each. */
void bv_batch_hasher_run(BvBatchHasher *h, const BvExtent *e, size_t n);
/* The prefix ids of the batch's chunk i (ceil(length / 4 KiB) of them, its id last). */
uint8_t (*bv_batch_hasher_ids(BvBatchHasher *h, size_t i))[BV_ID_SIZE];
