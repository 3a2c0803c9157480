/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Random access to a snapshot's image: the read path shared by restore and the nbdkit
 * plugin. Opening costs constant time (the snapshot record and the root node); reads load
 * the map nodes and chunks they touch, through a bounded cache of decoded chunks. Thread-safe.
 */

#include <stddef.h>
#include <stdint.h>

#include "extent.h"
#include "repo.h"

typedef struct BvImage BvImage;

typedef struct BvImageOptions {
        size_t cache_bytes;     /* decoded chunk cache; default 64 MiB */
        unsigned readahead;     /* chunks fetched ahead on sequential reads; default 4, 0 off */
        unsigned max_decodes;   /* threads decoding at once (not counting pack reads); 0: no limit */
        bool map_stream;        /* the whole image will be read in order (restore) */
} BvImageOptions;

int bv_image_open(BvRepo *r, const BvSnapshot *snap, const BvImageOptions *opts, BvImage **ret);
void bv_image_free(BvImage *img);

uint64_t bv_image_size(const BvImage *img);

typedef struct BvImageStats {
        uint64_t decodes;       /* chunks read from packs and decoded since opening */
        uint64_t group_decodes; /* compression groups decoded (each serves several chunks) */
        size_t cached_bytes; /* decoded chunks held now */
        size_t group_cached_bytes; /* decoded groups held now */
        uint64_t map_leaves_ahead; /* map leaves loaded ahead of a stream */
        uint64_t map_prefetched; /* map nodes fetched ahead by the map's prefetchers (remote only) */
        size_t map_in_flight_max; /* most map node fetches under way at once */
} BvImageStats;

/* The first map node that a read could not fetch or that did not fit the tree: 1 and its id, or
 * 0 (to name it after -EBADMSG / -EUCLEAN). */
int bv_image_bad_map_node(BvImage *img, uint8_t ret_id[BV_ID_SIZE]);

void bv_image_stats(BvImage *img, BvImageStats *ret);

/* Reads count bytes at offset (within the image). On -EBADMSG (damaged data) or -EUCLEAN
 * (missing pack) *ret_bad_offset is the image offset of the damaged chunk; nothing wrong is
 * ever returned in buf. */
int bv_image_pread(BvImage *img, void *buf, size_t count, uint64_t offset, uint64_t *ret_bad_offset);

/* Calls cb for each extent overlapping [offset, offset+count), clipped to that range. */
int bv_image_extents(BvImage *img, uint64_t offset, uint64_t count,
                     int (*cb)(BvExtentKind kind, uint64_t off, uint64_t len, void *ud), void *userdata);
