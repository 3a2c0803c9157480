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
 * partitions of the same disk resolve to other devices and are not taken. With name, only a
 * link of that name: a by-uuid link whose name is not the device's UUID is stale (left by a
 * filesystem the device held before). */
static int find_link(const char *dir, dev_t rdev, const char *name, char *buf, size_t size)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        int r = -ENOENT;

        if (!d)
                return -errno;
        while ((e = readdir(d))) {
                char p[PATH_MAX];
                struct stat st;
                if (e->d_name[0] == '.' || (name && strcmp(e->d_name, name) != 0))
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
        BvProbe probe = {};
        int r = -ENOENT;
        for (size_t i = 0; i < ELEMENTSOF(dirs) && r < 0; i++) {
                const char *name = NULL;
                if (strcmp(dirs[i], "/dev/disk/by-uuid") == 0) {
                        if (bv_source_probe(path, &probe) < 0 || !probe.uuid)
                                continue;
                        name = probe.uuid;
                }
                r = find_link(dirs[i], st.st_rdev, name, buf, size) == 0 ? 0 : -ENOENT;
        }
        bv_probe_done(&probe);
        return r;
}
