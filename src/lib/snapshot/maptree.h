/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A snapshot's map: image offset → extent (data chunk id, zero run, hole), stored as a tree
 * of content-addressed MAP objects (docs/FORMAT.md, "Map tree"). Nodes hold lengths, not
 * absolute offsets, and are cut where an entry's id says so, so an unchanged region of the
 * image produces the same nodes (and costs nothing) in the next snapshot. A reader descends
 * from the root, summing lengths, and loads only the nodes on its path.
 */

#include <stddef.h>
#include <stdint.h>

#include "extent.h"
#include "keyring.h"

/* Trees are never taller than this (a reader refuses a taller height as -EBADMSG). */
#define BV_MAP_MAX_HEIGHT 32u

typedef struct BvMapExtent {
        BvExtentKind kind;
        uint64_t offset;
        uint64_t length;
        uint8_t id[BV_ID_SIZE]; /* DATA only */
        uint64_t leaf_offset;   /* where the leaf holding it starts (reader and walk) */
} BvMapExtent;

/* Stores a serialized node as a MAP object and returns its id (the pipeline claims, encodes
 * and packs it). */
typedef int (*bv_map_store_fn)(void *userdata, const void *node, size_t len, uint8_t ret_id[BV_ID_SIZE]);

/* Loads and authenticates a MAP object; *ret_node is malloc'd. */
typedef int (*bv_map_fetch_fn)(void *userdata, const uint8_t id[BV_ID_SIZE], void **ret_node, size_t *ret_len);

typedef struct BvMapBuilder BvMapBuilder;

int bv_map_builder_new(bv_map_store_fn store, void *userdata, BvMapBuilder **ret);
void bv_map_builder_free(BvMapBuilder *b);

/* Appends the next extent (in image order; neighbouring ZERO or HOLE extents are merged). */
int bv_map_builder_add(BvMapBuilder *b, BvExtentKind kind, uint64_t length, const uint8_t id[BV_ID_SIZE]);

/* Flushes every level; an empty image gets an empty leaf as root. */
int bv_map_builder_finish(BvMapBuilder *b, uint8_t ret_root[BV_ID_SIZE], uint32_t *ret_height,
                          uint64_t *ret_size);

/* Reading: thread-safe, with a bounded cache of decoded nodes (cache_nodes 0: a default of
 * 256). -EBADMSG for a height of 0 or above BV_MAP_MAX_HEIGHT. */
typedef struct BvMapReader BvMapReader;

int bv_map_reader_new(const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size, bv_map_fetch_fn fetch,
                      void *userdata, size_t cache_nodes, BvMapReader **ret);
void bv_map_reader_free(BvMapReader *r);

/* Prefetching (call before the first lookup; threads 0: none, the default): when a lookup passes
 * through a branch node, the node's children from the entry it takes on are handed to up to
 * threads prefetchers of the reader's own, which fetch them in parallel (each authenticated by
 * fetch, as a lookup's fetch is, and checked against the tree when a lookup reaches it), a
 * prefetched branch node's children after it; so a walk finds a level's nodes loaded together
 * instead of one after another. Bounded: at most ahead nodes (at most half the cache) queued,
 * being fetched, or prefetched and not looked up yet. A node is fetched once: a lookup that needs
 * a node being fetched (by a prefetcher or another lookup) waits for it. A failed prefetch is
 * dropped; the lookup that needs the node fetches it and returns the error. -EINVAL for threads
 * above BV_MAP_PREFETCH_THREADS_MAX, -EBUSY when already set. */
#define BV_MAP_PREFETCH_THREADS_MAX 16u
int bv_map_reader_prefetch(BvMapReader *r, unsigned threads, size_t ahead);

typedef struct BvMapPrefetchStats {
        uint64_t prefetched;  /* nodes the prefetchers loaded */
        uint64_t failed;      /* prefetches that failed (left to the lookups) */
        uint64_t waits;       /* lookups that waited for a node another thread was fetching */
        size_t in_flight_max; /* most fetches under way at once (counted when a prefetch starts) */
} BvMapPrefetchStats;
void bv_map_reader_prefetch_stats(BvMapReader *r, BvMapPrefetchStats *ret);

/* The first node whose fetch or check failed in a lookup (to name it): 1 and its id, or 0. */
int bv_map_reader_bad_node(BvMapReader *r, uint8_t ret_id[BV_ID_SIZE]);

/* The extent containing offset (< size). -EBADMSG if the tree is inconsistent (lengths do
 * not add up, wrong height), -ERANGE if offset >= size. */
int bv_map_reader_lookup(BvMapReader *r, uint64_t offset, BvMapExtent *ret);

/* From cached nodes only (nothing is fetched): *ret_leaf_start gets the image offset where the
 * leaf holding offset starts, and next[] the starts of up to max leaves after it under the same
 * parent. Returns how many it wrote to next, or -ENOENT when a node on the path, the leaf
 * included, is not cached (also for a tree of height 1, whose only leaf is the root). */
int bv_map_reader_leaf_starts(BvMapReader *r, uint64_t offset, uint64_t *ret_leaf_start, uint64_t *next,
                              size_t max);

/* Walks the whole tree depth first, in image order, checking what the reader checks
 * (-EBADMSG). node_fn sees every node before its entries; if it returns > 0 the node's
 * subtree is skipped (e.g. already seen by garbage collection: identical subtrees recur
 * across snapshots). extent_fn sees every leaf extent, merged as stored. Either may be NULL;
 * a negative return of either stops the walk and is returned. */
typedef int (*bv_map_node_fn)(void *userdata, const uint8_t id[BV_ID_SIZE], unsigned level);
typedef int (*bv_map_extent_fn)(void *userdata, const BvMapExtent *e);
int bv_map_walk(const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size, bv_map_fetch_fn fetch,
                void *fetch_userdata, bv_map_node_fn node_fn, bv_map_extent_fn extent_fn, void *userdata);

/* Prepares a pass over the whole map (root, height): level by level from the root, every node
 * of a level is announced to hint (its object will be read soon: the caller starts its read)
 * before any of them is fetched, so that a level's reads are in flight together instead of one
 * after another. Internal nodes are fetched and checked as a reader checks them (-EBADMSG);
 * leaves are only announced. Stops with -EFBIG, the upper levels announced, when the tree has
 * more than max_nodes nodes. */
typedef void (*bv_map_hint_fn)(void *userdata, const uint8_t id[BV_ID_SIZE]);
int bv_map_prefetch(const uint8_t root[BV_ID_SIZE], uint32_t height, bv_map_fetch_fn fetch, bv_map_hint_fn hint,
                    void *userdata, size_t max_nodes);

/* The ids a snapshot's map uses, for marking them (gc, copy): bv_map_walk with id_fn called for
 * every node (a return > 0: seen before, its subtree is skipped) and for every DATA extent's chunk
 * (a return > 0 means nothing there). A negative return stops the walk and is returned. */
typedef int (*bv_map_id_fn)(void *userdata, const uint8_t id[BV_ID_SIZE]);
int bv_map_walk_ids(const uint8_t root[BV_ID_SIZE], uint32_t height, uint64_t size, bv_map_fetch_fn fetch,
                    void *fetch_userdata, bv_map_id_fn id_fn, void *userdata);

/* Parses one node (exposed for the fuzzer and verify). level receives the node's level. */
int bv_map_node_parse(const void *node, size_t len, unsigned *ret_level, size_t *ret_count, uint64_t *ret_length);
