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
 * named <32 lowercase hex>.snap are read (temporary files are ignored); one that does not
 * load fails the whole list with its error (-EBADMSG when damaged). */
int bv_snapshot_list(int snapshots_dirfd, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count);
/* The same; on failure, if bad_file is not NULL it names the file that failed to load (empty
 * when the failure was not one file's, e.g. the directory could not be read). */
int bv_snapshot_list_report(int snapshots_dirfd, BvObjectCodec *codec, BvSnapshot ***ret, size_t *ret_count,
                            char bad_file[BV_SNAPSHOT_FILE_MAX]);
void bv_snapshot_list_free(BvSnapshot **list, size_t n);

/* Resolves a user's spec against a list: a full id, a unique id prefix, a name (its newest
 * snapshot) or "latest". -ENOENT if none matches, -ENOTUNIQ for an ambiguous prefix.
 * Precedence: "latest", a full id, an id prefix (lowercase hex) of 4 digits or more, a name, a
 * shorter id prefix. Ids win over names, so a name that looks like another snapshot's id
 * (written before bv_snapshot_name_problem refused such names) never shadows it. */
int bv_snapshot_resolve(BvSnapshot *const *list, size_t n, const char *spec, const BvSnapshot **ret);

/* Snapshot names: at most 255 bytes, no control character (below 0x20, or DEL), not "latest",
 * and not 4 to 32 hex digits (in either case), which could be taken for an id or id prefix. */
#define BV_SNAPSHOT_NAME_MAX 255
#define BV_SNAPSHOT_NAME_HEX_MIN 4
/* NULL if name may name a new snapshot, otherwise why not (a phrase for a message). */
const char *bv_snapshot_name_problem(const char *name);
