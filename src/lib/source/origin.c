/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where a snapshot came from: the host, the absolute path, and a block device's stable name. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "source.h"

/* The first link in dir that resolves to the device rdev, as "dir/link"; by-id links of
 * partitions of the same disk resolve to other devices and are not taken. */
static int find_link(const char *dir, dev_t rdev, char *buf, size_t size)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        int r = -ENOENT;

        if (!d)
                return -errno;
        while ((e = readdir(d))) {
                char p[PATH_MAX];
                struct stat st;
                if (e->d_name[0] == '.')
                        continue;
                /* "wwn-" names repeat what a vendor name says less readably: take them last */
                if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p))
                        continue;
                if (stat(p, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != rdev)
                        continue;
                if (r == 0 && strncmp(e->d_name, "wwn-", 4) == 0)
                        continue;
                snprintf(buf, size, "%s", p);
                r = 0;
        }
        closedir(d);
        return r;
}

int bv_source_stable_name(const char *path, char *buf, size_t size)
{
        static const char *const dirs[] = { "/dev/disk/by-id", "/dev/disk/by-uuid", "/dev/disk/by-partuuid" };
        struct stat st;

        if (stat(path, &st) < 0)
                return -errno;
        if (!S_ISBLK(st.st_mode))
                return -ENOTBLK;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                if (find_link(dirs[i], st.st_rdev, buf, size) == 0)
                        return 0;
        return -ENOENT;
}
