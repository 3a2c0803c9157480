/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol table of libcryptsetup (drive-dl.h). */
#define CRYPTSETUP_DL_IMPL
#include "drive-dl.h"
#include "macro.h"

CRYPTSETUP_DL_SYMBOLS(BV_DL_DEFINE)

int drive_dl_open(void)
{
        static BvDlLib cryptsetup = {.soname = "libcryptsetup.so.12"};
        static const BvDlSym syms[] = {CRYPTSETUP_DL_SYMBOLS(BV_DL_ENTRY)};

        return bv_dl_open(&cryptsetup, syms, ELEMENTSOF(syms));
}
