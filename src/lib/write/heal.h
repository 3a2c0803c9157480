/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Before a backup publishes its snapshot (backup.c; docs/LIFECYCLE.md, "Why it is safe"): a gc
 * that condemned since the backup's lease was taken may have dropped from the index entries the
 * backup deduplicated against. Their packs stay (finalize waits for the lease), so they are put
 * back into the index from the condemned lists, and the snapshot reads at once. */

#include <stdint.h>

#include "index.h"
#include "object.h"
#include "repo.h"

/* Call with locks/commit held, after the backup's index is flushed. If gc/epoch differs from the
 * lease's (higher, or lower: removed or rolled back) or a condemned list waits for a later epoch
 * than the lease's, refreshes the index, walks the map (root, height, size) and writes every id it
 * references that the index lacks, located by a condemned list gc/<16 hex>.idx, as a new durable
 * index segment; returns their number (0 when the epoch is the lease's and no list is later: then
 * only gc/epoch and the names in gc/ are read).
 * -EUCLEAN if an id is neither indexed nor in a condemned list. */
int bv_backup_heal(BvRepo *repo, BvObjectCodec *codec, const uint8_t root[BV_ID_SIZE], uint32_t height,
                   uint64_t size);

/* The core of the above for a repository this process holds no BvRepo of (a copy's remote DST):
 * every id of the map (root, height, size; its nodes read by fetch) that index lacks and one of
 * the lists names is added to index from there, and the index flushed; returns their number.
 * -EUCLEAN if an id is in neither. */
typedef int (*bv_heal_fetch_fn)(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len);
int bv_heal_map(BvIndex *index, BvIndexList **lists, size_t nlists, bv_heal_fetch_fn fetch, void *userdata,
                const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size);

/* Opens every condemned list gc/<16 hex>.idx (one finalized meanwhile is left out), appending to
 * *ret (*ret_n of them); free with bv_condemned_lists_free, also after a failure. -ENOENT
 * without gc/. */
int bv_condemned_lists_load(BvRepo *repo, BvIndexList ***ret, size_t *ret_n);
/* The same, of the condemned lists at backend b (a remote repository's gc/). */
int bv_condemned_lists_load_backend(BvBackend *b, BvIndexList ***ret, size_t *ret_n);
void bv_condemned_lists_free(BvIndexList **lists, size_t n);
