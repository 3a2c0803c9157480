/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The S3 backend opened at a point in time (backend-s3.h): which version of each key was current
 * then, from one ListObjectVersions of the location. */

#include <stddef.h>
#include <stdint.h>

#include "s3.h"

/* One object as it was at the point in time. */
typedef struct S3PitEntry {
        char *key;
        char *version_id; /* "null" for the version a bucket without versioning wrote */
        uint64_t size;
        int64_t mtime;
} S3PitEntry;

/* The version of every key current at time at (seconds since the epoch; the whole second counts:
 * what was created within it is there), sorted by key; keys whose state then was a delete marker,
 * or that did not exist yet, are left out.
 *
 * When was a version created? S3 says Last-Modified, and AWS keeps it. versitygw 1.8.0's posix
 * backend does not: it copies a replaced (or deleted) version into its versioning folder and that
 * copy's file time, the time it was replaced, becomes the version's Last-Modified, while its
 * delete marker shows the hidden object's time. Its version ids are ULIDs, which carry their
 * creation time in milliseconds: a version id that is a ULID (26 Crockford base32 characters, a
 * time after 2001 and not in the future) gives the entry's time; Last-Modified otherwise. */
int s3_pit_load(bv_s3 *s3, int64_t at, S3PitEntry **ret, size_t *ret_n);
/* The entry of key, or NULL. */
const S3PitEntry *s3_pit_find(const S3PitEntry *v, size_t n, const char *key);
void s3_pit_free(S3PitEntry *v, size_t n);
/* A ULID's time in milliseconds since the epoch, or -1 when s is not a ULID. */
int64_t s3_ulid_ms(const char *s);
