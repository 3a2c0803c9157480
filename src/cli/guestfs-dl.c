/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol table of libguestfs (guestfs-dl.h). */
#define GUESTFS_DL_IMPL
#include "guestfs-dl.h"
#include "macro.h"

GUESTFS_DL_SYMBOLS(BV_DL_DEFINE)

int guestfs_dl_open(void)
{
        static BvDlLib guestfs = {.soname = "libguestfs.so.0"};
        static const BvDlSym syms[] = {GUESTFS_DL_SYMBOLS(BV_DL_ENTRY)};

        return bv_dl_open(&guestfs, syms, ELEMENTSOF(syms));
}
