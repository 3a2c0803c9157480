#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The S3 client (src/lib/backend/s3*) against a real versitygw: PUT/GET/ranged GET/HEAD, LIST
# past 1000 keys, DELETE, conditional PUT (412), multipart, Object Lock (a locked version's DELETE
# refused, retention extended), versions (GET by versionId, ListObjectVersions), where the
# endpoint and credentials come from, and the messages of failures.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
: "${S3_TOOL:?run through meson test}"
s3_start
s3_mb bvtest
s3_mb bvvers versioned
s3_mb bvlock lock
L=s3://bvtest/repo
tool() { "$S3_TOOL" "$@"; }
# expect_fail ERRNO-NAME PATTERN CMD...: CMD fails, its message matches PATTERN and names ERRNO-NAME
expect_fail() {
    local name=$1 pat=$2; shift 2
    if "$@" >"$T/out" 2>"$T/err"; then die "$* succeeded; expected $name"; fi
    grep -q "\[$name\]" "$T/err" || die "$*: expected [$name], got: $(cat "$T/err")"
    grep -qE "$pat" "$T/err" || die "$*: message does not match '$pat': $(cat "$T/err")"
}

# --- the store honours If-None-Match: the probe at open says so
tool --probe "$L" open | grep_q -x 'conditional-put=yes' || die "the probe did not find versitygw's conditional PUT"

# --- PUT and GET, from a file and from memory, binary data
head -c 1048573 /dev/urandom >"$T/data"
tool "$L" put packs/one "$T/data"
tool "$L" get packs/one >"$T/back"
cmp "$T/data" "$T/back" || die "GET returned other bytes than PUT stored"
tool "$L" putmem packs/two "$T/data"
tool "$L" get packs/two | cmp - "$T/data" || die "GET of a PUT from memory differs"
# it is stored under the prefix
s3_curl -f "http://127.0.0.1:$S3_PORT/bvtest/repo/packs/one" | cmp - "$T/data" || die "not stored as repo/packs/one"
# an empty object
: >"$T/empty"
tool "$L" put empty "$T/empty"
[ "$(tool "$L" get empty | wc -c)" = 0 ] || die "an empty object is not empty"

# --- ranged GET: inside, short at the end, nothing at or past it
tool "$L" range packs/one 1000 4096 | cmp - <(tail -c +1001 "$T/data" | head -c 4096) || die "ranged GET differs"
[ "$(tool "$L" range packs/one 1048570 100 | wc -c)" = 3 ] || die "a range over the end is not short"
tool "$L" range packs/one 1048570 100 | cmp - <(tail -c 3 "$T/data") || die "the short range differs"
[ "$(tool "$L" range packs/one 1048573 10 | wc -c)" = 0 ] || die "a range at the end is not empty"
[ "$(tool "$L" range packs/one 5000000 10 | wc -c)" = 0 ] || die "a range past the end is not empty"

# --- HEAD
tool "$L" head packs/one >"$T/head"
grep -q "^size=1048573 etag=$(md5sum <"$T/data" | cut -c1-32) " "$T/head" || die "HEAD: $(cat "$T/head")"
expect_fail ENOENT "s3://bvtest/repo/packs/none: HEAD: HTTP 404" tool "$L" head packs/none

# --- LIST past one page (1000 keys): 1100 keys in two pages
tool "$L" putmany many/k 1100
before=$(s3_log_count s3_ListObjectsV2)
tool "$L" list many/ >"$T/list"
[ "$(wc -l <"$T/list")" = 1100 ] || die "LIST found $(wc -l <"$T/list") keys of 1100"
[ "$(head -1 "$T/list")" = "many/k00000 11" ] || die "LIST: $(head -1 "$T/list")"
[ "$(tail -1 "$T/list")" = "many/k01099 11" ] || die "LIST: $(tail -1 "$T/list")"
sort -c "$T/list" || die "LIST is not in key order"
# one LIST at open, two pages
[ $(($(s3_log_count s3_ListObjectsV2) - before)) = 3 ] || die "LIST of 1100 keys took $(($(s3_log_count s3_ListObjectsV2) - before)) requests, not 1 + 2"
tool "$L" list | grep -c '^many/' | grep_q -x 1100 || die "LIST of everything misses keys"
tool "$L" list packs/ | cut -d' ' -f1 | tr '\n' ' ' | grep_q -x 'packs/one packs/two ' || die "LIST packs/: $(tool "$L" list packs/)"
# a location without a prefix lists the bucket's keys as they are
tool s3://bvtest list repo/packs/ | cut -d' ' -f1 | head -1 | grep_q -x repo/packs/one || die "LIST without a prefix"

# --- DELETE
tool "$L" delete packs/two
expect_fail ENOENT "s3://bvtest/repo/packs/two: GET: HTTP 404 NoSuchKey" tool "$L" get packs/two
tool "$L" delete packs/never-there

# --- conditional PUT: 412 on a key that is there, fine on a new one
echo other >"$T/other"
expect_fail EEXIST "s3://bvtest/repo/packs/one: PUT: HTTP 412 PreconditionFailed" tool --probe --if-none-match "$L" put packs/one "$T/other"
tool "$L" get packs/one | cmp - "$T/data" || die "a refused conditional PUT changed the object"
tool --probe --if-none-match "$L" put packs/three "$T/other"
# without the probe the client does not trust the header: it is not sent
tool --if-none-match "$L" put packs/three "$T/other"

# --- multipart: 12 MiB in parts of 5 MiB above a threshold of 6 MiB
head -c $((12 << 20)) /dev/urandom >"$T/big"
parts=$(s3_log_count s3_UploadPart)
tool --threshold=$((6 << 20)) --part=$((5 << 20)) "$L" put big "$T/big"
[ $(($(s3_log_count s3_UploadPart) - parts)) = 3 ] || die "12 MiB did not go up in 3 parts"
[ "$(s3_log_count s3_CompleteMultipartUpload)" = 1 ] || die "no CompleteMultipartUpload"
tool "$L" get big | cmp - "$T/big" || die "a multipart object differs"
tool "$L" range big $((5 << 20)) 8 | cmp - <(tail -c +$(((5 << 20) + 1)) "$T/big" | head -c 8) || die "a range across parts differs"
tool --threshold=$((6 << 20)) --part=$((5 << 20)) "$L" putmem bigmem "$T/big"
tool "$L" get bigmem | cmp - "$T/big" || die "a multipart object from memory differs"
# conditional: the second upload of the key is refused at completion, and aborted
head -c $((7 << 20)) /dev/urandom >"$T/bigother"
expect_fail EEXIST "s3://bvtest/repo/big: multipart complete: HTTP 412" \
    tool --probe --if-none-match --threshold=$((6 << 20)) --part=$((5 << 20)) "$L" put big "$T/bigother"
[ "$(s3_log_count s3_AbortMultipartUpload)" = 1 ] || die "the refused multipart upload was not aborted"
tool "$L" get big | cmp - "$T/big" || die "a refused multipart upload changed the object"

# --- versions: two versions of a key, the old one read by its id
V=s3://bvvers/r
echo first >"$T/v1"; echo second >"$T/v2"
tool "$V" put k "$T/v1"
tool "$V" put k "$T/v2"
tool "$V" versions >"$T/versions"
[ "$(wc -l <"$T/versions")" = 2 ] || die "ListObjectVersions: $(cat "$T/versions")"
old=$(awk '$3 == "old" { print $2 }' "$T/versions")
[ -n "$old" ] && [ "$old" != - ] || die "no old version listed: $(cat "$T/versions")"
tool --version="$old" "$V" get k | cmp - "$T/v1" || die "GET by versionId did not return the old version"
tool --version="$old" "$V" range k 0 3 | grep_q -x fir || die "a ranged GET by versionId"
tool "$V" get k | cmp - "$T/v2" || die "GET of the current version"
tool "$V" delete k
expect_fail ENOENT "HTTP 404" tool "$V" get k
tool "$V" versions | grep_q ' latest marker$' || die "no delete marker listed after DELETE"
tool --version="$old" "$V" get k | cmp - "$T/v1" || die "the old version is gone after DELETE"
expect_fail EINVAL "s3://bvvers/r/k: GET: HTTP 400 InvalidArgument" tool --version=nosuchversion "$V" get k

# --- Object Lock: a locked version cannot be deleted; its retention can be extended
K=s3://bvlock/r
tool --retain=3600 "$K" put locked "$T/data"
tool "$K" head locked >"$T/head"
grep -q ' lock=compliance ' "$T/head" || die "no COMPLIANCE lock: $(cat "$T/head")"
until=$(sed -n 's/.*retain-until=\([0-9]*\).*/\1/p' "$T/head")
now=$(date +%s)
[ "$until" -gt $((now + 3500)) ] && [ "$until" -le $((now + 3600)) ] || die "retain-until $until is not an hour from $now"
ver=$(sed -n 's/.* version=\([^ ]*\) .*/\1/p' "$T/head")
expect_fail EACCES "s3://bvlock/r/locked: DELETE: HTTP 403" tool --version="$ver" "$K" delete locked
tool --version="$ver" "$K" retention locked 7200
until2=$(tool --version="$ver" "$K" head locked | sed -n 's/.*retain-until=\([0-9]*\).*/\1/p')
[ "$until2" -gt $((until + 3500)) ] || die "retention was not extended: $until -> $until2"
# a plain DELETE leaves a marker; the locked version stays and reads
tool "$K" delete locked
expect_fail ENOENT "HTTP 404" tool "$K" get locked
tool --version="$ver" "$K" get locked | cmp - "$T/data" || die "the locked version does not read after DELETE"
# a multipart upload with retention (Content-MD5 on every part)
tool --retain=600 --threshold=$((6 << 20)) --part=$((5 << 20)) "$K" put lockedbig "$T/big"
tool "$K" head lockedbig | grep_q ' lock=compliance ' || die "a multipart upload was not locked"
tool --retain=600 --governance "$K" put gov "$T/v1"
tool "$K" head gov | grep_q ' lock=governance ' || die "no GOVERNANCE lock"

# --- where the endpoint and credentials come from, and their failures
expect_fail ENOENT "s3://nosuchbucket/x: LIST: HTTP 404 NoSuchBucket" tool s3://nosuchbucket/x open
expect_fail EINVAL "s3://A_B" tool s3://A_B open
expect_fail EINVAL "/tmp/x" tool /tmp/x open
expect_fail EACCES "s3://bvtest/repo: LIST: HTTP 403 SignatureDoesNotMatch" env AWS_SECRET_ACCESS_KEY=wrong "$S3_TOOL" "$L" open
expect_fail EACCES "HTTP 403 InvalidAccessKeyId" env AWS_ACCESS_KEY_ID=nobody "$S3_TOOL" "$L" open
expect_fail ENOKEY "s3://bvtest/repo" env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$S3_TOOL" "$L" open
# the shared credentials file and a profile; AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL
printf '[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n[blk]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
    "$S3_KEY" "$S3_SECRET" >"$T/credentials"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$T/credentials" AWS_PROFILE=blk \
    AWS_ENDPOINT_URL=http://127.0.0.1:1 AWS_ENDPOINT_URL_S3="$AWS_ENDPOINT_URL" "$S3_TOOL" "$L" get packs/one | cmp - "$T/data" \
    || die "the profile's credentials in the shared file, or AWS_ENDPOINT_URL_S3, were not used"
expect_fail EACCES "HTTP 403" env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$T/credentials" "$S3_TOOL" "$L" open
# the endpoint from the config file's profile; a credentials file given by the caller (a [remote]'s)
printf '[profile blk]\nendpoint_url = %s\nregion = us-east-1\n' "$AWS_ENDPOINT_URL" >"$T/config"
printf 'aws_access_key_id = %s\naws_secret_access_key = %s\n' "$S3_KEY" "$S3_SECRET" >"$T/remote-credentials"
env -u AWS_ENDPOINT_URL AWS_CONFIG_FILE="$T/config" AWS_PROFILE=blk AWS_ACCESS_KEY_ID=wrong \
    "$S3_TOOL" --credentials="$T/remote-credentials" "$L" head packs/one >/dev/null || die "endpoint_url of the config file, or --credentials"
expect_fail EINVAL "AWS_MAX_ATTEMPTS|s3://bvtest" env AWS_MAX_ATTEMPTS=zero "$S3_TOOL" "$L" open
expect_fail EINVAL "s3://bvtest" env AWS_ENDPOINT_URL=ftp://127.0.0.1 "$S3_TOOL" "$L" open
echo "ok"
