/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Per-block primitives of the chunker: zero detection and the keyed block print. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extent.h"

/* True if len bytes at p are all zero (any alignment; fast for 4 KiB blocks). */
bool bv_is_zero(const void *p, size_t len);

/* A keyed 64-bit print of one full 4 KiB block, computed over every byte of the block with a
 * few instructions per word; not a cryptographic hash (docs/FORMAT.md, "Chunking"). */
uint64_t bv_block_print(const uint8_t key[32], const void *block);
