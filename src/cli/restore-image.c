/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * restore into an existing disk image, in place (--in-place, and --libvirt for a domain's disk):
 * the image is written through qemu-nbd (bv_restore_image), so a qcow2 stays a qcow2 with its
 * owner and mode, and a raw file keeps its inode; never replaced by a new file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "restore.h"
#include "source.h"

int restore_image_failure(int r, const BvSnapshot *snap, const char *path, const char *format,
                         const BvRestoreStats *stats, const char *detail)
{
        char a[32], b[32];

        if (r == -EMSGSIZE) {
                log_error("the %s image '%s' is %s (%llu bytes) but snapshot %.8s is %s (%llu bytes): nothing was "
                          "written; resize the image first (qemu-img resize -f %s%s '%s' %llu) and restore again",
                          format, path, format_bytes(stats->dest_size, a), (unsigned long long)stats->dest_size,
                          snap->id, format_bytes(snap->size, b), (unsigned long long)snap->size, format,
                          stats->dest_size > snap->size ? " --shrink" : "", path, (unsigned long long)snap->size);
                return EXIT_ERROR;
        }
        if (r == -EBUSY) {
                log_error("cannot write the %s image '%s': a running VM uses it (qemu-nbd: %s); shut the VM down "
                          "first; nothing was written", format, path, detail);
                return EXIT_ERROR;
        }
        if (r == -ENOPKG) {
                log_error("cannot write the %s image '%s': qemu-nbd does not run (install qemu-utils)", format, path);
                return EXIT_ERROR;
        }
        if (r == -EBADMSG && detail[0]) {
                log_error("cannot write the %s image '%s': qemu cannot open it: %s; nothing was written", format,
                          path, detail);
                return EXIT_ERROR;
        }
        if (r == -EROFS) {
                log_error("cannot write the %s image '%s': qemu-nbd serves it read-only", format, path);
                return EXIT_ERROR;
        }
        return EXIT_OK;
}

int restore_image_format(const char *path, const char **ret_format)
{
        const char *format = "raw";
        int r = bv_source_detect_image(path, &format);
        if (r < 0)
                return r;
        *ret_format = format;
        return 0;
}
