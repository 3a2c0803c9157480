/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the virt room's files share (virt.c, virt-domain.c, virt-backup.c). */

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdarg.h>

#include "macro.h"
#include "virt-dl.h" /* libvirt loaded on first use: every call goes through it */
#include "virt.h"

struct BvVirt {
        virConnectPtr conn;
        char *uri;
        char error[BV_VIRT_ERROR_MAX];
        int error_code;
        unsigned reconnects; /* bv_virt_domain_reconnect made the connection again */
};

struct BvVirtDomain {
        BvVirt *v;
        virDomainPtr dom;
        char *name;
        char uuid[VIR_UUID_STRING_BUFLEN];
};

/* virInitialize and the silent error handler, once per process. 0 or -EIO. */
int bv_virt_init(void);
/* Sets v's error words (printf format) and code, for a failure libvirt did not describe. */
void bv_virt_set_error(BvVirt *v, int code, const char *fmt, ...) _printf_(3, 4);
