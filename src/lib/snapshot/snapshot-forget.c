/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "snapshot-forget.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

#define SNAP_ID_LEN 32

static int names(const char *id, char snap[64], char protect[64])
{
        size_t n = 0;
        for (; id[n]; n++)
                if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
                        return -EINVAL;
        if (n != SNAP_ID_LEN)
                return -EINVAL;
        snprintf(snap, 64, "%s.snap", id);
        snprintf(protect, 64, "%s.protect", id);
        return 0;
}

static int exists(int dirfd, const char *name)
{
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return 1;
        return errno == ENOENT ? 0 : -errno;
}

/* Fills in the file names of snapshot id; returns whether it is protected (1) or not (0). */
static int lookup(int snapshots_dirfd, const char *id, char snap[64], char protect[64])
{
        int r = names(id, snap, protect);
        return r < 0 ? r : exists(snapshots_dirfd, protect);
}

int bv_snapshot_is_protected(int snapshots_dirfd, const char *id)
{
        char snap[64], protect[64];
        return lookup(snapshots_dirfd, id, snap, protect);
}

int bv_snapshot_protect(int snapshots_dirfd, const char *id, bool on)
{
        char snap[64], protect[64];
        int protected = lookup(snapshots_dirfd, id, snap, protect);
        if (protected < 0)
                return protected;
        int r = exists(snapshots_dirfd, snap);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        if (protected == (int)on)
                return 0;
        if (on)
                return bv_write_file_durable(snapshots_dirfd, protect, "", 0, false);
        return unlinkat(snapshots_dirfd, protect, 0) < 0 ? -errno : bv_fsync_dir(snapshots_dirfd);
}

int bv_snapshot_forget(int snapshots_dirfd, const char *id, bool force)
{
        char snap[64], protect[64];
        int r = lookup(snapshots_dirfd, id, snap, protect);
        if (r < 0)
                return r;
        if (r > 0 && !force)
                return -EPERM;
        if (unlinkat(snapshots_dirfd, snap, 0) < 0)
                return -errno;
        r = bv_fsync_dir(snapshots_dirfd);
        if (r < 0)
                return r;
        /* the marker goes after the record: a crash between leaves a stray marker, which is ignored.
         * So is one that cannot be unlinked (a directory someone made): the snapshot is forgotten. */
        (void)unlinkat(snapshots_dirfd, protect, 0);
        return 0;
}
