/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which reader serves which filesystem in `blkvault files`: one row per filesystem type as
 * files-parts.c names it. A filesystem without a row is listed but not read. */
#include <stdio.h>
#include <string.h>

#include "ext-files.h"
#include "files.h"
#include "macro.h"
#include "ntfs-files.h"

static const FilesBackend backends[] = {
        { "ext2", &bv_ext_fs_ops },
        { "ext3", &bv_ext_fs_ops },
        { "ext4", &bv_ext_fs_ops },
        { "ntfs", &bv_ntfs_fs_ops },
        /* the libguestfs appliance's kernel: one boot a command (about a minute under TCG) */
        { "xfs", NULL, files_guestfs_open },
        { "btrfs", NULL, files_guestfs_open },
        { "vfat", NULL, files_guestfs_open },
};

const FilesBackend *files_backend(const char *fstype)
{
        for (size_t i = 0; fstype && i < ELEMENTSOF(backends); i++)
                if (strcmp(backends[i].fstype, fstype) == 0)
                        return &backends[i];
        return NULL;
}

const char *files_fstype_name(const char *type)
{
        const FilesBackend *b = files_backend(type);

        return b ? b->fstype : NULL;
}

const char *files_backend_names(void)
{
        static char names[256];

        if (!names[0])
                for (size_t i = 0; i < ELEMENTSOF(backends); i++) {
                        size_t n = strlen(names);
                        const char *sep = i == 0 ? "" : i + 1 == ELEMENTSOF(backends) ? " and " : ", ";
                        snprintf(names + n, sizeof(names) - n, "%s%s", sep, backends[i].fstype);
                }
        return names;
}
