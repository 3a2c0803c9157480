#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The S3 backend of the seam (src/lib/backend/backend-s3.c) against a real versitygw:
# tests/s3/backend-s3-check.c does the checking; here the server, and what the server then holds.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
: "${BACKEND_S3_CHECK:?run through meson test}"
s3_start
s3_mb bvrepo
s3_mb bvlock lock
export BLKVAULT_CACHE_DIR=$T/cache
"$BACKEND_S3_CHECK" s3://bvrepo/site/one s3://nosuchbucket/x s3://bvlock/site || die "backend-s3-check failed"
# the objects are where a local repository keeps them, below the prefix
s3_curl -f "http://127.0.0.1:$S3_PORT/bvrepo/site/one/config" | grep_q -x '{}' || die "no site/one/config"
s3_curl -f "http://127.0.0.1:$S3_PORT/bvrepo/site/one/packs/ab/ab0123456789abcdef0123456789abcd.pack" | grep_q -x p1 \
    || die "no pack at packs/ab/"
# the locks are local files of the cache, for this bucket and prefix
[ -f "$T/cache/s3/bvrepo/site/one/locks/write" ] || die "no lock file in the cache: $(find "$T/cache")"
# the local cache of whole objects kept only the last one within its bound (100 bytes)
cached=$(find "$T/cache/s3/bvrepo/site/one/objects" -type f -printf '%s\n')
[ "$cached" = 50 ] || die "the cache holds: $(find "$T/cache/s3/bvrepo/site/one/objects" -type f -printf '%f %s\n')"
# the lease was put, then deleted on release
[ "$(s3_log_count s3_DeleteObject)" -ge 1 ] || die "the lease was never deleted"
# with Object Lock every version the backend put is retained: deleting one is refused
"$S3_TOOL" s3://bvlock/site versions >"$T/versions"
ver=$(awk '$1 == "config" && $4 == "object" { print $2 }' "$T/versions")
[ -n "$ver" ] || die "no version of config: $(cat "$T/versions")"
"$S3_TOOL" --version="$ver" s3://bvlock/site head config | grep_q ' lock=compliance ' || die "config was put without Object Lock"
if "$S3_TOOL" --version="$ver" s3://bvlock/site delete config 2>"$T/err"; then die "a locked version was deleted"; fi
grep -q 'HTTP 403' "$T/err" || die "deleting a locked version: $(cat "$T/err")"
echo ok
