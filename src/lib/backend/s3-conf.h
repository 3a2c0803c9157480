/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Where an S3 repository is and how to reach it: the location s3://BUCKET[/PREFIX] and, from the
 * AWS conventions, the endpoint, credentials and region:
 *   endpoint     AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else endpoint_url of the profile in
 *                the config file, else AWS (https://s3.REGION.amazonaws.com, virtual-hosted
 *                addressing); a given endpoint is addressed path-style (ENDPOINT/BUCKET/KEY)
 *   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
 *                profile's aws_access_key_id/aws_secret_access_key/aws_session_token in the
 *                shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials)
 *   profile      AWS_PROFILE, else "default"
 *   region       AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region in the config
 *                file (AWS_CONFIG_FILE, else ~/.aws/config; section [profile NAME], or [default]),
 *                else us-east-1
 *   TLS          verified, against AWS_CA_BUNDLE when set, else the system's CAs
 *   retries      AWS_MAX_ATTEMPTS attempts per request (default 5)
 *   timeout      BLKVAULT_S3_TIMEOUT seconds (default 60, 1 to 3600): a connection not made in
 *                that time, or a transfer below 1 KiB/s for that long, is an attempt that failed
 *                (then retried): a hung server costs about timeout x attempts
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bv_s3_conf {
        char *bucket;
        char *prefix; /* without leading or trailing '/', "" for the bucket's root */
        char *endpoint; /* scheme://host[:port], no trailing '/' */
        bool path_style;
        char *region;
        char *access_key;
        char *secret_key; /* in locked memory (secmem.h) */
        char *session_token; /* NULL when none */
        char *ca_bundle; /* NULL: the system's */
        unsigned max_attempts;
        unsigned timeout_s; /* BLKVAULT_S3_TIMEOUT */
        uint64_t multipart_threshold; /* bytes; larger objects go up in parts */
        uint64_t part_size; /* bytes, at least 5 MiB (S3's least but for the last part) */
} bv_s3_conf;

#define BV_S3_MULTIPART_THRESHOLD_DEFAULT (UINT64_C(64) << 20)
#define BV_S3_PART_SIZE_DEFAULT (UINT64_C(32) << 20)
#define BV_S3_PART_SIZE_MIN (UINT64_C(5) << 20)
#define BV_S3_MAX_ATTEMPTS_DEFAULT 5
#define BV_S3_TIMEOUT_DEFAULT 60

/* Whether s names an S3 location ("s3://..."). */
bool bv_s3_is_location(const char *s);

/* Splits "s3://BUCKET[/PREFIX]" (a trailing '/' is dropped). -EINVAL for anything else, or a
 * bucket name S3 would refuse (3 to 63 of [a-z0-9.-]). */
int bv_s3_location_parse(const char *location, char **ret_bucket, char **ret_prefix);

/* Fills a configuration for location from the environment and the AWS files as above.
 * credentials_file, when not NULL, is read instead of the shared credentials file (the
 * appliance's root-only file of a [remote] section). -ENOKEY when no credentials are found
 * anywhere; -ESRCH when AWS_PROFILE names a profile that neither file has; -EINVAL for a
 * malformed location, endpoint, AWS_MAX_ATTEMPTS or BLKVAULT_S3_TIMEOUT. */
int bv_s3_conf_from_env(const char *location, const char *credentials_file, bv_s3_conf **ret);

/* A deep copy (NULL on -ENOMEM). */
bv_s3_conf *bv_s3_conf_dup(const bv_s3_conf *c);
void bv_s3_conf_free(bv_s3_conf *c); /* accepts NULL; wipes the secrets */
