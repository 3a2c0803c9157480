/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The scheduled verification's record (docs/FORMAT.md, "Scheduled verification"): the file
 * verify-state at the top of the repository lists, per pack, when its data was last read
 * and found whole, or that it was found damaged. Sampled runs read the least recently
 * verified packs first and rewrite the file (durably, replacing it) as they go.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "pack.h"

#define BV_VERIFY_STATE_FILE "verify-state"

typedef struct BvVerifyPackState {
        uint8_t id[BV_PACK_ID_SIZE];
        uint64_t size;        /* bytes on disk (not stored in the file) */
        uint64_t verified_ns; /* realtime ns of the last read that found it whole; 0: never */
        bool bad;             /* the last read found damage: read first next time */
} BvVerifyPackState;

/* Reads the file below repo_dirfd into a malloc'd array sorted by pack id (empty if there is
 * no file). -EBADMSG if it does not parse. */
int bv_verify_state_load(BvBackend *b, BvVerifyPackState **ret, size_t *ret_n);
/* Writes the n entries (any order) as the new file, with the durability recipe. */
int bv_verify_state_save(BvBackend *b, const BvVerifyPackState *s, size_t n);
/* The entry of a pack in an array sorted by id, or NULL. */
BvVerifyPackState *bv_verify_state_find(BvVerifyPackState *s, size_t n, const uint8_t id[BV_PACK_ID_SIZE]);
/* Sorts in the order packs are read: damaged first, then never verified, then the least
 * recently verified, ties by id. */
void bv_verify_state_sort_due(BvVerifyPackState *s, size_t n);
void bv_verify_state_sort_id(BvVerifyPackState *s, size_t n);
