/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "s3-conf.h"
#include "secmem.h"

bool bv_s3_is_location(const char *s)
{
        return s && strncmp(s, "s3://", 5) == 0;
}

static bool bucket_name_valid(const char *b, size_t n)
{
        if (n < 3 || n > 63)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '.' ||
                      b[i] == '-'))
                        return false;
        return b[0] != '-' && b[0] != '.' && b[n - 1] != '-' && b[n - 1] != '.';
}

int bv_s3_location_parse(const char *location, char **ret_bucket, char **ret_prefix)
{
        const char *b, *slash;
        size_t blen, plen;
        char *bucket, *prefix;

        if (!bv_s3_is_location(location))
                return -EINVAL;
        b = location + 5;
        slash = strchr(b, '/');
        blen = slash ? (size_t)(slash - b) : strlen(b);
        if (!bucket_name_valid(b, blen))
                return -EINVAL;
        const char *p = slash ? slash + 1 : "";
        plen = strlen(p);
        while (plen > 0 && p[plen - 1] == '/')
                plen--;
        /* an empty path element or a dot element would name keys S3 treats as the same or odd */
        if (p[0] == '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") || strncmp(p, "./", 2) == 0 ||
            strncmp(p, "../", 3) == 0 || (plen == 1 && p[0] == '.') || (plen == 2 && strncmp(p, "..", 2) == 0))
                return -EINVAL;
        bucket = strndup(b, blen);
        prefix = strndup(p, plen);
        if (!bucket || !prefix) {
                free(bucket);
                free(prefix);
                return -ENOMEM;
        }
        *ret_bucket = bucket;
        *ret_prefix = prefix;
        return 0;
}

static char *secure_strdup(const char *s)
{
        size_t n = strlen(s) + 1;
        char *p = bv_secure_alloc(n);

        if (p)
                memcpy(p, s, n);
        return p;
}

static void secure_strfree(char *s)
{
        if (s)
                bv_secure_free(s, strlen(s) + 1);
}

void bv_s3_conf_free(bv_s3_conf *c)
{
        if (!c)
                return;
        free(c->bucket);
        free(c->prefix);
        free(c->endpoint);
        free(c->region);
        free(c->access_key);
        secure_strfree(c->secret_key);
        if (c->session_token) {
                bv_wipe(c->session_token, strlen(c->session_token));
                free(c->session_token);
        }
        free(c->ca_bundle);
        free(c);
}


bv_s3_conf *bv_s3_conf_dup(const bv_s3_conf *c)
{
        bv_s3_conf *d = calloc(1, sizeof(*d));

        if (!d)
                return NULL;
        d->path_style = c->path_style;
        d->max_attempts = c->max_attempts;
        d->timeout_s = c->timeout_s;
        d->multipart_threshold = c->multipart_threshold;
        d->part_size = c->part_size;
        if (bv_strdup_opt(c->bucket, &d->bucket) < 0 || bv_strdup_opt(c->prefix, &d->prefix) < 0 ||
            bv_strdup_opt(c->endpoint, &d->endpoint) < 0 || bv_strdup_opt(c->region, &d->region) < 0 ||
            bv_strdup_opt(c->access_key, &d->access_key) < 0 || bv_strdup_opt(c->session_token, &d->session_token) < 0 ||
            bv_strdup_opt(c->ca_bundle, &d->ca_bundle) < 0 || !(d->secret_key = secure_strdup(c->secret_key))) {
                bv_s3_conf_free(d);
                return NULL;
        }
        return d;
}

/* The values of one profile read from an AWS ini file. */
typedef struct profile_values {
        const char *section; /* the section wanted */
        char *access_key, *secret_key, *session_token, *region, *endpoint;
        bool seen; /* the section has a setting */
        int error;
} profile_values;

static void profile_values_done(profile_values *v)
{
        free(v->access_key);
        secure_strfree(v->secret_key);
        if (v->session_token)
                bv_wipe(v->session_token, strlen(v->session_token));
        free(v->session_token);
        free(v->region);
        free(v->endpoint);
}

static int profile_handler(void *user, const char *section, const char *name, const char *value)
{
        profile_values *v = user;
        char **dst = NULL;

        if (strcmp(section, v->section) != 0)
                return 1;
        v->seen = true;
        if (strcmp(name, "aws_access_key_id") == 0)
                dst = &v->access_key;
        else if (strcmp(name, "aws_secret_access_key") == 0) {
                secure_strfree(v->secret_key);
                if (!(v->secret_key = secure_strdup(value)))
                        v->error = -ENOMEM;
                return 1;
        } else if (strcmp(name, "aws_session_token") == 0)
                dst = &v->session_token;
        else if (strcmp(name, "region") == 0)
                dst = &v->region;
        else if (strcmp(name, "endpoint_url") == 0)
                dst = &v->endpoint;
        if (dst) {
                free(*dst);
                if (!(*dst = strdup(value)))
                        v->error = -ENOMEM;
        }
        return 1;
}

/* Reads section of the ini file path into v; a missing file is no error (-ENOENT is ignored). */
static int read_profile(const char *path, const char *section, profile_values *v)
{
        FILE *f;
        int r;

        v->section = section;
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        r = ini_parse_file(f, profile_handler, v);
        fclose(f);
        if (v->error < 0)
                return v->error;
        return r == 0 ? 0 : -EINVAL;
}

static char *home_file(const char *env, const char *name)
{
        const char *p = getenv(env), *home;
        char *s;

        if (p && *p)
                return strdup(p);
        home = getenv("HOME");
        if (!home || !*home)
                return NULL;
        if (asprintf(&s, "%s/.aws/%s", home, name) < 0)
                return NULL;
        return s;
}

static const char *env_nonempty(const char *name)
{
        const char *v = getenv(name);

        return v && *v ? v : NULL;
}

/* Credentials: the environment, else credentials_file or the shared file's profile. */
static int conf_credentials(bv_s3_conf *c, const char *credentials_file, const char *profile, bool *seen)
{
        const char *ak = env_nonempty("AWS_ACCESS_KEY_ID"), *sk = env_nonempty("AWS_SECRET_ACCESS_KEY");
        _cleanup_free_ char *path = NULL;
        profile_values v = {};
        int r;

        if (ak && sk && !credentials_file) {
                if (!(c->access_key = strdup(ak)) || !(c->secret_key = secure_strdup(sk)))
                        return -ENOMEM;
                return bv_strdup_opt(env_nonempty("AWS_SESSION_TOKEN"), &c->session_token);
        }
        path = credentials_file ? strdup(credentials_file) : home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
        if (!path)
                return -ENOKEY;
        r = read_profile(path, profile, &v);
        *seen |= v.seen;
        if (r >= 0 && credentials_file && !v.access_key) /* a [remote]'s file may have no section */
                r = read_profile(path, "", &v);
        if (r >= 0 && (!v.access_key || !v.secret_key))
                r = -ENOKEY;
        if (r >= 0) {
                c->access_key = TAKE_PTR(v.access_key);
                c->secret_key = TAKE_PTR(v.secret_key);
                c->session_token = TAKE_PTR(v.session_token);
        }
        profile_values_done(&v);
        return r;
}

/* Region and endpoint_url of the profile in the config file ("[profile NAME]", "[default]"). */
static int conf_profile_settings(const char *profile, char **ret_region, char **ret_endpoint, bool *seen)
{
        _cleanup_free_ char *path = home_file("AWS_CONFIG_FILE", "config"), *section = NULL;
        profile_values v = {};
        int r;

        if (!path)
                return 0;
        if (strcmp(profile, "default") == 0)
                section = strdup("default");
        else if (asprintf(&section, "profile %s", profile) < 0)
                section = NULL;
        if (!section)
                return -ENOMEM;
        r = read_profile(path, section, &v);
        *seen |= v.seen;
        if (r >= 0) {
                *ret_region = TAKE_PTR(v.region);
                *ret_endpoint = TAKE_PTR(v.endpoint);
        }
        profile_values_done(&v);
        return r;
}

/* "http[s]://host[:port]" with nothing after the authority but an optional '/'. */
static int set_endpoint(bv_s3_conf *c, const char *url)
{
        size_t n = strlen(url);
        const char *host;

        if (strncmp(url, "https://", 8) == 0)
                host = url + 8;
        else if (strncmp(url, "http://", 7) == 0)
                host = url + 7;
        else
                return -EINVAL;
        while (n > 0 && url[n - 1] == '/')
                n--;
        if ((size_t)(host - url) >= n || memchr(host, '/', n - (size_t)(host - url)) || strpbrk(url, "?# \t\n"))
                return -EINVAL;
        c->endpoint = strndup(url, n);
        c->path_style = true;
        return c->endpoint ? 0 : -ENOMEM;
}

/* A whole number from min to max in the environment variable name (def when unset); -EINVAL. */
static int env_number(const char *name, unsigned long min, unsigned long max, unsigned def, unsigned *ret)
{
        const char *v = env_nonempty(name);
        char *end;
        unsigned long n;

        *ret = def;
        if (!v)
                return 0;
        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno || *end || n < min || n > max || !isdigit((unsigned char)v[0]))
                return -EINVAL;
        *ret = (unsigned)n;
        return 0;
}

static int conf_settings(bv_s3_conf *c, const char *profile, bool *seen)
{
        _cleanup_free_ char *cfg_region = NULL, *cfg_endpoint = NULL;
        const char *region, *endpoint;
        int r;

        r = conf_profile_settings(profile, &cfg_region, &cfg_endpoint, seen);
        if (r < 0)
                return r;
        region = env_nonempty("AWS_REGION") ?: env_nonempty("AWS_DEFAULT_REGION") ?: cfg_region ?: "us-east-1";
        if (!(c->region = strdup(region)))
                return -ENOMEM;
        endpoint = env_nonempty("AWS_ENDPOINT_URL_S3") ?: env_nonempty("AWS_ENDPOINT_URL") ?: cfg_endpoint;
        if (endpoint)
                r = set_endpoint(c, endpoint);
        else if (asprintf(&c->endpoint, "https://s3.%s.amazonaws.com", c->region) < 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        r = bv_strdup_opt(env_nonempty("AWS_CA_BUNDLE"), &c->ca_bundle);
        if (r < 0)
                return r;
        r = env_number("AWS_MAX_ATTEMPTS", 1, 100, BV_S3_MAX_ATTEMPTS_DEFAULT, &c->max_attempts);
        if (r >= 0)
                r = env_number("BLKVAULT_S3_TIMEOUT", 1, 3600, BV_S3_TIMEOUT_DEFAULT, &c->timeout_s);
        return r;
}

int bv_s3_conf_from_env(const char *location, const char *credentials_file, bv_s3_conf **ret)
{
        bv_s3_conf *c = calloc(1, sizeof(*c));
        const char *profile = env_nonempty("AWS_PROFILE") ?: "default";
        int r;

        if (!c)
                return -ENOMEM;
        c->multipart_threshold = BV_S3_MULTIPART_THRESHOLD_DEFAULT;
        c->part_size = BV_S3_PART_SIZE_DEFAULT;
        r = bv_s3_location_parse(location, &c->bucket, &c->prefix);
        bool seen = false, env_keys = env_nonempty("AWS_ACCESS_KEY_ID") && env_nonempty("AWS_SECRET_ACCESS_KEY");
        if (r >= 0)
                r = conf_settings(c, profile, &seen);
        /* a profile the user named that neither file has: a typo, said as such (the AWS CLI
         * refuses it too), not as missing credentials */
        if (r >= 0 && env_nonempty("AWS_PROFILE") && !env_keys && !credentials_file) {
                _cleanup_free_ char *path = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
                profile_values v = {};
                if (path && read_profile(path, profile, &v) >= 0)
                        seen |= v.seen;
                profile_values_done(&v);
                if (!seen)
                        r = -ESRCH;
        }
        if (r >= 0)
                r = conf_credentials(c, credentials_file, profile, &seen);
        if (r < 0) {
                bv_s3_conf_free(c);
                return r;
        }
        *ret = c;
        return 0;
}
