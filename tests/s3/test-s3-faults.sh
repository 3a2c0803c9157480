#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The S3 client's retries and failures against a real versitygw behind a fault proxy
# (tests/s3/fault-proxy.py): 503 SlowDown, 500 and dropped connections are retried with backoff
# (the server sees the request once), faults that outlast AWS_MAX_ATTEMPTS fail with a message
# naming the bucket, key, status and attempts, and a stopped server is a clear error, not a hang.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
: "${S3_TOOL:?run through meson test}"
s3_start
s3_mb bvtest
fault_proxy_start
L=s3://bvtest/repo
tool() { AWS_ENDPOINT_URL=$FAULT_URL "$S3_TOOL" "$@"; }
expect_fail() {
    local name=$1 pat=$2; shift 2
    if "$@" >"$T/out" 2>"$T/err"; then die "$* succeeded; expected $name"; fi
    grep -q "\[$name\]" "$T/err" || die "$*: expected [$name], got: $(cat "$T/err")"
    grep -qE "$pat" "$T/err" || die "$*: message does not match '$pat': $(cat "$T/err")"
}
faults_served() { grep -c . "$FAULTS.log" 2>/dev/null || echo 0; }

head -c 300000 /dev/urandom >"$T/data"
tool "$L" put obj "$T/data"
tool "$L" get obj | cmp - "$T/data" || die "GET through the proxy differs"

# --- 503 SlowDown twice on a PUT: retried, stored once, and the retries counted
puts=$(s3_log_count s3_PutObject)
echo "503 2" >"$FAULTS"
AWS_MAX_ATTEMPTS=5 tool --stats "$L" put slow "$T/data" 2>"$T/stats" || die "a PUT with two 503s was not retried: $(cat "$T/stats")"
grep -q ' retries=2 ' "$T/stats" || die "two retries expected: $(cat "$T/stats")"
[ "$(faults_served)" = 2 ] || die "the proxy served $(faults_served) faults, not 2"
[ $(($(s3_log_count s3_PutObject) - puts)) = 1 ] || die "the server did not see exactly one PutObject"
tool "$L" get slow | cmp - "$T/data" || die "the retried PUT stored other bytes"

# --- 500 and dropped connections on GET and LIST: retried
echo "500 1" >"$FAULTS"
AWS_MAX_ATTEMPTS=3 tool "$L" get obj | cmp - "$T/data" || die "a GET after a 500 differs"
echo "reset 2" >"$FAULTS"
AWS_MAX_ATTEMPTS=3 tool "$L" range obj 100 50 | cmp - <(tail -c +101 "$T/data" | head -c 50) || die "a ranged GET after dropped connections"
echo "503 1" >"$FAULTS"
AWS_MAX_ATTEMPTS=3 tool "$L" list | grep_q '^obj 300000$' || die "a LIST after a 503"
# a multipart upload whose part is refused once
head -c $((11 << 20)) /dev/urandom >"$T/big"
echo "503 2" >"$FAULTS"
AWS_MAX_ATTEMPTS=4 tool --threshold=$((6 << 20)) --part=$((5 << 20)) "$L" put big "$T/big"
tool "$L" get big | cmp - "$T/big" || die "a multipart upload with retried requests differs"

# --- faults that outlast the attempts: the message names bucket, key, status and attempts
echo "503 10 /bvtest/repo/obj" >"$FAULTS"
expect_fail EAGAIN "^s3-tool: get: s3://bvtest/repo/obj: GET: HTTP 503 SlowDown after 3 attempts: Please reduce your request rate\. \[EAGAIN\]$" \
    env AWS_MAX_ATTEMPTS=3 AWS_ENDPOINT_URL="$FAULT_URL" "$S3_TOOL" "$L" get obj
echo "500 10 /bvtest/repo/new" >"$FAULTS"
expect_fail EIO "s3://bvtest/repo/new: PUT: HTTP 500 InternalError after 2 attempts: We encountered" \
    env AWS_MAX_ATTEMPTS=2 AWS_ENDPOINT_URL="$FAULT_URL" "$S3_TOOL" "$L" put new "$T/data"
: >"$FAULTS"
# a 4xx is not retried
rm -f "$FAULTS.log"
expect_fail ENOENT "s3://bvtest/repo/none: GET: HTTP 404 NoSuchKey: The specified key does not exist\. \[ENOENT\]$" \
    env AWS_ENDPOINT_URL="$FAULT_URL" "$S3_TOOL" --stats "$L" get none
grep -q ' retries=0 ' "$T/err" || die "a 404 was retried: $(cat "$T/err")"

# --- answers no S3 store gives (HTTP 200 all): refused, naming what was wrong, and nothing stored
echo "junk 1" >"$FAULTS"
expect_fail EBADMSG "^s3-tool: open: s3://bvtest/repo: LIST: the answer does not parse: <NotAnS3Answer>, not a ListBucketResult" \
    env AWS_ENDPOINT_URL="$FAULT_URL" "$S3_TOOL" "$L" open
echo "junk 1 /bvtest/repo/obj" >"$FAULTS"
expect_fail EOPNOTSUPP "s3://bvtest/repo/obj: GET: HTTP 200 to a ranged request \(the store ignores Range\)" \
    tool "$L" range obj 100 50
mp=(--threshold=$((6 << 20)) --part=$((5 << 20)))
echo "junk 1 /bvtest/repo/odd?uploads" >"$FAULTS"
expect_fail EBADMSG "s3://bvtest/repo/odd: multipart start: HTTP 200 without an UploadId" tool "${mp[@]}" "$L" put odd "$T/big"
echo "junk 1 /bvtest/repo/odd?partNumber=2" >"$FAULTS"
expect_fail EBADMSG "s3://bvtest/repo/odd: PUT part 2: HTTP 200 without an ETag" tool "${mp[@]}" "$L" put odd "$T/big"
echo "error200 1 /bvtest/repo/odd?uploadId" >"$FAULTS"
expect_fail EIO "s3://bvtest/repo/odd: multipart complete: HTTP 200 but InternalError" tool "${mp[@]}" "$L" put odd "$T/big"
[ "$(faults_served)" = 5 ] || die "the proxy served $(faults_served) faults, not 5"
expect_fail ENOENT "GET: HTTP 404 NoSuchKey" tool "$L" get odd
: >"$FAULTS"

# --- connections dropped on every attempt: the key's request fails naming it
echo "reset 10 /bvtest/repo/obj" >"$FAULTS"
expect_fail ECONNRESET "^s3-tool: get: s3://bvtest/repo/obj: GET: cannot reach $FAULT_URL after 2 attempts: " \
    env AWS_MAX_ATTEMPTS=2 AWS_ENDPOINT_URL="$FAULT_URL" "$S3_TOOL" "$L" get obj
: >"$FAULTS"

# --- the server stopped: a clear error after the retries, in bounded time
s3_stop
start=$(date +%s)
expect_fail ECONNREFUSED "^s3-tool: open: s3://bvtest/repo: LIST: cannot reach http://127\.0\.0\.1:$S3_PORT after 3 attempts: .*(onnect|refused)" \
    env AWS_MAX_ATTEMPTS=3 "$S3_TOOL" "$L" get obj
[ $(($(date +%s) - start)) -lt 30 ] || die "failing against a stopped server took $(($(date +%s) - start)) s"
# behind the proxy, whose upstream is gone: it drops the connection; retried, then an error
expect_fail ECONNRESET "s3://bvtest/repo: LIST: cannot reach $FAULT_URL after 2 attempts" \
    env AWS_MAX_ATTEMPTS=2 AWS_ENDPOINT_URL="$FAULT_URL" "$S3_TOOL" "$L" get obj
echo "ok"
