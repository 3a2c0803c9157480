/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The S3 backend (backend.h over s3.h): a repository is the keys below PREFIX/ of a bucket,
 * s3://BUCKET[/PREFIX], each object at the same relative key as in a local repository.
 *
 *   put          one PUT (multipart above the client's threshold); create-only puts send
 *                If-None-Match: * where the probe at open found the store honours it, else a
 *                HEAD goes first (racy, but every create-only kind is content-addressed or
 *                randomly named)
 *   get, stat    GET, HEAD; list: ListObjectsV2 of PREFIX/<folder>/, 1,000 keys a request
 *   remove       DELETE; on S3 deleting an absent object succeeds, and so does this
 *   readers      HEAD for the size, a ranged GET per read; reader_fd: one GET into a memfd
 *   writers      a spool file (O_TMPFILE under $TMPDIR), PUT from it at commit
 *   locks        flock(2) on files of a local directory for this bucket and prefix
 *                ($BLKVAULT_CACHE_DIR, else $XDG_CACHE_HOME/blkvault, else /var/cache/blkvault
 *                for root and ~/.cache/blkvault otherwise; then s3/BUCKET/PREFIX): they
 *                serialise the processes of this machine only
 *   leases       leases/<16 hex>.lease, put again by a thread of its own every heartbeat
 *                interval while held; alive while its Last-Modified is younger than the grace
 *                (BV_S3_LEASE_GRACE_S): a holder that died stops refreshing it
 */

#include <stddef.h>

#include "backend.h"

#define BV_S3_LEASE_HEARTBEAT_S 60
#define BV_S3_LEASE_GRACE_S (5 * BV_S3_LEASE_HEARTBEAT_S)

/* Opens s3://BUCKET[/PREFIX] with the endpoint and credentials of the environment (s3-conf.h);
 * the message of a failure goes to errbuf (errlen bytes; may be NULL). */
int bv_backend_s3_open(const char *location, bool create, BvBackend **ret, char *errbuf, size_t errlen);

/* The message of the last failed request of an S3 backend ("" for none, or another backend),
 * into buf; returns buf. */
const char *bv_backend_errmsg(BvBackend *b, char *buf, size_t len);
