/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Reading chunks, whether stored alone (a CHUNK object) or in a compression group (a member
 * of a GROUP object, store/group.h). A group is decoded whole, so readers that take several
 * members of one group share a BvGroupCache: a decode-once cache of decoded groups
 * (util/dcache.h) in which each group is decoded once even when several threads ask for it at
 * the same time, and a group whose every member has been taken out moves to the cold end (a
 * sequential pass recycles a few groups instead of filling the cache).
 */

#include "repo.h"

typedef struct BvGroupCache BvGroupCache;

/* A cache of decoded groups of up to cap_bytes (it always keeps the groups being read); groups
 * whose every member was read out are kept only up to a sixteenth of that. With max_decodes > 0,
 * at most that many threads decode (a group, or a chunk stored alone) through it at once; a
 * thread reading from a pack, or waiting for another's decode of a group, holds no such slot. */
int bv_group_cache_new(size_t cap_bytes, unsigned max_decodes, BvGroupCache **ret);
void bv_group_cache_free(BvGroupCache *gc);
uint64_t bv_group_cache_decodes(BvGroupCache *gc); /* groups decoded so far */
size_t bv_group_cache_bytes(BvGroupCache *gc);     /* decoded groups held now */

/* Reads, authenticates and re-hashes the chunk id into buf (room for cap bytes); ret_len gets
 * its length. gc may be NULL (a group is then decoded for this chunk alone). -EUCLEAN if the id
 * is not indexed or its pack is missing, -EBADMSG for damage, -ENOBUFS if the (authentic)
 * chunk is longer than cap. Thread-safe given a per-thread codec. */
int bv_repo_read_chunk(BvRepo *r, BvObjectCodec *codec, BvGroupCache *gc, const uint8_t id[BV_ID_SIZE], void *buf,
                       size_t cap, size_t *ret_len);

/* The same for a chunk whose location the caller looked up already (bv_repo_locate). */
int bv_repo_read_chunk_at(BvRepo *r, BvObjectCodec *codec, BvGroupCache *gc, const uint8_t id[BV_ID_SIZE],
                          const BvLocation *loc, void *buf, size_t cap, size_t *ret_len);
