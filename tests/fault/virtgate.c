/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * virtgate.so: an LD_PRELOAD library around libvirt's virDomainBackupBegin, the call a running
 * domain's backup starts its job with (and freezes the guest for), so that a test can act at
 * that point without timing anything.
 *
 * With $BV_VIRT_GATE set, the call first creates the file $BV_VIRT_GATE.waiting and waits until
 * the file $BV_VIRT_GATE exists (the guest stays frozen meanwhile: a test checks it, writes in
 * the guest, or kills the program). With $BV_VIRT_BEGIN_FAIL set, the call is made with a backup
 * XML libvirt refuses, so it fails as libvirt fails, with libvirt's own error. With
 * $BV_VIRT_THAW_FAIL set, virDomainFSThaw is called with flags libvirt refuses: it fails with
 * libvirt's error and the guest stays frozen.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "gate.h"

typedef struct _virDomain *virDomainPtr;

int virDomainBackupBegin(virDomainPtr domain, const char *backupXML, const char *checkpointXML, unsigned int flags)
{
        static int (*real)(virDomainPtr, const char *, const char *, unsigned int);
        const char *gate = getenv("BV_VIRT_GATE");

        if (!real)
                real = dlsym(RTLD_NEXT, "virDomainBackupBegin");
        if (gate)
                gate_wait(gate, true);
        if (getenv("BV_VIRT_BEGIN_FAIL"))
                backupXML = "<domainbackup mode='virtgate-refused'/>";
        return real(domain, backupXML, checkpointXML, flags);
}

int virDomainFSThaw(virDomainPtr dom, const char **mountpoints, unsigned int nmountpoints, unsigned int flags)
{
        static int (*real)(virDomainPtr, const char **, unsigned int, unsigned int);

        if (!real)
                real = dlsym(RTLD_NEXT, "virDomainFSThaw");
        if (getenv("BV_VIRT_THAW_FAIL"))
                flags |= 1u << 30; /* "unsupported flags" */
        return real(dom, mountpoints, nmountpoints, flags);
}
