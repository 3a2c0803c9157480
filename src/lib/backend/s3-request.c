/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One S3 request over libcurl: the URL, SigV4 by libcurl with the payload hash set here, the
 * answer's headers and body, the retries and the mapping of failures to errno and a message. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "macro.h"
#include "s3-internal.h"
#include "timeutil.h"

#define ERR_BODY_MAX (64u << 10)
#define XML_BODY_MAX (16u << 20)
#define BACKOFF_BASE_MS 200
#define BACKOFF_CAP_MS 10000

void s3_set_error(bv_s3 *s, const char *key, const char *fmt, ...)
{
        char detail[768];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        BV_LOCK_GUARD(&s->lock);
        if (key)
                snprintf(s->errmsg, sizeof(s->errmsg), "%s/%s: %s", s->location, key, detail);
        else
                snprintf(s->errmsg, sizeof(s->errmsg), "%s: %s", s->location, detail);
}

int s3_query_add(char **q, const char *name, const char *value)
{
        size_t n = *q ? strlen(*q) : 0, vl = strlen(value);
        char *p = realloc(*q, n + strlen(name) + 3 * vl + 3), *o;

        if (!p)
                return -ENOMEM;
        *q = p;
        o = p + n;
        if (n > 0)
                *o++ = '&';
        o = stpcpy(o, name);
        *o++ = '=';
        for (size_t i = 0; i < vl; i++) {
                unsigned char c = (unsigned char)value[i];
                if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
                        *o++ = (char)c;
                else
                        o += sprintf(o, "%%%02X", c);
        }
        *o = '\0';
        return 0;
}

/* base_url + "/" + prefix/key with each byte but [A-Za-z0-9-_.~/] percent-encoded, + "?" query */
static char *build_url(bv_s3 *s, const s3_req *q)
{
        const char *prefix = s->conf->prefix;
        size_t n = strlen(s->base_url) + 3 * (strlen(prefix) + (q->key ? strlen(q->key) : 0)) + 8 +
                   (q->query ? strlen(q->query) : 0);
        char *url = malloc(n), *o;

        if (!url)
                return NULL;
        o = stpcpy(url, s->base_url);
        *o++ = '/';
        for (int part = q->key ? 0 : 2; part < 2; part++) {
                const char *p = part == 0 ? prefix : q->key;
                if (!p || !*p)
                        continue;
                if (part == 1 && *prefix)
                        *o++ = '/';
                for (; *p; p++) {
                        unsigned char c = (unsigned char)*p;
                        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/')
                                *o++ = (char)c;
                        else
                                o += sprintf(o, "%%%02X", c);
                }
        }
        if (!q->key && s->conf->path_style)
                o--; /* the bucket itself: ENDPOINT/BUCKET */
        if (q->query) {
                *o++ = '?';
                o = stpcpy(o, q->query);
        }
        *o = '\0';
        return url;
}

typedef struct xfer {
        s3_req *q;
        size_t body_pos;
        int error; /* -EFBIG, -ENOMEM from a callback */
} xfer;

static size_t read_cb(char *dst, size_t size, size_t nmemb, void *userdata)
{
        xfer *x = userdata;
        size_t n = MIN(size * nmemb, x->q->body_len - x->body_pos);

        memcpy(dst, (const uint8_t *)x->q->body + x->body_pos, n);
        x->body_pos += n;
        return n;
}

/* curl sends a request again on its own when a kept-alive connection turns out closed by the
 * server (its first write fails): the body is rewound for it. Without this, that PUT failed
 * ("necessary data rewind wasn't possible") and was not retried. */
static int seek_cb(void *userdata, curl_off_t offset, int origin)
{
        xfer *x = userdata;

        if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->q->body_len)
                return CURL_SEEKFUNC_CANTSEEK;
        x->body_pos = (size_t)offset;
        return CURL_SEEKFUNC_OK;
}

/* Appends n bytes to *buf (len used, *cap allocated, kept NUL-terminated), growing it twice
 * over when short (a realloc per piece copies the whole body each time under ASan). */
static int append(uint8_t **buf, size_t *len, size_t *cap, const void *data, size_t n, size_t max)
{
        if (*len + n > max)
                return -EFBIG;
        if (*len + n + 1 > *cap) {
                size_t twice = MIN(2 * *cap, max + 1);
                size_t need = MAX(*len + n + 1, twice);
                size_t want = MAX(need, (size_t)4096);
                uint8_t *p = realloc(*buf, want);
                if (!p)
                        return -ENOMEM;
                *buf = p;
                *cap = want;
        }
        memcpy(*buf + *len, data, n);
        *len += n;
        (*buf)[*len] = '\0';
        return 0;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
        xfer *x = userdata;
        s3_req *q = x->q;
        size_t n = size * nmemb;

        if (q->status < 200 || q->status >= 300) {
                size_t room = q->err_len < ERR_BODY_MAX ? ERR_BODY_MAX - q->err_len : 0;
                size_t keep = MIN(n, room);
                uint8_t *eb = (uint8_t *)q->err_body;
                if (keep > 0 && append(&eb, &q->err_len, &q->err_cap, data, keep, ERR_BODY_MAX) == 0)
                        q->err_body = (char *)eb;
                return n;
        }
        q->received += n;
        if (q->buf) {
                if (q->len < q->cap) {
                        size_t k = MIN(n, q->cap - q->len);
                        memcpy((uint8_t *)q->buf + q->len, data, k);
                        q->len += k;
                }
                return n;
        }
        if (!q->data && q->content_length > n && q->content_length <= (q->max ?: XML_BODY_MAX)) {
                /* the whole body at once, as Content-Length says */
                q->data = malloc((size_t)q->content_length + 1);
                q->data_cap = q->data ? (size_t)q->content_length + 1 : 0;
        }
        x->error = append(&q->data, &q->len, &q->data_cap, data, n, q->max ?: XML_BODY_MAX);
        return x->error < 0 ? 0 : n;
}

/* The value of header line h if it is "name: value", trimmed into out; false otherwise. */
static bool header_value(const char *h, size_t n, const char *name, char *out, size_t outlen)
{
        size_t nl = strlen(name), i, j;

        if (n <= nl || strncasecmp(h, name, nl) != 0 || h[nl] != ':')
                return false;
        for (i = nl + 1; i < n && (h[i] == ' ' || h[i] == '\t'); i++)
                ;
        for (j = n; j > i && isspace((unsigned char)h[j - 1]); j--)
                ;
        snprintf(out, outlen, "%.*s", (int)(j - i), h + i);
        return true;
}

static size_t header_cb(char *h, size_t size, size_t nmemb, void *userdata)
{
        s3_req *q = ((xfer *)userdata)->q;
        size_t n = size * nmemb;
        char v[256];

        if (n > 5 && strncmp(h, "HTTP/", 5) == 0) {
                const char *sp = memchr(h, ' ', n);
                q->status = sp ? strtol(sp + 1, NULL, 10) : 0;
                return n;
        }
        if (header_value(h, n, "ETag", v, sizeof(v))) {
                size_t l = strlen(v);
                bool quoted = l >= 2 && v[0] == '"' && v[l - 1] == '"';
                l = MIN(quoted ? l - 2 : l, sizeof(q->etag) - 1);
                memcpy(q->etag, v + quoted, l);
                q->etag[l] = '\0';
        } else if (header_value(h, n, "x-amz-version-id", v, sizeof(v)))
                snprintf(q->version_id, sizeof(q->version_id), "%s", v);
        else if (header_value(h, n, "Content-Length", v, sizeof(v))) {
                q->content_length = strtoull(v, NULL, 10);
                if (!q->have_size)
                        q->object_size = q->content_length;
                q->have_size = true;
        } else if (header_value(h, n, "Content-Range", v, sizeof(v))) {
                const char *slash = strchr(v, '/');
                unsigned long long first, last;
                if (slash && slash[1] != '*') {
                        q->object_size = strtoull(slash + 1, NULL, 10);
                        q->have_size = true;
                }
                if (sscanf(v, "bytes %llu-%llu", &first, &last) == 2 && last >= first)
                        q->range_len = last - first + 1;
        } else if (header_value(h, n, "Last-Modified", v, sizeof(v)))
                q->mtime = curl_getdate(v, NULL);
        else if (header_value(h, n, "Date", v, sizeof(v)))
                q->date = MAX((int64_t)curl_getdate(v, NULL), (int64_t)0);
        else if (header_value(h, n, "x-amz-object-lock-mode", v, sizeof(v)))
                q->lock_mode = strcasecmp(v, "GOVERNANCE") == 0 ? BV_S3_LOCK_GOVERNANCE : BV_S3_LOCK_COMPLIANCE;
        else if (header_value(h, n, "x-amz-object-lock-retain-until-date", v, sizeof(v)))
                q->retain_until = MAX(s3_parse_iso8601(v), (int64_t)0);
        else if (header_value(h, n, "x-amz-delete-marker", v, sizeof(v)))
                q->delete_marker = strcasecmp(v, "true") == 0;
        return n;
}

static CURL *pool_get(bv_s3 *s)
{
        {
                BV_LOCK_GUARD(&s->lock);
                if (s->n_pool > 0)
                        return s->pool[--s->n_pool];
        }
        return curl_easy_init();
}

static void pool_put(bv_s3 *s, CURL *c)
{
        BV_LOCK_GUARD(&s->lock);
        if (s->n_pool == s->cap_pool) {
                size_t cap = s->cap_pool ? 2 * s->cap_pool : 8;
                CURL **p = realloc(s->pool, cap * sizeof(*p));
                if (!p) {
                        curl_easy_cleanup(c);
                        return;
                }
                s->pool = p;
                s->cap_pool = cap;
        }
        s->pool[s->n_pool++] = c;
}

static void stats_add(bv_s3 *s, uint64_t sent, uint64_t received, bool retry)
{
        BV_LOCK_GUARD(&s->lock);
        s->stats.requests++;
        s->stats.retries += retry;
        s->stats.bytes_sent += sent;
        s->stats.bytes_received += received;
}

/* The headers every request carries, then the caller's. */
static struct curl_slist *request_headers(bv_s3 *s, const s3_req *q)
{
        struct curl_slist *h = NULL, *t;
        char line[128];
        char sha[65];

        s3_sha256_hex(q->body, q->body ? q->body_len : 0, sha);
        snprintf(line, sizeof(line), "x-amz-content-sha256: %s", sha);
        if (!(t = curl_slist_append(h, line)))
                goto fail;
        h = t;
        /* no 100-continue round trip (not every store answers it) */
        if (!(t = curl_slist_append(h, "Expect:")))
                goto fail;
        h = t;
        if (strcmp(q->method, "POST") == 0 && !(h = curl_slist_append(h, "Content-Type: application/xml")))
                goto fail;
        if (s->conf->session_token) {
                _cleanup_free_ char *tok = NULL;
                if (asprintf(&tok, "x-amz-security-token: %s", s->conf->session_token) < 0 ||
                    !(t = curl_slist_append(h, tok)))
                        goto fail;
                h = t;
        }
        for (const struct curl_slist *e = q->headers; e; e = e->next) {
                if (!(t = curl_slist_append(h, e->data)))
                        goto fail;
                h = t;
        }
        return h;
fail:
        curl_slist_free_all(h);
        return NULL;
}

static int setup(bv_s3 *s, CURL *c, s3_req *q, xfer *x, const char *url, struct curl_slist *headers)
{
        CURLcode e = CURLE_OK;

        curl_easy_reset(c);
#define SET(opt, val) \
        do { if (e == CURLE_OK) e = curl_easy_setopt(c, opt, val); } while (0)
        SET(CURLOPT_URL, url);
        SET(CURLOPT_NOSIGNAL, 1L);
        SET(CURLOPT_AWS_SIGV4, s->sigv4);
        SET(CURLOPT_USERNAME, s->conf->access_key);
        SET(CURLOPT_PASSWORD, s->conf->secret_key);
        SET(CURLOPT_HTTPHEADER, headers);
        SET(CURLOPT_HEADERFUNCTION, header_cb);
        SET(CURLOPT_HEADERDATA, x);
        SET(CURLOPT_WRITEFUNCTION, write_cb);
        SET(CURLOPT_WRITEDATA, x);
        SET(CURLOPT_SSL_VERIFYPEER, 1L);
        SET(CURLOPT_SSL_VERIFYHOST, 2L);
        SET(CURLOPT_PROTOCOLS_STR, "http,https");
        SET(CURLOPT_CONNECTTIMEOUT, (long)s->conf->timeout_s);
        /* a transfer slower than 1 KiB/s for the timeout (BLKVAULT_S3_TIMEOUT) is dead: retried */
        SET(CURLOPT_LOW_SPEED_LIMIT, 1024L);
        SET(CURLOPT_LOW_SPEED_TIME, (long)s->conf->timeout_s);
        if (s->conf->ca_bundle)
                SET(CURLOPT_CAINFO, s->conf->ca_bundle);
        if (strcmp(q->method, "HEAD") == 0)
                SET(CURLOPT_NOBODY, 1L);
        else if (strcmp(q->method, "PUT") == 0) {
                SET(CURLOPT_UPLOAD, 1L);
                SET(CURLOPT_READFUNCTION, read_cb);
                SET(CURLOPT_READDATA, x);
                SET(CURLOPT_SEEKFUNCTION, seek_cb);
                SET(CURLOPT_SEEKDATA, x);
                SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)(q->body ? q->body_len : 0));
        } else if (strcmp(q->method, "POST") == 0) {
                SET(CURLOPT_POST, 1L);
                SET(CURLOPT_POSTFIELDS, q->body ? (const char *)q->body : "");
                SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(q->body ? q->body_len : 0));
        } else if (strcmp(q->method, "GET") != 0)
                SET(CURLOPT_CUSTOMREQUEST, q->method);
#undef SET
        return e == CURLE_OK ? 0 : -EINVAL;
}

static void reset_answer(s3_req *q)
{
        free(q->data);
        free(q->err_body);
        q->data = NULL;
        q->err_body = NULL;
        q->len = q->err_len = q->data_cap = q->err_cap = 0;
        q->received = 0;
        q->status = 0;
        q->etag[0] = q->version_id[0] = '\0';
        q->content_length = q->object_size = q->range_len = 0;
        q->have_size = q->delete_marker = false;
        q->mtime = q->retain_until = q->date = 0;
        q->lock_mode = BV_S3_LOCK_NONE;
}

void s3_req_done(s3_req *q)
{
        free(q->data);
        free(q->err_body);
        q->data = NULL;
        q->err_body = NULL;
}

static int map_curl(CURLcode e)
{
        switch (e) {
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM:
                return -EPROTO;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
                return -EINVAL;
        default:
                return -ECONNRESET;
        }
}

static bool curl_retryable(CURLcode e)
{
        return e == CURLE_COULDNT_CONNECT || e == CURLE_OPERATION_TIMEDOUT || e == CURLE_SEND_ERROR ||
               e == CURLE_RECV_ERROR || e == CURLE_GOT_NOTHING || e == CURLE_PARTIAL_FILE ||
               e == CURLE_COULDNT_RESOLVE_HOST || e == CURLE_SEND_FAIL_REWIND || e == CURLE_WEIRD_SERVER_REPLY;
}

static int map_status(long status, const char *code)
{
        if (status == 404)
                return -ENOENT;
        if (status == 412)
                return -EEXIST;
        if (status == 403 || status == 401)
                return -EACCES;
        if (status == 501 || status == 405)
                return -EOPNOTSUPP;
        if (status == 409)
                return -EBUSY;
        if (status == 503 && strcmp(code, "SlowDown") == 0)
                return -EAGAIN;
        if (status == 400)
                return -EINVAL;
        return -EIO;
}

static bool status_retryable(long status, const char *code)
{
        return status == 500 || status == 502 || status == 503 || status == 504 || status == 429 ||
               (status == 400 && strcmp(code, "RequestTimeout") == 0);
}

/* Full jitter over an exponential backoff: a random wait in [d/2, d], d = base * 2^attempt. */
static void backoff(unsigned attempt)
{
        static _Thread_local uint64_t seed;
        uint64_t d = (uint64_t)BACKOFF_BASE_MS << MIN(attempt, 16u), ms;
        struct timespec ts;

        if (seed == 0)
                seed = bv_now_monotonic_ns() | 1;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        d = MIN(d, (uint64_t)BACKOFF_CAP_MS);
        ms = d / 2 + seed % (d / 2 + 1);
        ts.tv_sec = (time_t)(ms / 1000);
        ts.tv_nsec = (long)(ms % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void (*retry_notify)(const char *message, void *userdata);
static void *retry_notify_userdata;

void bv_s3_set_retry_notify(void (*fn)(const char *message, void *userdata), void *userdata)
{
        retry_notify = fn;
        retry_notify_userdata = userdata;
}

/* Attempt attempt failed and another follows: said to the notify hook, so that a server that
 * does not answer is not waited on in silence. */
static void notify_retry(bv_s3 *s, s3_req *q, CURLcode e, unsigned attempt)
{
        char msg[1200];

        if (!retry_notify)
                return;
        if (e == CURLE_OPERATION_TIMEDOUT)
                snprintf(msg, sizeof(msg), "S3: no answer from %s for %u s, retrying (%u/%u)", s->conf->endpoint,
                         s->conf->timeout_s, attempt + 1, s->conf->max_attempts);
        else {
                char err[1024];
                bv_s3_errmsg(s, err, sizeof(err));
                snprintf(msg, sizeof(msg), "S3: %s, retrying (%u/%u)", err, attempt + 1, s->conf->max_attempts);
        }
        retry_notify(msg, retry_notify_userdata);
}

/* Sets the message for the failed attempt; returns -errno and whether to retry. */
static int attempt_failed(bv_s3 *s, s3_req *q, CURLcode e, const char *curl_err, unsigned attempt,
                          bool *ret_retry)
{
        const char *what = q->what ?: q->method;
        char code[64] = "", msg[256] = "";
        char attempts[48] = "";

        if (attempt > 1)
                snprintf(attempts, sizeof(attempts), " after %u attempts", attempt);
        if (e != CURLE_OK) {
                *ret_retry = curl_retryable(e);
                s3_set_error(s, q->key, "%s: cannot reach %s%s: %s", what, s->conf->endpoint, attempts,
                             curl_err[0] ? curl_err : curl_easy_strerror(e));
                return map_curl(e);
        }
        s3_xml_error(q->err_body, q->err_len, code, sizeof(code), msg, sizeof(msg));
        *ret_retry = status_retryable(q->status, code);
        s3_set_error(s, q->key, "%s: HTTP %ld%s%s%s%s%s", what, q->status, code[0] ? " " : "", code, attempts,
                     msg[0] ? ": " : "", msg);
        return map_status(q->status, code);
}

/* A 206 whose body is shorter than the range its Content-Range names: a Content-Length that
 * lies (a proxy's), which curl cannot see. Said as the failure of the attempt, retried; taken as
 * the data, it read as damage in the repository. */
static bool body_short(bv_s3 *s, s3_req *q, unsigned attempt)
{
        if (q->status != 206 || q->range_len == 0 || q->received == q->range_len)
                return false;
        s3_set_error(s, q->key, "%s: HTTP 206 with %llu bytes of the %llu its Content-Range names%s", q->what ?: q->method,
                     (unsigned long long)q->received, (unsigned long long)q->range_len,
                     attempt > 1 ? " (every attempt)" : "");
        return true;
}

/* The server's clock, as its latest Date states it (bv_s3_now). */
static void clock_learn(bv_s3 *s, int64_t date)
{
        BV_LOCK_GUARD(&s->lock);
        s->clock_offset = date - (int64_t)time(NULL);
}

int s3_request(bv_s3 *s, s3_req *q, long ok_status)
{
        _cleanup_free_ char *url = build_url(s, q);
        struct curl_slist *headers;
        CURL *c;
        int r = -EIO;

        if (!url)
                return -ENOMEM;
        headers = request_headers(s, q);
        if (!headers)
                return -ENOMEM;
        c = pool_get(s);
        if (!c) {
                curl_slist_free_all(headers);
                return -ENOMEM;
        }
        for (unsigned attempt = 1;; attempt++) {
                char curl_err[CURL_ERROR_SIZE] = "";
                xfer x = { .q = q };
                bool retry = false;
                CURLcode e;

                reset_answer(q);
                r = setup(s, c, q, &x, url, headers);
                if (r < 0)
                        break;
                curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
                e = curl_easy_perform(c);
                curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
                stats_add(s, x.body_pos, q->received, attempt > 1);
                if (q->date > 0)
                        clock_learn(s, q->date);
                if (x.error < 0) {
                        r = x.error;
                        s3_set_error(s, q->key, "%s: the answer is larger than %zu bytes", q->what ?: q->method,
                                     q->max ?: (size_t)XML_BODY_MAX);
                        break;
                }
                if (e == CURLE_OK && ((q->status >= 200 && q->status < 300) || (ok_status && q->status == ok_status))) {
                        if (!body_short(s, q, attempt)) {
                                r = 0;
                                break;
                        }
                        /* the rest of that body waits on the connection: a new handle drops it */
                        curl_easy_cleanup(c);
                        if (!(c = curl_easy_init())) {
                                r = -ENOMEM;
                                break;
                        }
                        r = -EIO, retry = true;
                } else
                        r = attempt_failed(s, q, e, curl_err, attempt, &retry);
                if (!retry || attempt >= s->conf->max_attempts)
                        break;
                notify_retry(s, q, e, attempt);
                backoff(attempt - 1);
        }
        if (c)
                pool_put(s, c);
        curl_slist_free_all(headers);
        return r;
}

int s3_request_with(bv_s3 *s, s3_req *q, const char *query, struct curl_slist *headers)
{
        int r;

        q->query = query;
        q->headers = headers;
        r = s3_request(s, q, 0);
        curl_slist_free_all(headers);
        q->headers = NULL;
        return r;
}
