/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol table of libntfs-3g (ntfs-dl.h). */
#define NTFS_DL_IMPL
#include "macro.h"
#include "ntfs-dl.h"

NTFS_DL_SYMBOLS(BV_DL_DEFINE)

int ntfs_dl_open(void)
{
        static BvDlLib ntfs = {.soname = "libntfs-3g.so.89"};
        static const BvDlSym syms[] = {NTFS_DL_SYMBOLS(BV_DL_ENTRY)};

        return bv_dl_open(&ntfs, syms, ELEMENTSOF(syms));
}
