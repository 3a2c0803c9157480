#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds the S3 server the tests run (tests/s3/s3-lib.sh): versitygw, pinned, from the Go module
# proxy (which refuses @latest: the version is fixed here), into $VERSITYGW_CACHE (default
# /var/cache/blkvault-test) as versitygw-$VERSION. Idempotent: a binary already there that runs
# is kept (the build takes minutes). Called by scripts/install-deps.sh.
#
# versitygw's go.mod names the Go it needs. A Go older than that but from 1.21 on fetches the
# right toolchain itself (GOTOOLCHAIN); an older one (Debian 12's golang-go is 1.19) cannot, so
# the toolchain is taken from the proxy as the module golang.org/toolchain, as Go itself does.
set -euo pipefail

version=v1.8.0
module=github.com/versity/versitygw
cache=${VERSITYGW_CACHE:-/var/cache/blkvault-test}
out=$cache/versitygw-$version

if [ -x "$out" ] && "$out" --version >/dev/null 2>&1; then
    echo "build-versitygw: $out is there; nothing to do" >&2
    exit 0
fi

go=${GO:-$(command -v go || true)}
[ -n "$go" ] || go=/usr/local/go/bin/go
[ -x "$go" ] || { echo "build-versitygw: no Go compiler (install golang-go)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/var/tmp}/versitygw-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOSUMDB=off GOPATH=$work/gopath GOCACHE=$work/gocache
# "Dir" of `go mod download -json`'s answer (one key per line): no JSON tool needed
json_dir() { sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'; }

cd "$work"
echo "build-versitygw: go mod download $module@$version" >&2
src=$("$go" mod download -json "$module@$version" | json_dir)
[ -d "$src" ] || { echo "build-versitygw: the module download gave no directory" >&2; exit 1; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"

# go version X.Y[.Z] of this Go and the one go.mod needs, compared as numbers
need=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$work/src/go.mod")
have=$("$go" env GOVERSION | sed 's/^go//; s/[^0-9.].*//')
older() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ] && [ "$1" != "$2" ]; }
if [ -n "$need" ] && older "$have" "$need"; then
    if older "$have" 1.21; then
        arch=$("$go" env GOARCH)
        echo "build-versitygw: Go $have is older than $need: fetching golang.org/toolchain" >&2
        tc=$("$go" mod download -json "golang.org/toolchain@v0.0.1-go$need.linux-$arch" | json_dir)
        cp -r "$tc" "$work/toolchain"
        chmod -R u+w "$work/toolchain"
        # the module cache drops the execute bits; Go's own toolchain switch restores them too
        chmod +x "$work/toolchain/bin/"* "$work/toolchain/pkg/tool/"*/*
        go=$work/toolchain/bin/go
        export GOROOT=$work/toolchain
    else
        export GOTOOLCHAIN=go$need
    fi
fi

echo "build-versitygw: go build ./cmd/versitygw (takes minutes)" >&2
(cd "$work/src" && "$go" build -o "$work/versitygw" ./cmd/versitygw)
mkdir -p "$cache"
install -m 0755 "$work/versitygw" "$out.tmp"
mv -f "$out.tmp" "$out"
echo "build-versitygw: $out" >&2
