# SPDX-License-Identifier: LGPL-2.1-or-later
# A real S3 server for the tests: versitygw (built by scripts/build-versitygw.sh) on 127.0.0.1 with
# a posix backend, versioning (which Object Lock needs) and an access log, stopped at exit.
# Source it after tests/lib.sh:
#
#   s3_start              starts the server; sets S3_PORT, S3_DIR, S3_LOG (the access log) and the
#                         AWS_* variables the client reads (no ~/.aws file of the host is read)
#   s3_stop               stops it (also at exit)
#   s3_mb NAME [lock|versioned]
#                         makes bucket NAME (with Object Lock, or versioning, when asked)
#   s3_curl ARGS...       curl signed with the server's keys (curl --aws-sigv4)
#   s3_rclone_remote      an rclone remote 'gw' on the server (RCLONE_CONFIG), to upload a local
#                         repository as it is: rclone copy REPO gw:BUCKET/PREFIX
#   fault_proxy_start, fault_wait_held: a fault proxy in front of the server (below)
#   s3_log_count OP [KEY] how many requests of operation OP (s3_PutObject, s3_GetObject, ...),
#                         for KEY when given, the access log holds
#   s3_wait_stale BUCKET/KEY AGE
#                         waits until the server's clock says KEY is AGE seconds old (below)

S3_KEY=blkvaulttest
S3_SECRET=blkvault-test-secret-0123456789
VERSITYGW_VERSION=v1.8.0

versitygw_bin() {
    local b
    for b in "${VERSITYGW:-}" "$(command -v versitygw || true)" \
             "${VERSITYGW_CACHE:-/var/cache/blkvault-test}/versitygw-$VERSITYGW_VERSION"; do
        [ -n "$b" ] && [ -x "$b" ] && { echo "$b"; return 0; }
    done
    return 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

_s3_pid=
s3_start() {
    local gw tries
    gw=$(versitygw_bin) || skip "versitygw is not built (scripts/build-versitygw.sh, run by scripts/install-deps.sh)"
    need_cmd curl python3
    S3_DIR=$T/s3
    mkdir -p "$S3_DIR/iam" "$S3_DIR/vers" "$S3_DIR/data"
    S3_LOG=$S3_DIR/access.log
    # a free port can be taken by someone else before the server binds it: try a few
    for tries in 1 2 3; do
        S3_PORT=$(free_port)
        ROOT_ACCESS_KEY=$S3_KEY ROOT_SECRET_KEY=$S3_SECRET "$gw" --port "127.0.0.1:$S3_PORT" --quiet \
            --access-log "$S3_LOG" --iam-dir "$S3_DIR/iam" \
            posix --versioning-dir "$S3_DIR/vers" "$S3_DIR/data" >"$S3_DIR/server.log" 2>&1 &
        _s3_pid=$!
        [ "$tries" = 1 ] && on_exit 's3_stop'
        local i
        for i in $(seq 1 100); do
            kill -0 "$_s3_pid" 2>/dev/null || break
            if curl -s -o /dev/null "http://127.0.0.1:$S3_PORT/" 2>/dev/null; then
                _s3_env
                return 0
            fi
            sleep 0.1
        done
        kill "$_s3_pid" 2>/dev/null; wait "$_s3_pid" 2>/dev/null || true
        _s3_pid=
    done
    cat "$S3_DIR/server.log" >&2
    die "versitygw did not start on 127.0.0.1"
}

_s3_env() {
    export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT
    export AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_REGION=us-east-1
    export AWS_SHARED_CREDENTIALS_FILE=$T/no-aws-credentials AWS_CONFIG_FILE=$T/no-aws-config
    export AWS_MAX_ATTEMPTS=${AWS_MAX_ATTEMPTS:-3}
    unset AWS_ENDPOINT_URL_S3 AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION AWS_CA_BUNDLE
}

s3_stop() {
    [ -n "$_s3_pid" ] || return 0
    kill "$_s3_pid" 2>/dev/null || true
    wait "$_s3_pid" 2>/dev/null || true
    _s3_pid=
}

s3_curl() {
    curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_KEY:$S3_SECRET" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}

s3_mb() {
    local hdr=()
    [ "${2:-}" = lock ] && hdr=(-H 'x-amz-bucket-object-lock-enabled: true')
    s3_curl -f -X PUT "${hdr[@]}" "http://127.0.0.1:$S3_PORT/$1" >/dev/null || die "cannot make bucket $1"
    if [ "${2:-}" = versioned ]; then
        s3_curl -f -X PUT --data '<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>' \
            "http://127.0.0.1:$S3_PORT/$1?versioning=" >/dev/null || die "cannot enable versioning on $1"
    fi
}

s3_log_count() {
    local n
    if [ -n "${2:-}" ]; then
        n=$(grep -c " $1 $2 " "$S3_LOG" || true)
    else
        n=$(grep -c " $1 " "$S3_LOG" || true)
    fi
    echo "${n:-0}"
}

# fault_proxy_start: tests/s3/fault-proxy.py in front of the server, on its own port; sets
# FAULT_URL (its endpoint) and FAULTS (the control file: echo "503 2" >"$FAULTS" makes the next two
# requests fail with 503 SlowDown; each fault served is a line of $FAULTS.log).
fault_proxy_start() {
    FAULTS=$T/faults
    : >"$FAULTS"
    python3 "$SOURCE_ROOT/tests/s3/fault-proxy.py" "$S3_PORT" "$FAULTS" "$T/proxy.port" 2>"$T/proxy.log" &
    local pid=$!
    on_exit "kill $pid"
    wait_nonempty "$T/proxy.port" "$pid" "$T/proxy.log" "the fault proxy did not start"
    FAULT_URL=http://127.0.0.1:$(cat "$T/proxy.port")
}

# fault_wait_held PID ERR WHAT: waits (60 s at most) until the proxy holds a request (a "wait:"
# fault served); fails naming WHAT when PID ends first (its stderr in ERR) or nothing is held.
fault_wait_held() {
    for _ in $(seq 1 600); do
        grep -q "^wait" "$FAULTS.log" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || { cat "$2" >&2; die "it ended before the proxy held its $3"; }
        sleep 0.1
    done
    die "the proxy held no $3"
}

# s3_wait_stale BUCKET/KEY AGE: waits until a HEAD of the object (a lease) has a Date AGE seconds
# or more past its Last-Modified, the server's clock alone, as gc measures a lease's age
# (LIFECYCLE.md, "Clocks"); an object gone is old enough. Every later gc then sees that age or
# more. A `sleep AGE` after the PUT does not do that: both headers are whole seconds (truncated),
# and versitygw's Date is a string its HTTP server (fasthttp) renews once a second, so it lags the
# server's clock by up to 2 s (measured: a HEAD 31.3 s after the PUT said 30 s; one answered
# 1.9 s after the second its Date named). Fails naming the object when that takes AGE + 10 s,
# which only an object put again meanwhile (a lease still beating) takes.
s3_wait_stale() {
    local key=$1 age=$2 start hdr date lm seen=
    start=$(date +%s)
    while :; do
        hdr=$(s3_curl -I "$AWS_ENDPOINT_URL/$key" | tr -d '\r') || die "HEAD of $key"
        [[ $hdr =~ ^HTTP/[0-9.]+\ 404 ]] && return 0
        date=$(printf '%s\n' "$hdr" | sed -n 's/^[Dd]ate: //p')
        lm=$(printf '%s\n' "$hdr" | sed -n 's/^[Ll]ast-[Mm]odified: //p')
        [ -n "$date" ] && [ -n "$lm" ] || die "HEAD of $key: no Date or Last-Modified: $hdr"
        seen=$(( $(date -d "$date" +%s) - $(date -d "$lm" +%s) ))
        [ "$seen" -ge "$age" ] && return 0
        [ $(( $(date +%s) - start )) -le $((age + 10)) ] ||
            die "$key is $seen s old by the server's clock (Date $date, Last-Modified $lm) after $((age + 10)) s: put again meanwhile"
        sleep 0.2
    done
}

s3_rclone_remote() {
    need_cmd rclone
    export RCLONE_CONFIG=$T/rclone.conf
    cat >"$RCLONE_CONFIG" <<EOF
[gw]
type = s3
provider = Other
access_key_id = $S3_KEY
secret_access_key = $S3_SECRET
endpoint = $AWS_ENDPOINT_URL
region = us-east-1
force_path_style = true
EOF
}
