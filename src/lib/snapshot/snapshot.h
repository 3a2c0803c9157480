/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Snapshot records (docs/FORMAT.md, "Snapshots"): snapshots/<32 hex id>.snap, a small file
 * of magic, version and one SNAPSHOT object whose payload is a JSON document. Publishing it
 * is the commit of a backup: it is written last, after everything it points to is durable.
 */

#include <stdint.h>

#include "keyring.h"
#include "object.h"

struct json_object;

#define BV_SNAPSHOT_ID_SIZE 16
/* "<32 hex>.snap" and its NUL */
#define BV_SNAPSHOT_FILE_MAX (2 * BV_SNAPSHOT_ID_SIZE + 5 + 1)

typedef struct BvSnapshot {
        char id[2 * BV_SNAPSHOT_ID_SIZE + 1]; /* hex */
        char *name;
        uint64_t time;        /* unix seconds (UTC) of the backup's start */
        uint64_t size;        /* image bytes */
        uint8_t root[BV_ID_SIZE];
        uint32_t height;
        struct json_object *source; /* {"path","kind","size","probe":{...}} */
        struct json_object *stats;  /* the backup's counters */
        struct json_object *chunker; /* {"kind","min","avg","max"} */
} BvSnapshot;

void bv_snapshot_free(BvSnapshot *s);

/* JSON payload encode/decode (exposed for the fuzzer). decode: -EBADMSG if malformed,
 * -EPROTONOSUPPORT for an unknown version. */
int bv_snapshot_to_json(const BvSnapshot *s, char **ret);
int bv_snapshot_from_json(const char *json, size_t len, BvSnapshot **ret);

/* Writes snapshots/<id>.snap durably; -EEXIST if that id exists. */
int bv_snapshot_save(int snapshots_dirfd, BvObjectCodec *codec, const BvSnapshot *s);
int bv_snapshot_load(int snapshots_dirfd, BvObjectCodec *codec, const char *id, BvSnapshot **ret);

/* Every snapshot, oldest first: by time, then by the modification time of its file (so that
 * backups of the same second keep the order they were written in), then by id. Only files
 * named <32 lowercase hex>.snap are read (temporary files are ignored). Damage is contained: a
 * record that does not load (damaged, -EBADMSG; unknown version; a symbolic link, -ELOOP; not a
 * regular file, -EBADFD; unreadable) is skipped, and the others are listed. Only what is not one
 * record's fault (the directory, memory) fails the list. */
int bv_snapshot_list(int snapshots_dirfd, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count);
/* The same, calling skip (if not NULL) with the file name and error of each record skipped. */
typedef void (*bv_snapshot_skip_fn)(const char *file, int error, void *userdata);
int bv_snapshot_list_report(int snapshots_dirfd, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count,
                            bv_snapshot_skip_fn skip, void *userdata);
void bv_snapshot_list_free(BvSnapshot **list, size_t n);

/* Resolves a user's spec against a list: a full id, a unique id prefix, a name (its newest
 * snapshot) or "latest". -ENOENT if none matches, -ENOTUNIQ for an ambiguous prefix.
 * Precedence: "latest", a full id, a name, an id prefix (lowercase hex). */
int bv_snapshot_resolve(BvSnapshot *const *list, size_t n, const char *spec, const BvSnapshot **ret);
