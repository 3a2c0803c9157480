/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The S3 client: open and close, reads (GET, HEAD), listings and DELETE. Writes: s3-put.c. */
#include <errno.h>
#include <inttypes.h>
#include <libxml/parser.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hex.h"
#include "macro.h"
#include "s3-internal.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_init_result;

static void global_init(void)
{
        global_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
        xmlInitParser();
}

void s3_sha256_hex(const void *data, size_t len, char out[65])
{
        uint8_t md[32];

        EVP_Digest(data ? data : "", len, md, NULL, EVP_sha256(), NULL);
        bv_hex_encode(md, sizeof(md), out);
}

void s3_md5_base64(const void *data, size_t len, char out[25])
{
        uint8_t md[16];

        EVP_Digest(data ? data : "", len, md, NULL, EVP_md5(), NULL);
        EVP_EncodeBlock((unsigned char *)out, md, sizeof(md));
}

int64_t s3_parse_iso8601(const char *s)
{
        struct tm tm = {};
        const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);

        if (!end)
                return -1;
        if (*end == '.')
                for (end++; *end >= '0' && *end <= '9'; end++)
                        ;
        if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0 && *end != '\0')
                return -1;
        return (int64_t)timegm(&tm);
}

void s3_format_iso8601(int64_t t, char out[32])
{
        time_t tt = (time_t)t;
        struct tm tm;

        gmtime_r(&tt, &tm);
        strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *bv_s3_errmsg(bv_s3 *s, char *buf, size_t len)
{
        BV_LOCK_GUARD(&s->lock);
        snprintf(buf, len, "%s", s->errmsg);
        return buf;
}

const char *bv_s3_location(const bv_s3 *s)
{
        return s->location;
}

bool bv_s3_conditional_put(const bv_s3 *s)
{
        return s->conditional_put;
}

void bv_s3_get_stats(bv_s3 *s, bv_s3_stats *ret)
{
        BV_LOCK_GUARD(&s->lock);
        *ret = s->stats;
}

int64_t bv_s3_now(bv_s3 *s)
{
        BV_LOCK_GUARD(&s->lock);
        return (int64_t)time(NULL) + s->clock_offset;
}

void bv_s3_free(bv_s3 *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n_pool; i++)
                curl_easy_cleanup(s->pool[i]);
        free(s->pool);
        pthread_mutex_destroy(&s->lock);
        bv_s3_conf_free(s->conf);
        free(s->location);
        free(s->base_url);
        free(s->sigv4);
        free(s);
}

static int client_new(const bv_s3_conf *conf, bv_s3 **ret)
{
        bv_s3 *s = calloc(1, sizeof(*s));
        const char *host;
        int r;

        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        s->conf = bv_s3_conf_dup(conf);
        if (!s->conf) {
                bv_s3_free(s);
                return -ENOMEM;
        }
        host = strstr(conf->endpoint, "://");
        if (!host) {
                bv_s3_free(s);
                return -EINVAL;
        }
        if (conf->path_style)
                r = asprintf(&s->base_url, "%s/%s", conf->endpoint, conf->bucket);
        else
                r = asprintf(&s->base_url, "%.*s%s.%s", (int)(host + 3 - conf->endpoint), conf->endpoint,
                             conf->bucket, host + 3);
        if (r < 0 || asprintf(&s->sigv4, "aws:amz:%s:s3", conf->region) < 0 ||
            asprintf(&s->location, "s3://%s%s%s", conf->bucket, *conf->prefix ? "/" : "", conf->prefix) < 0) {
                bv_s3_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

static int count_cb(const bv_s3_object *o, void *userdata)
{
        return 0;
}

/* One LIST page of at most one key under the prefix: the bucket is there and answers us. */
static int check_bucket(bv_s3 *s)
{
        _cleanup_free_ char *query = NULL;
        s3_list_page page = {};
        _cleanup_free_ char *under = NULL;
        s3_req q = { .method = "GET", .what = "LIST" };
        size_t strip = *s->conf->prefix ? strlen(s->conf->prefix) + 1 : 0;
        int r;

        if (s3_query_add(&query, "list-type", "2") < 0 || s3_query_add(&query, "max-keys", "1") < 0)
                return -ENOMEM;
        if (*s->conf->prefix && (asprintf(&under, "%s/", s->conf->prefix) < 0 ||
                                 s3_query_add(&query, "prefix", under) < 0))
                return -ENOMEM;
        q.query = query;
        r = s3_request(s, &q, 0);
        if (r >= 0) {
                char why[256];
                r = s3_xml_list_page((const char *)q.data, q.len, false, under ?: "", strip, count_cb, NULL, &page,
                                     why, sizeof(why));
                if (r < 0)
                        s3_set_error(s, NULL, "LIST: the answer does not parse: %s", why);
                s3_list_page_done(&page);
        }
        s3_req_done(&q);
        return r;
}

int bv_s3_open(const bv_s3_conf *conf, unsigned flags, bv_s3 **ret, char *errbuf, size_t errlen)
{
        bv_s3 *s;
        int r;

        pthread_once(&global_once, global_init);
        if (global_init_result != CURLE_OK)
                return -ENOMEM;
        r = client_new(conf, &s);
        if (r < 0)
                return r;
        r = check_bucket(s);
        if (r >= 0 && (flags & BV_S3_PROBE_CONDITIONAL))
                r = s3_probe_conditional(s);
        if (r < 0) {
                if (errbuf)
                        bv_s3_errmsg(s, errbuf, errlen);
                bv_s3_free(s);
                return r;
        }
        s->errmsg[0] = '\0';
        *ret = s;
        return 0;
}

void bv_s3_object_done(bv_s3_object *o)
{
        free(o->key);
        free(o->version_id);
        o->key = o->version_id = NULL;
}

/* q on key's version_id (NULL: the current one). */
static int request_version(bv_s3 *s, s3_req *q, const char *version_id)
{
        _cleanup_free_ char *query = NULL;

        if (version_id && s3_query_add(&query, "versionId", version_id) < 0)
                return -ENOMEM;
        return s3_request_with(s, q, query, NULL);
}

ssize_t bv_s3_get_range(bv_s3 *s, const char *key, const char *version_id, uint64_t offset, size_t len,
                        void *buf)
{
        _cleanup_free_ char *query = NULL;
        char range[64];
        struct curl_slist *h;
        s3_req q = { .method = "GET", .key = key, .buf = buf, .cap = len };
        int r;

        if (len == 0)
                return 0;
        if (version_id && s3_query_add(&query, "versionId", version_id) < 0)
                return -ENOMEM;
        snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-%" PRIu64, offset, offset + len - 1);
        h = curl_slist_append(NULL, range);
        if (!h)
                return -ENOMEM;
        q.query = query;
        q.headers = h;
        r = s3_request(s, &q, 416);
        curl_slist_free_all(h);
        if (r >= 0 && q.status == 416)
                r = 0; /* at or past the end */
        else if (r >= 0 && q.status == 200 && offset > 0) {
                /* a store that ignored the range: not one we can read from at an offset */
                s3_set_error(s, key, "GET: HTTP 200 to a ranged request (the store ignores Range)");
                r = -EOPNOTSUPP;
        } else if (r >= 0)
                r = (int)MIN(q.len, len);
        s3_req_done(&q);
        return r;
}

int bv_s3_get(bv_s3 *s, const char *key, const char *version_id, size_t max_size, void **ret_data,
              size_t *ret_size)
{
        s3_req q = { .method = "GET", .key = key, .max = max_size ?: 1 };
        int r;

        r = request_version(s, &q, version_id);
        if (r >= 0) {
                *ret_size = q.len;
                *ret_data = q.data ? q.data : calloc(1, 1);
                q.data = NULL;
                if (!*ret_data)
                        r = -ENOMEM;
        }
        s3_req_done(&q);
        return r;
}

int bv_s3_head(bv_s3 *s, const char *key, const char *version_id, bv_s3_object *ret)
{
        s3_req q = { .method = "HEAD", .key = key };
        bv_s3_object o = {};
        int r;

        r = request_version(s, &q, version_id);
        if (r >= 0) {
                o.key = strdup(key);
                o.version_id = q.version_id[0] ? strdup(q.version_id) : NULL;
                o.size = q.content_length;
                o.mtime = q.mtime;
                o.lock_mode = q.lock_mode;
                o.retain_until = q.retain_until;
                o.server_time = q.date;
                o.delete_marker = q.delete_marker;
                snprintf(o.etag, sizeof(o.etag), "%s", q.etag);
                if (!o.key || (q.version_id[0] && !o.version_id)) {
                        bv_s3_object_done(&o);
                        r = -ENOMEM;
                } else
                        *ret = o;
        }
        s3_req_done(&q);
        return r;
}

/* Every page of a listing: list-type=2 with continuation tokens, or ?versions with markers. */
static int list_pages(bv_s3 *s, const char *prefix, bool versions, bv_s3_list_cb cb, void *userdata)
{
        _cleanup_free_ char *full = NULL;
        size_t strip = *s->conf->prefix ? strlen(s->conf->prefix) + 1 : 0;
        s3_list_page page = {};
        char what[200];
        int r;

        if (asprintf(&full, "%s%s%s", s->conf->prefix, *s->conf->prefix ? "/" : "", prefix ?: "") < 0)
                return -ENOMEM;
        /* which listing, for the message: "LIST of 'gc/'" */
        snprintf(what, sizeof(what), "%s of '%.150s'", versions ? "LIST versions" : "LIST",
                 prefix && *prefix ? prefix : "/");
        for (;;) {
                _cleanup_free_ char *query = NULL;
                s3_req q = { .method = "GET", .what = what };

                /* names in sorted order: the canonical query SigV4 signs */
                if (versions) {
                        if ((page.next_key && s3_query_add(&query, "key-marker", page.next_key) < 0) ||
                            s3_query_add(&query, "prefix", full) < 0 ||
                            (page.next_version && s3_query_add(&query, "version-id-marker", page.next_version) < 0) ||
                            s3_query_add(&query, "versions", "") < 0)
                                r = -ENOMEM;
                        else
                                r = 0;
                } else if ((page.next_token && s3_query_add(&query, "continuation-token", page.next_token) < 0) ||
                           s3_query_add(&query, "list-type", "2") < 0 || s3_query_add(&query, "prefix", full) < 0)
                        r = -ENOMEM;
                else
                        r = 0;
                s3_list_page_done(&page);
                if (r < 0)
                        return r;
                q.query = query;
                r = s3_request(s, &q, 0);
                if (r >= 0) {
                        char why[256];
                        r = s3_xml_list_page((const char *)q.data, q.len, versions, full, strip, cb, userdata, &page,
                                             why, sizeof(why));
                        if (r == -EBADMSG && why[0])
                                s3_set_error(s, NULL, "%s: the answer does not parse: %s", q.what, why);
                }
                s3_req_done(&q);
                if (r < 0 || !page.truncated)
                        break;
        }
        s3_list_page_done(&page);
        return r < 0 ? r : 0;
}

int bv_s3_list(bv_s3 *s, const char *prefix, bv_s3_list_cb cb, void *userdata)
{
        return list_pages(s, prefix, false, cb, userdata);
}

int bv_s3_list_versions(bv_s3 *s, const char *prefix, bv_s3_list_cb cb, void *userdata)
{
        return list_pages(s, prefix, true, cb, userdata);
}

int bv_s3_delete(bv_s3 *s, const char *key, const char *version_id)
{
        s3_req q = { .method = "DELETE", .key = key };
        int r;

        r = request_version(s, &q, version_id);
        s3_req_done(&q);
        return r;
}

int bv_s3_object_lock_enabled(bv_s3 *s)
{
        _cleanup_free_ char *query = NULL, *enabled = NULL;
        s3_req q = { .method = "GET", .what = "GET object-lock" };
        int r = s3_query_add(&query, "object-lock", "");

        if (r < 0)
                return r;
        q.query = query;
        r = s3_request(s, &q, 0);
        if (r >= 0 && s3_xml_text((const char *)q.data, q.len, "ObjectLockEnabled", &enabled, NULL) >= 0)
                r = strcmp(enabled, "Enabled") == 0;
        else if (r >= 0 || r == -ENOENT) /* no configuration (ObjectLockConfigurationNotFoundError) */
                r = 0;
        s3_req_done(&q);
        return r;
}
