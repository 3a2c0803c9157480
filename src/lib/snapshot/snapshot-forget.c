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

/* Whether snapshots/<name> is there, whatever it is (a marker that is not a regular file
 * still protects). */
static int exists(BvBackend *b, const char *name)
{
        BvObjEntry e;
        int r = bv_backend_stat(b, BV_KIND_SNAPSHOT, name, &e);

        if (r == -ENOENT)
                return 0;
        if (r == 0 || r == -ELOOP || r == -EBADFD)
                return 1;
        return r;
}

/* Fills in the file names of snapshot id; returns whether it is protected (1) or not (0). */
static int lookup(BvBackend *b, const char *id, char snap[64], char protect[64])
{
        int r = names(id, snap, protect);
        return r < 0 ? r : exists(b, protect);
}

int bv_snapshot_is_protected(BvBackend *b, const char *id)
{
        char snap[64], protect[64];
        return lookup(b, id, snap, protect);
}

int bv_snapshot_protect(BvBackend *b, const char *id, bool on)
{
        char snap[64], protect[64];
        int protected = lookup(b, id, snap, protect);
        if (protected < 0)
                return protected;
        int r = exists(b, snap);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        if (protected == (int)on)
                return 0;
        if (on)
                return bv_backend_put(b, BV_KIND_SNAPSHOT, protect, "", 0, BV_PUT_CREATE);
        return bv_backend_remove(b, BV_KIND_SNAPSHOT, protect);
}

int bv_snapshot_forget(BvBackend *b, const char *id, bool force)
{
        char snap[64], protect[64];
        int r = lookup(b, id, snap, protect);
        if (r < 0)
                return r;
        if (r > 0 && !force)
                return -EPERM;
        r = bv_backend_remove(b, BV_KIND_SNAPSHOT, snap);
        if (r < 0)
                return r;
        /* the marker goes after the record: a crash between leaves a stray marker, which is ignored.
         * So is one that cannot be removed (a directory someone made): the snapshot is forgotten. */
        (void)bv_backend_remove(b, BV_KIND_SNAPSHOT, protect);
        return 0;
}
