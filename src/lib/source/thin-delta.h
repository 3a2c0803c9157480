/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * LVM thin deltas: the XML that thin_delta (thin-provisioning-tools) prints for two thin devices
 * of one pool (--snap1 OLD --snap2 NEW, with or without --verbose), read into the byte ranges of
 * the new device that may differ from the old one. "same" ranges and ranges neither device maps
 * (zeroes in both) did not change; "different", "right_only" (newly mapped) and "left_only" (no
 * longer mapped: zeroes now) did.
 */

#include <stddef.h>
#include <stdint.h>

#include "source.h"

typedef struct BvThinDelta {
        uint64_t block_bytes; /* the pool's data block: data_block_size sectors of 512 bytes */
        uint64_t data_blocks; /* the pool's size in data blocks (nr_data_blocks); 0: unknown */
        /* Where the last range that the new device maps ends, in blocks: it holds at least these
         * (what only the old one mapped may lie past its end: a thin LV can shrink). */
        uint64_t blocks;
        uint64_t left, right; /* the thin device ids compared (--snap1, --snap2) */
        BvByteRange *changed;     /* in order, merged, in bytes */
        size_t n_changed;
} BvThinDelta;

/* Parses thin_delta's output (text of len bytes, not NUL-terminated). 0, -ENOMEM, or -EBADMSG
 * for anything else than one superblock (with data_block_size and nr_data_blocks) holding one
 * diff of known elements, with ranges in order that do not overlap, whose bytes fit in 64 bits,
 * whose data blocks (--verbose) lie within nr_data_blocks, and that map no more blocks of either
 * device than nr_data_blocks (unless it is 0, as thin_delta --metadata-snap prints it: the
 * kernel wipes the space maps of the metadata snapshot). *ret is untouched on failure. */
int bv_thin_delta_parse(const char *text, size_t len, BvThinDelta *ret);
void bv_thin_delta_done(BvThinDelta *d);

/* The file or block device at path, thin device device_id of its pool, read where d (thin_delta
 * --snap1 OLD --snap2 device_id) says it changed; the rest is delivered as UNCHANGED. d NULL:
 * everything is read (there is no delta, but the snapshot records the device for the next one).
 * Its changed_map is "lvm-thin:device_id", and the parent must have recorded "lvm-thin:OLD" (d
 * NULL: the same device). uuid and base_uuid, the LV uuids of the two devices (NULL: not known),
 * follow the ids ("lvm-thin:ID:UUID"): a pool reuses the id of a removed device, an LV uuid is
 * never reused. Errors: those of open, -EINVAL for another kind of file or a delta of another
 * device (d's right is not device_id), -ERANGE when d does not fit the device: ranges it maps
 * reach past the block that holds its last byte, or its size is not whole 512-byte sectors. */
int bv_source_open_thin(const char *path, uint64_t device_id, const char *uuid, const BvThinDelta *d,
                        const char *base_uuid, const BvSourceOptions *opts, BvSource **ret);
