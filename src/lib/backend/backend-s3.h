/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The S3 backend (backend.h over s3.h): a repository is the keys below PREFIX/ of a bucket,
 * s3://BUCKET[/PREFIX], each object at the same relative key as in a local repository.
 *
 *   put          one PUT (multipart above the client's threshold); create-only puts send
 *                If-None-Match: * where the probe at open found the store honours it, else a
 *                HEAD goes first (racy, but every create-only kind is content-addressed or
 *                randomly named). What the probe found is remembered for a day in the
 *                directory below (conditional-put: the endpoint and bucket, and the answer), so
 *                the opens of that day make no probe
 *   get, stat    GET, HEAD; list: ListObjectsV2 of PREFIX/<folder>/, 1,000 keys a request
 *   remove       DELETE; on S3 deleting an absent object succeeds, and so does this
 *   readers      HEAD for the size, a ranged GET per read; reader_fd: the whole object from the
 *                local cache (objects/ of the directory below, named by ETag and size, at most
 *                $BLKVAULT_S3_CACHE_MAX bytes, default 1 GiB, least recently used out first),
 *                else one GET, kept there
 *   writers      a spool file (O_TMPFILE under $TMPDIR), PUT from it at commit
 *   locks        flock(2) on files of a local directory for this bucket and prefix
 *                ($BLKVAULT_CACHE_DIR, else $XDG_CACHE_HOME/blkvault, else /var/cache/blkvault
 *                for root and ~/.cache/blkvault otherwise; then s3/BUCKET/PREFIX): they
 *                serialise the processes of this machine only
 *   leases       leases/<16 hex>.lease, put again by a thread of its own every heartbeat
 *                interval while held; alive while its Last-Modified is younger than the grace
 *                (BV_S3_LEASE_GRACE_S): a holder that died stops refreshing it
 *   Object Lock  every put with retention when asked (bv_backend_s3_set_object_lock)
 *   point in time  opened as at a time (bv_backend_s3_open_at): one ListObjectVersions at open
 *                finds each key's version then (the newest not newer; none when that is a delete
 *                marker), and every read asks for that version; writes are -EROFS. Deleting
 *                every object (with the same credentials) leaves the versions, and this reads them.
 */

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "s3.h"

#define BV_S3_LEASE_HEARTBEAT_S 60
#define BV_S3_LEASE_GRACE_BEATS 5
#define BV_S3_LEASE_GRACE_S (BV_S3_LEASE_GRACE_BEATS * BV_S3_LEASE_HEARTBEAT_S)

/* The heartbeat interval in seconds: BV_S3_LEASE_HEARTBEAT_S, or $BLKVAULT_S3_LEASE_HEARTBEAT
 * (1..3600; the tests' knob). A lease is alive while its Last-Modified is younger than
 * BV_S3_LEASE_GRACE_BEATS intervals: every process that uses one repository must use the same
 * value (docs/LIFECYCLE.md, "gc on S3"). */
int bv_s3_lease_heartbeat_s(void);

/* Whether no gc can have taken lease (an S3 lease of this process) for dead yet: the last put of
 * it that succeeded was sent less than half the grace ago, and each put that succeeded returned less
 * than half the grace after the one before it was sent, by this machine's CLOCK_BOOTTIME (which
 * counts a suspension). A Last-Modified is no older than its put's send and no newer than its
 * answer, so a gc, which measures the lease's age by the storage's clock, can have found it older
 * than the grace only if that clock ran twice as fast as this one (docs/LIFECYCLE.md, "The check
 * before the first record"). false for any other lease. */
bool bv_backend_s3_lease_fresh(BvBackendLease *lease);

/* Opens s3://BUCKET[/PREFIX] with the endpoint and credentials of the environment (s3-conf.h);
 * the message of a failure goes to errbuf (errlen bytes; may be NULL). */
int bv_backend_s3_open(const char *location, bool create, BvBackend **ret, char *errbuf, size_t errlen);

/* Opens location read-only as it was at time at (seconds since the epoch), from the object
 * versions of a bucket with versioning (Object Lock turns it on). */
int bv_backend_s3_open_at(const char *location, int64_t at, BvBackend **ret, char *errbuf, size_t errlen);

/* A new fd of b's local directory on this machine (the locks' and the cache's, above), for
 * other rooms' caches of this location in folders of their own; -EOPNOTSUPP for a backend that
 * is not S3. */
int bv_backend_s3_cache_dirfd(BvBackend *b);

/* Requests made and bytes moved by b so far (s3.h); -EOPNOTSUPP for a backend that is not S3. */
int bv_backend_s3_stats(BvBackend *b, bv_s3_stats *ret);

/* Every later put and writer commit of b carries Object Lock retention until now +
 * retain_seconds (0: none), in mode (COMPLIANCE or GOVERNANCE). -EOPNOTSUPP for a backend
 * that is not S3. */
int bv_backend_s3_set_object_lock(BvBackend *b, int64_t retain_seconds, bv_s3_lock_mode mode);

/* Whether b's bucket has Object Lock enabled: 1 yes, 0 no (a put with retention would be
 * refused), <0 error; -EOPNOTSUPP for a backend that is not S3. */
int bv_backend_s3_object_lock_enabled(BvBackend *b);

/* Extends the retention of (kind, name)'s current version to until (seconds since the epoch), in
 * the mode of bv_backend_s3_set_object_lock. A version retained longer already (COMPLIANCE
 * retention cannot be shortened, and the store refuses it with 403) is left as it is.
 * -EOPNOTSUPP for a backend that is not S3. */
int bv_backend_s3_extend_retention(BvBackend *b, BvObjKind kind, const char *name, int64_t until);
/* The storage's time now (bv_s3_now), to compare retention ends with; this machine's for a
 * directory. */
int64_t bv_backend_s3_now(BvBackend *b);
/* The retention of (kind, name)'s current version (HEAD): seconds since the epoch, 0 none. */
int bv_backend_s3_retention(BvBackend *b, BvObjKind kind, const char *name, int64_t *ret_until);
/* Likewise, and its mode (NONE when it has no retention) in *ret_mode if not NULL. */
int bv_backend_s3_retention_mode(BvBackend *b, BvObjKind kind, const char *name, int64_t *ret_until,
                                 bv_s3_lock_mode *ret_mode);

/* Whether the location holds objects that are not key slots (a location a copy is to create a
 * repository in must hold none): -ENOTEMPTY with the first one's key (below the prefix) in what,
 * 0 none. -EOPNOTSUPP for a backend that is not S3. */
int bv_backend_s3_foreign(BvBackend *b, char *what, size_t what_len);

/* The message of the last failed request of an S3 backend ("" for none, or another backend),
 * into buf; returns buf. */
const char *bv_backend_errmsg(BvBackend *b, char *buf, size_t len);
