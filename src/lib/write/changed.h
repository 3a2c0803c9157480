/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Changed-block sources (backup.c): pairing a source's change map (a qemu dirty bitmap) with the
 * parent snapshot whose map fills the ranges it calls unchanged, and checking a map against a
 * whole read of the source.
 */

#include "backup.h"
#include "index.h"
#include "parent-map.h"

/*
 * The parent for a changed-block source (bv_source_changed_map(src) not NULL): the newest
 * snapshot of name. It is paired (1, *ret_parent set, the source may report UNCHANGED ranges)
 * when it is of the same source, was read with the same change map, has the same size and its
 * map is stored, and opts ask for no whole read (force_read, full_read_every). Otherwise 0 and
 * why, in reason (a phrase); *ret_parent is then still set when the parent could have been
 * paired (a whole read was asked for): the map can be checked against it. -errno when the
 * snapshot list cannot be read. Free *ret_parent with bv_snapshot_free.
 */
int bv_changed_parent(BvRepo *r, BvObjectCodec *codec, BvIndex *index, BvSource *src, const char *name,
                      const BvBackupOptions *opts, BvSnapshot **ret_parent, char *reason, size_t reason_size);

/*
 * After a whole read of a changed-block source: every extent of parent that lies wholly in a
 * range the source's map called unchanged is compared with the new map (root, height, size) and,
 * where the two differ, with the source read again; *ret_checked gets the bytes compared,
 * *ret_wrong those that had changed although the map said they had not.
 */
int bv_changed_check(BvRepo *r, BvSource *src, const BvSnapshot *parent, const uint8_t root[BV_ID_SIZE],
                     uint32_t height, uint64_t size, uint64_t *ret_checked, uint64_t *ret_wrong);
