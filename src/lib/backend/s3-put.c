/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes to S3: PUT, multipart uploads, Object Lock retention, and the probe for conditional
 * writes (If-None-Match: *). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hex.h"
#include "macro.h"
#include "s3-internal.h"

/* Where the bytes of a PUT come from: memory, or a range of a file read part by part. */
typedef struct body_src {
        const uint8_t *mem;
        int fd;
        uint64_t offset;
        uint64_t size;
        uint8_t *part_buf; /* for fd: one part */
} body_src;

static int src_part(bv_s3 *s, body_src *b, const char *key, uint64_t off, size_t len, const void **ret)
{
        size_t done = 0;

        if (b->mem) {
                *ret = b->mem + off;
                return 0;
        }
        if (!b->part_buf && !(b->part_buf = malloc(MAX(len, (size_t)1))))
                return -ENOMEM;
        while (done < len) {
                ssize_t n = pread(b->fd, b->part_buf + done, len - done, (off_t)(b->offset + off + done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        s3_set_error(s, key, "PUT: cannot read the local data at offset %" PRIu64 ": %s",
                                     b->offset + off + done, n < 0 ? strerror(-r) : "file shorter than expected");
                        return r;
                }
                done += (size_t)n;
        }
        *ret = b->part_buf;
        return 0;
}

/* Appends header line "name: value" to *h. */
static int add_header(struct curl_slist **h, const char *name, const char *value)
{
        _cleanup_free_ char *line = NULL;
        struct curl_slist *t;

        if (asprintf(&line, "%s: %s", name, value) < 0)
                return -ENOMEM;
        t = curl_slist_append(*h, line);
        if (!t)
                return -ENOMEM;
        *h = t;
        return 0;
}

static const char *mode_name(bv_s3_lock_mode m)
{
        return m == BV_S3_LOCK_GOVERNANCE ? "GOVERNANCE" : "COMPLIANCE";
}

/* The Object Lock headers of opts (for a PUT or the start of a multipart upload). */
static int lock_headers(const bv_s3_put_opts *o, struct curl_slist **h)
{
        char until[32];

        if (!o || o->retain_until <= 0)
                return 0;
        s3_format_iso8601(o->retain_until, until);
        if (add_header(h, "x-amz-object-lock-mode", mode_name(o->lock_mode)) < 0 ||
            add_header(h, "x-amz-object-lock-retain-until-date", until) < 0)
                return -ENOMEM;
        return 0;
}

/* S3 wants Content-MD5 (or a checksum) on every write to a locked object. */
static int md5_header(const bv_s3_put_opts *o, const void *data, size_t len, struct curl_slist **h)
{
        char md5[25];

        if (!o || o->retain_until <= 0)
                return 0;
        s3_md5_base64(data, len, md5);
        return add_header(h, "Content-MD5", md5);
}

static bool conditional(bv_s3 *s, const bv_s3_put_opts *o)
{
        return o && o->if_none_match && s->conditional_put;
}

static int put_single(bv_s3 *s, const char *key, const void *data, size_t size, const bv_s3_put_opts *o)
{
        struct curl_slist *h = NULL;
        s3_req q = { .method = "PUT", .key = key, .body = data, .body_len = size };
        int r;

        if ((conditional(s, o) && add_header(&h, "If-None-Match", "*") < 0) || lock_headers(o, &h) < 0 ||
            md5_header(o, data, size, &h) < 0) {
                curl_slist_free_all(h);
                return -ENOMEM;
        }
        q.headers = h;
        r = s3_request(s, &q, 0);
        s3_req_done(&q);
        curl_slist_free_all(h);
        return r;
}

/* Ends a failed multipart upload; keeps the message of the failure. */
static void multipart_abort(bv_s3 *s, const char *key, const char *upload_id)
{
        _cleanup_free_ char *query = NULL;
        char saved[sizeof(s->errmsg)];
        s3_req q = { .method = "DELETE", .key = key, .what = "multipart abort" };

        bv_s3_errmsg(s, saved, sizeof(saved));
        if (s3_query_add(&query, "uploadId", upload_id) >= 0) {
                q.query = query;
                (void)s3_request(s, &q, 0);
                s3_req_done(&q);
        }
        BV_LOCK_GUARD(&s->lock);
        memcpy(s->errmsg, saved, sizeof(saved));
}

static int multipart_start(bv_s3 *s, const char *key, const bv_s3_put_opts *o, char **ret_upload_id)
{
        struct curl_slist *h = NULL;
        s3_req q = { .method = "POST", .key = key, .query = "uploads=", .what = "multipart start" };
        int r;

        if (lock_headers(o, &h) < 0)
                return -ENOMEM;
        q.headers = h;
        r = s3_request(s, &q, 0);
        curl_slist_free_all(h);
        if (r >= 0 && s3_xml_text((const char *)q.data, q.len, "UploadId", ret_upload_id, NULL) < 0) {
                s3_set_error(s, key, "multipart start: HTTP %ld without an UploadId", q.status);
                r = -EBADMSG;
        }
        s3_req_done(&q);
        return r;
}

static int multipart_part(bv_s3 *s, const char *key, const char *upload_id, unsigned number, const void *data,
                          size_t len, const bv_s3_put_opts *o, char **etags)
{
        _cleanup_free_ char *query = NULL;
        struct curl_slist *h = NULL;
        char num[16], what[32];
        s3_req q = { .method = "PUT", .key = key, .body = data, .body_len = len, .what = what };
        int r;

        snprintf(num, sizeof(num), "%u", number);
        snprintf(what, sizeof(what), "PUT part %u", number);
        if (s3_query_add(&query, "partNumber", num) < 0 || s3_query_add(&query, "uploadId", upload_id) < 0 ||
            md5_header(o, data, len, &h) < 0) {
                curl_slist_free_all(h);
                return -ENOMEM;
        }
        r = s3_request_with(s, &q, query, h);
        if (r >= 0 && !q.etag[0]) {
                s3_set_error(s, key, "%s: HTTP %ld without an ETag", what, q.status);
                r = -EBADMSG;
        }
        if (r >= 0 && !(etags[number - 1] = strdup(q.etag)))
                r = -ENOMEM;
        s3_req_done(&q);
        return r;
}

static int multipart_complete(bv_s3 *s, const char *key, const char *upload_id, char **etags, unsigned n,
                              const bv_s3_put_opts *o)
{
        _cleanup_free_ char *query = NULL, *xml = NULL, *code = NULL;
        struct curl_slist *h = NULL;
        size_t cap = 128 + (size_t)n * 160, len;
        s3_req q = { .method = "POST", .key = key, .what = "multipart complete" };
        bool is_error = false;
        int r;

        if (!(xml = malloc(cap)) || s3_query_add(&query, "uploadId", upload_id) < 0)
                return -ENOMEM;
        len = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
        for (unsigned i = 0; i < n; i++)
                len += (size_t)snprintf(xml + len, cap - len, "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag></Part>",
                                        i + 1, etags[i]);
        len += (size_t)snprintf(xml + len, cap - len, "</CompleteMultipartUpload>");
        if (conditional(s, o) && add_header(&h, "If-None-Match", "*") < 0)
                return -ENOMEM;
        q.query = query;
        q.headers = h;
        q.body = xml;
        q.body_len = len;
        r = s3_request(s, &q, 0);
        curl_slist_free_all(h);
        /* S3 can answer 200 and then an <Error> in the body */
        if (r >= 0 && s3_xml_text((const char *)q.data, q.len, "Code", &code, &is_error) >= 0 && is_error) {
                s3_set_error(s, key, "multipart complete: HTTP %ld but %s", q.status, code);
                r = -EIO;
        }
        s3_req_done(&q);
        return r;
}

static int put_multipart(bv_s3 *s, const char *key, body_src *b, const bv_s3_put_opts *o)
{
        uint64_t part = MAX(s->conf->part_size, BV_S3_PART_SIZE_MIN);
        unsigned n = (unsigned)DIV_ROUND_UP(b->size, part);
        _cleanup_free_ char *upload_id = NULL;
        char **etags;
        int r;

        if (n > 10000)
                return -EFBIG;
        etags = calloc(n, sizeof(*etags));
        if (!etags)
                return -ENOMEM;
        r = multipart_start(s, key, o, &upload_id);
        for (unsigned i = 0; r >= 0 && i < n; i++) {
                uint64_t off = (uint64_t)i * part;
                size_t len = (size_t)MIN(part, b->size - off);
                const void *data;

                r = src_part(s, b, key, off, len, &data);
                if (r >= 0)
                        r = multipart_part(s, key, upload_id, i + 1, data, len, o, etags);
        }
        if (r >= 0)
                r = multipart_complete(s, key, upload_id, etags, n, o);
        if (r < 0 && upload_id)
                multipart_abort(s, key, upload_id);
        for (unsigned i = 0; i < n; i++)
                free(etags[i]);
        free(etags);
        return r;
}

static int put_src(bv_s3 *s, const char *key, body_src *b, const bv_s3_put_opts *o)
{
        const void *data;
        int r;

        if (b->size > s->conf->multipart_threshold)
                r = put_multipart(s, key, b, o);
        else {
                r = src_part(s, b, key, 0, (size_t)b->size, &data);
                if (r >= 0)
                        r = put_single(s, key, data, (size_t)b->size, o);
        }
        free(b->part_buf);
        return r;
}

int bv_s3_put(bv_s3 *s, const char *key, const void *data, size_t size, const bv_s3_put_opts *opts)
{
        body_src b = { .mem = data ? data : (const uint8_t *)"", .fd = -EBADF, .size = size };

        return put_src(s, key, &b, opts);
}

int bv_s3_put_fd(bv_s3 *s, const char *key, int fd, uint64_t offset, uint64_t size, const bv_s3_put_opts *opts)
{
        body_src b = { .fd = fd, .offset = offset, .size = size };

        if (size > SIZE_MAX / 2)
                return -EFBIG;
        return put_src(s, key, &b, opts);
}

int bv_s3_set_retention(bv_s3 *s, const char *key, const char *version_id, bv_s3_lock_mode mode,
                        int64_t retain_until)
{
        _cleanup_free_ char *query = NULL;
        struct curl_slist *h = NULL;
        char until[32], xml[256], md5[25];
        s3_req q = { .method = "PUT", .key = key, .what = "PUT retention", .body = xml };
        int r;

        s3_format_iso8601(retain_until, until);
        q.body_len = (size_t)snprintf(xml, sizeof(xml),
                                      "<Retention><Mode>%s</Mode><RetainUntilDate>%s</RetainUntilDate></Retention>",
                                      mode_name(mode), until);
        s3_md5_base64(xml, q.body_len, md5);
        if (s3_query_add(&query, "retention", "") < 0 ||
            (version_id && s3_query_add(&query, "versionId", version_id) < 0) || add_header(&h, "Content-MD5", md5) < 0) {
                curl_slist_free_all(h);
                return -ENOMEM;
        }
        q.query = query;
        q.headers = h;
        r = s3_request(s, &q, 0);
        curl_slist_free_all(h);
        s3_req_done(&q);
        return r;
}

/* Writes a probe object twice with If-None-Match: *: a store that honours it refuses the second
 * (412); one that does not (Garage) overwrites, or refuses the header (400, 501). */
int s3_probe_conditional(bv_s3 *s)
{
        bv_s3_put_opts o = { .if_none_match = true };
        uint8_t rnd[8];
        char hex[17], key[64];
        int r;

        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        bv_hex_encode(rnd, sizeof(rnd), hex);
        snprintf(key, sizeof(key), ".probe-conditional-put-%s", hex);
        s->conditional_put = true; /* so that put_single sends the header */
        r = put_single(s, key, "", 0, &o);
        if (r == -EINVAL || r == -EOPNOTSUPP) {
                s->conditional_put = false;
                r = put_single(s, key, "", 0, NULL);
        } else if (r >= 0) {
                r = put_single(s, key, "", 0, &o);
                s->conditional_put = r == -EEXIST;
                if (r == -EEXIST || r == -EINVAL || r == -EOPNOTSUPP)
                        r = 0;
        }
        if (r < 0) {
                s->conditional_put = false;
                return r;
        }
        (void)bv_s3_delete(s, key, NULL);
        return 0;
}
