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
        uint64_t left, right; /* the thin device ids compared (--snap1, --snap2) */
        BvByteRange *changed;     /* in order, merged, in bytes */
        size_t n_changed;
} BvThinDelta;

/* Parses thin_delta's output (text of len bytes, not NUL-terminated). 0, -ENOMEM, or -EBADMSG
 * for anything else than one superblock holding one diff of known elements, with ranges in
 * order that do not overlap and whose bytes fit in 64 bits. *ret is untouched on failure. */
int bv_thin_delta_parse(const char *text, size_t len, BvThinDelta *ret);
void bv_thin_delta_done(BvThinDelta *d);
