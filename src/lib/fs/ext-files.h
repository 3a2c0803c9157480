/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * ext2/3/4 read in-process with e2fsprogs' libext2fs, through an io_manager whose reads go to a
 * BvFilesDev (a snapshot, through the read path): no device, no mount, no root. Read-only: the
 * io_manager refuses every write with EROFS. Errors as files-fs.h says; needs_recovery is a
 * journal with changes libext2fs does not replay. Inode numbers are ext's (the root is 2).
 */

#include "files-fs.h"

extern const BvFsOps bv_ext_fs_ops;
