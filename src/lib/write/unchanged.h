/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Unchanged files (backup.c): a regular file whose device, inode, size, mtime and ctime equal
 * those its parent snapshot recorded is taken from the parent's map without being read. */

#include "backup.h"
#include "index.h"

/* The newest snapshot of name whose source is the regular file at src's path, if its recorded
 * identity equals src's, its map is still stored and whole, and opts allow skipping the read
 * (!force_read, and fewer than full_read_every - 1 unread backups in a row since the last
 * read): 1 with *ret_parent set (free with bv_snapshot_free), 0 when the source must be read,
 * or -errno (the snapshot list could not be read). A snapshot whose map names a node or chunk
 * the index no longer locates (repair --force left it out) is not taken: 0, with its hex id in
 * ret_lost_from (2 * BV_SNAPSHOT_ID_SIZE + 1 bytes; untouched otherwise). Nor is one read
 * otherwise than this backup reads (used, what it records of a used-only read): a used-only
 * snapshot lacks the free blocks' data a whole one must hold, and a whole one holds what a
 * used-only one says it skipped; 0, with its id in ret_other_from and whether it was used-only. */
int bv_unchanged_parent(BvRepo *r, BvObjectCodec *codec, BvIndex *index, BvSource *src, const char *name,
                        const BvBackupOptions *opts, const BvSnapshotUsedOnly *used, BvSnapshot **ret_parent,
                        char *ret_lost_from, char *ret_other_from, bool *ret_other_used_only);
