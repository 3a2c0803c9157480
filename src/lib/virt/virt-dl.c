/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol tables of libvirt and libvirt-qemu (virt-dl.h). */
#define VIRT_DL_IMPL
#include "virt-dl.h"
#include "macro.h"

VIRT_DL_SYMBOLS(BV_DL_DEFINE)
VIRT_QEMU_DL_SYMBOLS(BV_DL_DEFINE)

int virt_dl_open(void)
{
        static BvDlLib virt = {.soname = "libvirt.so.0"}, qemu = {.soname = "libvirt-qemu.so.0"};
        static const BvDlSym virt_syms[] = {VIRT_DL_SYMBOLS(BV_DL_ENTRY)};
        static const BvDlSym qemu_syms[] = {VIRT_QEMU_DL_SYMBOLS(BV_DL_ENTRY)};
        int r = bv_dl_open(&virt, virt_syms, ELEMENTSOF(virt_syms));

        return r < 0 ? r : bv_dl_open(&qemu, qemu_syms, ELEMENTSOF(qemu_syms));
}
