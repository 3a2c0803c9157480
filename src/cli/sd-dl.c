/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The symbol table of libsystemd (sd-dl.h). */
#define SD_DL_IMPL
#include "cli.h"
#include "macro.h"
#include "sd-dl.h"

SD_DL_SYMBOLS(BV_DL_DEFINE)

int sd_dl_open(void)
{
        static BvDlLib systemd = {.soname = "libsystemd.so.0"};
        static const BvDlSym syms[] = {SD_DL_SYMBOLS(BV_DL_ENTRY)};
        static bool warned;

        int r = bv_dl_open(&systemd, syms, ELEMENTSOF(syms));
        if (r < 0 && !warned) {
                warned = true;
                log_full(CLI_LOG_WARNING, r, "no messages to the journal or the service manager");
        }
        return r;
}
