/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Inside the S3 client: one request (s3-request.c), the XML of the answers (s3-xml.c). */

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "macro.h"

#include "s3.h"

struct bv_s3 {
        bv_s3_conf *conf;
        char *location; /* s3://BUCKET[/PREFIX] */
        char *base_url; /* up to and without the '/' before the key: ENDPOINT/BUCKET or https://BUCKET.HOST */
        char *sigv4; /* "aws:amz:REGION:s3" */
        bool conditional_put;

        pthread_mutex_t lock; /* guards what follows */
        CURL **pool;
        size_t n_pool, cap_pool;
        char errmsg[1024];
        bv_s3_stats stats;
        int64_t clock_offset; /* the server's Date less this machine's time, at the last answer */
};

/* One request and what came back. The caller fills the first part and zeroes the rest. */
typedef struct s3_req {
        const char *method; /* GET, PUT, HEAD, POST, DELETE */
        const char *key; /* relative to the prefix; NULL: the bucket itself */
        const char *query; /* canonical: sorted by name, values encoded (s3_query_add), or NULL */
        struct curl_slist *headers; /* more headers (the caller's), or NULL */
        const void *body; /* PUT or POST body */
        size_t body_len;

        /* where a 2xx body goes: buf of cap bytes (the rest is dropped: a ranged GET), else a
         * growing buffer of at most max bytes (-EFBIG beyond; 0: 16 MiB), handed to the caller */
        void *buf;
        size_t cap;
        size_t max;
        const char *what; /* the request's name in the message, "PUT" when NULL: the method */

        /* the answer */
        long status;
        uint8_t *data; /* the growing buffer (free it), or NULL */
        size_t data_cap;
        size_t len; /* bytes of the body kept */
        uint64_t received; /* bytes of the body received */
        char etag[80];
        char version_id[256];
        uint64_t content_length;
        uint64_t object_size; /* from Content-Range, else Content-Length */
        uint64_t range_len; /* the bytes a 206's Content-Range names (0: none) */
        bool have_size;
        int64_t mtime;
        int64_t date; /* the Date header: the server's clock when it answered (0: none) */
        bv_s3_lock_mode lock_mode;
        int64_t retain_until;
        bool delete_marker;
        char *err_body;
        size_t err_len, err_cap;
} s3_req;

/* Performs q with retries; 0 for 2xx, else the mapped -errno with the message set on s.
 * ok_status, when not 0, is one more status taken as success (the caller handles it). */
int s3_request(bv_s3 *s, s3_req *q, long ok_status);
void s3_req_done(s3_req *q);
/* s3_request with q's query and headers set to these; frees headers. */
int s3_request_with(bv_s3 *s, s3_req *q, const char *query, struct curl_slist *headers);

/* Learns whether the store honours If-None-Match: * on PUT (s->conditional_put). */
int s3_probe_conditional(bv_s3 *s);

/* Appends "name=value" (value percent-encoded as SigV4 wants) to the query q (a '&' between);
 * callers add names in sorted order. -ENOMEM leaves q as it was. */
int s3_query_add(char **q, const char *name, const char *value);

/* Sets the message of s (printf-style) for the failure of key. */
void s3_set_error(bv_s3 *s, const char *key, const char *fmt, ...) _printf_(3, 4);

/* SHA-256 of data as 64 hex digits, MD5 as base64 (24 characters). */
void s3_sha256_hex(const void *data, size_t len, char out[65]);
void s3_md5_base64(const void *data, size_t len, char out[25]);

/* ISO 8601 UTC ("2026-11-27T08:00:00Z", fractions allowed) to seconds since the epoch; -1 when
 * it does not parse. And back, without fractions. */
int64_t s3_parse_iso8601(const char *s);
void s3_format_iso8601(int64_t t, char out[32]);

/* XML answers (libxml2). Error: the Code and Message of an <Error> document. */
void s3_xml_error(const char *body, size_t len, char *code, size_t code_len, char *msg, size_t msg_len);
/* The text of the first element named name (any namespace) in the document; -EBADMSG when the
 * document does not parse or has none. Also returns, in *ret_is_error, whether the root is
 * <Error> (CompleteMultipartUpload can answer 200 with an error). */
int s3_xml_text(const char *body, size_t len, const char *name, char **ret, bool *ret_is_error);

/* One page of ListObjectsV2 or ListObjectVersions: calls cb for each entry (keys with the
 * location's prefix strip_len bytes stripped), and says whether there is more and where it goes
 * on (continuation token, or key and version-id markers; new strings, or NULL). */
typedef struct s3_list_page {
        bool truncated;
        char *next_token;
        char *next_key;
        char *next_version;
} s3_list_page;
/* One page of a listing to cb. -EBADMSG for a page that is no such listing or holds a broken
 * entry, with what was wrong in why ("" when the error is cb's own). */
int s3_xml_list_page(const char *body, size_t len, bool versions, const char *under, size_t strip_len,
                     bv_s3_list_cb cb, void *userdata, s3_list_page *ret, char *why, size_t whylen);
void s3_list_page_done(s3_list_page *p);
