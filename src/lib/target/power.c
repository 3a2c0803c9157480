/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drive.h"
#include "fileio.h"
#include "macro.h"
#include "mounts.h"
#include "power.h"
#include "process.h"

int bv_drive_whole_disk(const char *dev, char *disk, size_t size)
{
        char real[PATH_MAX], sys[PATH_MAX + 64], link[PATH_MAX];
        if (!realpath(dev, real))
                return -errno;
        const char *name = strrchr(real, '/') + 1;
        snprintf(sys, sizeof(sys), "/sys/class/block/%s", name);
        ssize_t n = readlink(sys, link, sizeof(link) - 1);
        if (n < 0)
                return -errno;
        link[n] = '\0';
        snprintf(sys, sizeof(sys), "/sys/class/block/%s/partition", name);
        if (access(sys, F_OK) == 0) {
                /* .../block/sdb/sdb1: the parent directory is the disk */
                *strrchr(link, '/') = '\0';
                name = strrchr(link, '/') + 1;
        }
        if ((size_t)snprintf(disk, size, "%s", name) >= size)
                return -ENAMETOOLONG;
        return 0;
}

int bv_drive_power_off(const char *dev)
{
        char disk[NAME_MAX + 1], path[PATH_MAX], out[512];
        int r = bv_drive_whole_disk(dev, disk, sizeof(disk));
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/dev/%s", disk);
        if (strncmp(disk, "loop", 4) == 0)
                return bv_loop_detach(path);
        if (bv_have_command("udisksctl")) {
                char *argv[] = { (char *)"udisksctl", (char *)"power-off", (char *)"--no-user-interaction",
                                 (char *)"-b", path, NULL };
                if (bv_target_run(argv, out, sizeof(out)) == 0)
                        return 0;
        }
        snprintf(path, sizeof(path), "/sys/block/%s/device/delete", disk);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -EOPNOTSUPP : -errno;
        return bv_write_all(fd, "1\n", 2);
}
