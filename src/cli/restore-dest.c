/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where restore writes: standard output, a file replaced only with --force, a device checked to
 * be large enough before anything is written and, when libblkid finds a filesystem, a LUKS header
 * or a partition table on it, written only with --force. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "drive.h"
#include "fileio.h"
#include "image.h"
#include "timeutil.h"

#define STREAM_BLOCK (4u << 20)

DEFINE_TRIVIAL_CLEANUP_FUNC(BvImage, bv_image_free)

int restore_to_stdout(BvRepo *repo, const BvSnapshot *snap, Progress *progress, uint64_t *ret_bad_offset)
{
        _cleanup_(bv_image_freep) BvImage *img = NULL;
        BvImageOptions io = { .readahead = 16 };
        uint64_t start = bv_now_monotonic_ns(), size = snap->size;
        int r;

        if (isatty(STDOUT_FILENO)) {
                log_error("standard output is a terminal: redirect it to a file or a pipe to restore to '-'");
                return -ENOTTY;
        }
        r = bv_image_open(repo, snap, &io, &img);
        if (r < 0)
                return r;
        _cleanup_free_ uint8_t *buf = malloc(STREAM_BLOCK);
        if (!buf)
                return -ENOMEM;
        for (uint64_t off = 0; off < size;) {
                size_t n = (size_t)MIN((uint64_t)STREAM_BLOCK, size - off);
                r = bv_image_pread(img, buf, n, off, ret_bad_offset);
                if (r < 0)
                        return r;
                r = bv_write_all(STDOUT_FILENO, buf, n);
                if (r < 0)
                        return r;
                off += n;
                /* a pipe gets every byte, holes too: all of it is work */
                progress_update(&(BvProgress){ .done = off, .total = size, .work_done = off, .work_total = size,
                                               .elapsed_ns = bv_now_monotonic_ns() - start }, progress);
        }
        return 0;
}

int device_holds(const char *dev, char *what, size_t size)
{
        BvDriveProbe pr;
        int r = bv_drive_probe(dev, &pr);
        if (r < 0)
                return r;
        if (pr.pttype[0])
                snprintf(what, size, "a %s partition table", pr.pttype);
        else if (pr.type[0])
                snprintf(what, size, "%s (UUID %s)", pr.type, pr.uuid[0] ? pr.uuid : "none");
        return pr.pttype[0] || pr.type[0];
}

/* One wrong letter in /dev/sdX must not destroy a disk: a device on which libblkid finds
 * something is refused, naming it, as target format does. */
static int check_device_blank(const char *dest)
{
        char what[128];
        int r = device_holds(dest, what, sizeof(what));
        if (r < 0)
                return log_error_errno(r, "cannot probe '%s'", dest);
        if (r > 0)
                log_error("'%s' holds %s; refusing to restore over it (--force overwrites it)", dest, what);
        return r > 0 ? EXIT_ERROR : EXIT_OK;
}

int restore_check_dest(const char *dest, const BvSnapshot *snap, bool force, bool *ret_replace)
{
        struct stat st;
        *ret_replace = false;
        if (stat(dest, &st) < 0)
                return EXIT_OK; /* a new file */
        if (!S_ISBLK(st.st_mode)) {
                if (force && S_ISREG(st.st_mode)) {
                        *ret_replace = true; /* written beside it, renamed over it at the end */
                        return EXIT_OK;
                }
                if (S_ISREG(st.st_mode))
                        log_error("'%s' exists: restore writes a new file (use --force to replace it)", dest);
                else
                        log_error("'%s' exists and is neither a file nor a block device", dest);
                return EXIT_ERROR;
        }
        /* O_EXCL: fails while the device is mounted or held (the write's open would fail the same
         * way), which --force does not change: said before what is on it */
        _cleanup_close_ int fd = open(dest, O_RDONLY | O_EXCL | O_CLOEXEC | O_NOCTTY);
        uint64_t size;
        int r = fd < 0 ? -errno : bv_fd_size(fd, &size);
        if (r == -EBUSY)
                return log_device_in_use(dest, "nothing was written");
        if (r < 0)
                return log_error_errno(r, "cannot open '%s'", dest);
        if (size < snap->size) {
                char a[32], b[32];
                log_error("'%s' is too small for snapshot %.8s: the device has %llu bytes (%s), the image %llu "
                          "bytes (%s); nothing was written", dest, snap->id, (unsigned long long)size,
                          format_bytes(size, a), (unsigned long long)snap->size, format_bytes(snap->size, b));
                return EXIT_TOO_SMALL;
        }
        return force ? EXIT_OK : check_device_blank(dest);
}

int restore_temp_name(const char *dest, char *buf, size_t size)
{
        for (unsigned i = 0; i < 100; i++) {
                uint32_t rnd = (uint32_t)(bv_now_monotonic_ns() ^ ((uint64_t)getpid() << 16)) + i * 7919u;
                if (snprintf(buf, size, "%s.blkvault-%08x", dest, rnd) >= (int)size)
                        return -ENAMETOOLONG;
                if (access(buf, F_OK) < 0 && errno == ENOENT)
                        return 0;
        }
        return -EEXIST;
}
