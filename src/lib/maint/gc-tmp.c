/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Temporary files that interrupted writers left (docs/LIFECYCLE.md, "Temporary files"): on a
 * filesystem without O_TMPFILE a pack, index segment, record or lease is written as
 * .tmp-<16 hex> beside its final name and renamed into place; a writer that dies first leaves it.
 * Its writer holds a flock on it while it lives (util/fileio.h), so gc deletes only the ones it
 * can lock.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "fileio.h"
#include "gc-internal.h"
#include "macro.h"

static const char *const tmp_dirs[] = { ".", "packs", "index", "snapshots", "gc", "leases", "keys" };

static int reap_dir(Gc *g, const char *path)
{
        DIR *d;
        int r = bv_opendir_beneath(g->dirfd, path, &d);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return gc_note(g, path, true, r);
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                uint64_t bytes = 0;
                if (strncmp(de->d_name, ".tmp-", 5) != 0)
                        continue;
                r = bv_tmpfile_reap(dirfd(d), de->d_name, &bytes);
                if (r > 0) {
                        g->st->tmp_deleted++;
                        g->st->tmp_bytes_deleted += bytes;
                }
        }
        if (r >= 0 && errno)
                r = negative_errno();
        closedir(d);
        return r < 0 ? gc_note(g, path, true, r) : 0;
}

int gc_reap_tmp(Gc *g)
{
        int r = 0;
        if (g->remote) /* a remote repository's writers spool locally: nothing temporary there */
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(tmp_dirs) && r >= 0; i++)
                r = reap_dir(g, tmp_dirs[i]);
        return r;
}
