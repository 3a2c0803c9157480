/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * NTFS read in-process with libntfs-3g, through device operations whose reads go to a BvFilesDev
 * (a snapshot, through the read path): no device, no mount, no root. Read-only: the volume is
 * mounted read-only and the device refuses every write with EROFS. What each file is, and its
 * mode, owner, size and times, are what ntfs-3g's FUSE driver shows without a user mapping:
 * owner 0:0, mode 0777, symbolic links from Interix files and reparse points (junctions, Windows
 * and WSL links), fifos and sockets from Interix and WSL files, system files hidden. A named data
 * stream is read as "PATH:NAME" when no file of that name exists. Compressed and sparse files are
 * read by the library; holes of sparse ones are handed on as holes. needs_recovery is a volume
 * marked dirty (not cleanly unmounted). Errors as files-fs.h says; encrypted files are
 * -EPROTONOSUPPORT.
 */

#include "files-fs.h"

extern const BvFsOps bv_ntfs_fs_ops;
