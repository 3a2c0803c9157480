/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rename-snapshot REPO ID NAME [TIME]: rewrites the record of snapshot ID of an unencrypted
 * repository with another name (and time, in unix seconds), bypassing the rules for new names
 * (bv_snapshot_name_problem). The tests use it to make repositories like those written before
 * the rules existed, and snapshots at chosen times for prune.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "object.h"
#include "repo.h"
#include "snapshot.h"

int main(int argc, char **argv)
{
        BvObjectCodec *codec = NULL;
        BvSnapshot *s = NULL;
        BvRepo *repo = NULL;
        char file[128];
        int r;

        if (argc != 4 && argc != 5) {
                fprintf(stderr, "usage: rename-snapshot REPO ID NAME [TIME]\n");
                return 2;
        }
        r = bv_repo_open(argv[1], NULL, BV_OPEN_WRITE, &repo);
        if (r >= 0)
                r = bv_object_codec_new(bv_repo_keyring(repo), 3, &codec);
        r = r < 0 ? r : bv_snapshot_load(bv_repo_backend(repo), codec, argv[2], &s);
        if (r >= 0) {
                free(s->name);
                s->name = strdup(argv[3]);
                if (argc == 5)
                        s->time = strtoull(argv[4], NULL, 10);
                snprintf(file, sizeof(file), "%s.snap", argv[2]);
                r = !s->name ? -ENOMEM : bv_backend_remove(bv_repo_backend(repo), BV_KIND_SNAPSHOT, file);
        }
        if (r >= 0)
                r = bv_snapshot_save(bv_repo_backend(repo), codec, s);
        bv_snapshot_free(s);
        bv_object_codec_free(codec);
        bv_repo_close(repo);
        if (r < 0) {
                fprintf(stderr, "rename-snapshot: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
