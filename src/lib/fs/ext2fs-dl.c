/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol tables of libext2fs and libcom_err (ext2fs-dl.h). */
#define EXT2FS_DL_IMPL
#include "ext2fs-dl.h"
#include "macro.h"

EXT2FS_DL_SYMBOLS(BV_DL_DEFINE)
COM_ERR_DL_SYMBOLS(BV_DL_DEFINE)

int ext2fs_dl_open(void)
{
        static BvDlLib ext2fs = {.soname = "libext2fs.so.2"}, com_err = {.soname = "libcom_err.so.2"};
        static const BvDlSym ext2fs_syms[] = {EXT2FS_DL_SYMBOLS(BV_DL_ENTRY)};
        static const BvDlSym com_err_syms[] = {COM_ERR_DL_SYMBOLS(BV_DL_ENTRY)};
        int r = bv_dl_open(&com_err, com_err_syms, ELEMENTSOF(com_err_syms));

        return r < 0 ? r : bv_dl_open(&ext2fs, ext2fs_syms, ELEMENTSOF(ext2fs_syms));
}
