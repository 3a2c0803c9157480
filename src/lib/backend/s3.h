/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A client of S3-compatible object storage (AWS S3, Ceph RGW, MinIO, SeaweedFS, Garage,
 * versitygw) over libcurl, signed with SigV4 (CURLOPT_AWS_SIGV4).
 *
 * A client is bound to one location, s3://BUCKET[/PREFIX]; every key a caller passes or gets back
 * is relative to PREFIX ("packs/3f/3f2a..." is stored as "PREFIX/packs/3f/3f2a..."). The endpoint,
 * the credentials and the region come from the AWS conventions (s3-conf.h).
 *
 * Every function returns 0 (or a count) or a negative errno:
 *   -ENOENT        no such key, version or bucket (HTTP 404)
 *   -EEXIST        a conditional PUT found the key there already (HTTP 412)
 *   -EACCES        refused: credentials, signature, policy, or Object Lock (HTTP 403)
 *   -EOPNOTSUPP    the store does not implement the request (HTTP 501, 405)
 *   -EINVAL        the store found the request malformed (HTTP 400)
 *   -EBUSY         a conflicting request was in progress (HTTP 409)
 *   -EIO           a server error (HTTP 5xx) that outlasted the retries, or another status
 *   -EAGAIN        503 SlowDown that outlasted the retries
 *   -ECONNREFUSED, -EHOSTUNREACH, -ETIMEDOUT, -ECONNRESET, -EPROTO
 *                  the transport failed (after the retries), or TLS did not verify (-EPROTO)
 *   -EBADMSG       a response that does not parse
 * and the client keeps a message for the last failure (bv_s3_errmsg: "s3://BUCKET/KEY: HTTP 403
 * AccessDenied: Access Denied"), for the caller's one log line. The library never prints.
 *
 * Server errors (500, 502, 503, 504, RequestTimeout) and transport errors are retried with
 * exponential backoff and jitter, AWS_MAX_ATTEMPTS attempts in all (default 5); an attempt that
 * gets no answer for BLKVAULT_S3_TIMEOUT seconds (default 60) fails. Each retry is told to the
 * hook bv_s3_set_retry_notify sets ("S3: no answer from ENDPOINT for 60 s, retrying (2/5)"),
 * from the thread that retries: the CLI says it on stderr.
 *
 * A client may be used by several threads at once: each request takes a libcurl handle of its
 * own from a pool (kept alive between requests).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "s3-conf.h"

typedef struct bv_s3 bv_s3;

enum {
        /* PUT a probe object twice with If-None-Match: * to learn whether the store honours
         * conditional writes (bv_s3_conditional_put); for writers. */
        BV_S3_PROBE_CONDITIONAL = 1u << 0,
        /* No LIST at open: the caller checks the bucket itself (bv_s3_check_bucket), or knows
         * that it answered lately. */
        BV_S3_NO_CHECK = 1u << 1,
};

/* The process's hook told of every retry (NULL: none), with a message for the user. */
void bv_s3_set_retry_notify(void (*fn)(const char *message, void *userdata), void *userdata);

/* Opens a client for conf (copied). Checks that the bucket answers (a LIST of at most one key)
 * so that a wrong endpoint, bucket or credentials fail here; the message then goes to errbuf (of
 * errlen bytes; may be NULL). */
int bv_s3_open(const bv_s3_conf *conf, unsigned flags, bv_s3 **ret, char *errbuf, size_t errlen);
/* That check on its own (one LIST of at most one key under the prefix): 0 or -errno, the message
 * in bv_s3_errmsg. */
int bv_s3_check_bucket(bv_s3 *s);
void bv_s3_free(bv_s3 *s); /* accepts NULL */

/* The message of the last failure of any request on s ("" when none); copied to buf (of size
 * len, always NUL-terminated). Returns buf. */
const char *bv_s3_errmsg(bv_s3 *s, char *buf, size_t len);

/* "s3://BUCKET/PREFIX", for messages. */
const char *bv_s3_location(const bv_s3 *s);

/* Whether the probe at open found that the store refuses a second PUT with If-None-Match: *
 * (false when not probed). */
bool bv_s3_conditional_put(const bv_s3 *s);

/* Requests made and bytes sent and received so far (retries included). */
typedef struct bv_s3_stats {
        uint64_t requests;
        uint64_t retries;
        uint64_t bytes_sent;
        uint64_t bytes_received;
} bv_s3_stats;
void bv_s3_get_stats(bv_s3 *s, bv_s3_stats *ret);

/* The server's time now, in seconds since the epoch: this machine's moved by how far the Date of
 * the latest answer was from it (this machine's until an answer carried a Date). For what the
 * server compares with its own clock: Object Lock retention. */
int64_t bv_s3_now(bv_s3 *s);

typedef enum bv_s3_lock_mode {
        BV_S3_LOCK_NONE = 0,
        BV_S3_LOCK_COMPLIANCE,
        BV_S3_LOCK_GOVERNANCE,
} bv_s3_lock_mode;

typedef struct bv_s3_put_opts {
        /* If-None-Match: *, sent when the probe found the store honours it: a key already
         * there is then -EEXIST. Where it is not honoured the PUT overwrites: callers write
         * only content-addressed or otherwise idempotent keys. */
        bool if_none_match;
        /* Object Lock retention until this time (seconds since the epoch; 0: none). */
        int64_t retain_until;
        bv_s3_lock_mode lock_mode; /* COMPLIANCE when retain_until is set and this is NONE */
} bv_s3_put_opts;

/* Stores size bytes of data as key: one PUT, or a multipart upload when size is over the
 * configured threshold (bv_s3_conf.multipart_threshold). opts may be NULL. */
int bv_s3_put(bv_s3 *s, const char *key, const void *data, size_t size, const bv_s3_put_opts *opts);
/* The same from size bytes of fd at offset (pread; read part by part for a multipart upload). */
int bv_s3_put_fd(bv_s3 *s, const char *key, int fd, uint64_t offset, uint64_t size,
                 const bv_s3_put_opts *opts);

/* Reads up to len bytes of key from offset into buf (a ranged GET; version_id NULL for the
 * current version). Returns the count, short at the object's end and 0 at or past it. */
ssize_t bv_s3_get_range(bv_s3 *s, const char *key, const char *version_id, uint64_t offset, size_t len,
                        void *buf);
/* Reads the whole object, at most max_size bytes (-EFBIG beyond), into a new buffer. */
int bv_s3_get(bv_s3 *s, const char *key, const char *version_id, size_t max_size, void **ret_data,
              size_t *ret_size);

typedef struct bv_s3_object {
        char *key; /* relative to the prefix */
        char *version_id; /* NULL where the store has no versions (and in plain LIST) */
        uint64_t size;
        int64_t mtime; /* Last-Modified, seconds since the epoch */
        char etag[80]; /* without quotes */
        bool is_latest; /* ListObjectVersions */
        bool delete_marker; /* ListObjectVersions */
        bv_s3_lock_mode lock_mode; /* HEAD */
        int64_t retain_until; /* HEAD: Object Lock retention, 0 when none */
        int64_t server_time; /* HEAD: the answer's Date, the server's clock (0 when it sent none) */
} bv_s3_object;
void bv_s3_object_done(bv_s3_object *o); /* frees the strings, accepts a zeroed one */

/* HEAD: -ENOENT when key (or that version) is not there, or its current version is a delete
 * marker. ret is filled (and must be released with bv_s3_object_done) on success. */
int bv_s3_head(bv_s3 *s, const char *key, const char *version_id, bv_s3_object *ret);

/* Called for each object listed; a negative return stops the listing and is returned. The
 * object and its strings are valid during the call only. */
typedef int (*bv_s3_list_cb)(const bv_s3_object *o, void *userdata);

/* LIST (ListObjectsV2) of the keys under prefix (relative; "" for all), in key order, every page
 * (1000 keys a request). */
int bv_s3_list(bv_s3 *s, const char *prefix, bv_s3_list_cb cb, void *userdata);
/* ListObjectVersions under prefix: every version and delete marker, newest first per key. */
int bv_s3_list_versions(bv_s3 *s, const char *prefix, bv_s3_list_cb cb, void *userdata);

/* DELETE key (version_id NULL: the current one; with versioning that leaves a delete marker).
 * Deleting a key that is not there succeeds, as on S3. */
int bv_s3_delete(bv_s3 *s, const char *key, const char *version_id);

/* Whether the bucket has Object Lock enabled (GET ?object-lock): 1 yes, 0 no, <0 error. */
int bv_s3_object_lock_enabled(bv_s3 *s);

/* Sets (extends) the Object Lock retention of key's version (NULL: current). */
int bv_s3_set_retention(bv_s3 *s, const char *key, const char *version_id, bv_s3_lock_mode mode,
                        int64_t retain_until);
