#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs the peers bench/peers compares blkvault with, into $PEERS_CACHE (default
# /var/cache/blkvault-bench): Debian's borg 1.2, restic 0.14 and casync (apt); borg 2 (the newest
# 2.0 beta on PyPI that builds here, in a venv); restic, kopia and desync built from the Go module
# proxy. Named only (not in the default list): virtnbdbackup, for bench/libvirt-backup.sh, from
# Debian (1.9.15 in Debian 12): PyPI has no distribution of it (`pip download virtnbdbackup`:
# "from versions: none"). Idempotent: what is installed already is kept. Writes one line per
# peer to $PEERS_CACHE/status.tsv: "name<TAB>ok<TAB>path" or "name<TAB>not installed: reason", which
# bench/peers reads, so a peer that failed is reported in its tables and never silently dropped.
#
# Usage: bench/peers-install.sh [PEER...]   (default: all)
#   env: RESTIC_VERSION (v0.19.1), KOPIA_VERSION (v0.21.1), DESYNC_VERSION (v0.9.6): the proxy
#   here refuses version lists (@latest), so the newest release is pinned and can be overridden.
set -uo pipefail
PEERS_CACHE=${PEERS_CACHE:-/var/cache/blkvault-bench}
RESTIC_VERSION=${RESTIC_VERSION:-v0.19.1}
KOPIA_VERSION=${KOPIA_VERSION:-v0.21.1}
DESYNC_VERSION=${DESYNC_VERSION:-v0.9.6}
BIN=$PEERS_CACHE/bin LOGS=$PEERS_CACHE/log STATUS=$PEERS_CACHE/status.tsv
mkdir -p "$BIN" "$LOGS"
touch "$STATUS"
# one installer at a time (two would build into the same venv)
exec 9>"$PEERS_CACHE/.lock"
flock 9

log() { printf '[%s] peers-install: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# status NAME TEXT: replaces NAME's line in status.tsv
status() {
    local tmp; tmp=$(mktemp)
    awk -F'\t' -v n="$1" '$1 != n' "$STATUS" >"$tmp"
    printf '%s\t%s\n' "$1" "$2" >>"$tmp"
    mv "$tmp" "$STATUS"
    log "$1: $2"
}
# reason LOGFILE: the last meaningful line of a failed step's log, on one line
reason() {
    { grep -E 'fatal error|Exception:' "$1" || grep -v '^\s*$' "$1"; } 2>/dev/null | tail -1 |
        tr '\t' ' ' | sed 's/^ *//' | cut -c1-160
}

apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=900 update -qq >"$LOGS/apt.log" 2>&1
    apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}" >>"$LOGS/apt.log" 2>&1
}

debian_peer() { # NAME PACKAGE BINARY
    if apt_install "$2" && [ -x "$3" ]; then status "$1" "ok	$3"
    else status "$1" "not installed: apt-get install $2 failed: $(reason "$LOGS/apt.log")"; fi
}

# go_peer NAME MODULE VERSION PACKAGE: go build in its own module directory (dependencies of
# one peer never bend another's). GOSUMDB=off: the checksum database is not reachable from here
# for every module; the module proxy's content is still what `go` downloads.
go_peer() {
    local name=$1 mod=$2 ver=$3 pkg=$4 d=$PEERS_CACHE/go/$1 out=$BIN/$1-$3 lg=$LOGS/$1.log
    if [ -x "$out" ]; then status "$name" "ok	$out"; return; fi
    command -v go >/dev/null || { status "$name" "not installed: no Go toolchain (go) on PATH"; return; }
    rm -rf "$d"; mkdir -p "$d"
    log "$name: building $mod@$ver (several minutes)"
    if (cd "$d" && export GOFLAGS=-mod=mod GOSUMDB=off && go mod init "peer/$name" &&
        go get "$mod@$ver" && go build -trimpath -o "$out.tmp" "$pkg") >"$lg" 2>&1; then
        mv "$out.tmp" "$out"; status "$name" "ok	$out"
    else
        status "$name" "not installed: go build $mod@$ver failed: $(reason "$lg")"
    fi
}

borg2_peer() {
    local venv=$PEERS_CACHE/borg2 lg=$LOGS/borg2.log v
    if [ -x "$venv/bin/borg" ] && "$venv/bin/borg" --version >/dev/null 2>&1; then
        status borg2 "ok	$venv/bin/borg"; return
    fi
    apt_install python3-venv python3-dev libssl-dev libacl1-dev liblz4-dev libzstd-dev \
        libxxhash-dev pkg-config gcc || { status borg2 "not installed: build dependencies: $(reason "$LOGS/apt.log")"; return; }
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv" >"$lg" 2>&1 || { status borg2 "not installed: venv: $(reason "$lg")"; return; }
    # the newest 2.0 beta first; older ones only if it does not build against this OpenSSL
    # (2.0.0b24 and later include openssl/thread.h, which is OpenSSL 3.2: Debian 12 has 3.0)
    local versions
    versions=$("$venv/bin/pip" index versions borgbackup --pre 2>>"$lg" | sed -n 's/^Available versions: //p' |
        tr ',' '\n' | tr -d ' ' | grep '^2\.0\.0b' | head -12)
    [ -n "$versions" ] || versions=2.0.0b25
    for v in $versions; do
        log "borg2: pip install borgbackup==$v"
        # its setup finds libcrypto through the pkgconfig module, which fails in pip's isolated
        # build environment here: name the prefix
        if BORG_OPENSSL_PREFIX=/usr "$venv/bin/pip" install -q "borgbackup==$v" >>"$lg" 2>&1 && "$venv/bin/borg" --version >>"$lg" 2>&1; then
            status borg2 "ok	$venv/bin/borg"; return
        fi
    done
    status borg2 "not installed: pip install borgbackup (2.0 betas $(echo $versions)) failed: $(reason "$lg")"
}

PEERS=("$@")
[ ${#PEERS[@]} -gt 0 ] || PEERS=(borg restic-debian casync borg2 restic kopia desync)
for p in "${PEERS[@]}"; do
    case $p in
    borg) debian_peer borg borgbackup /usr/bin/borg ;;
    restic-debian) debian_peer restic-debian restic /usr/bin/restic ;;
    casync) debian_peer casync casync /usr/bin/casync ;;
    virtnbdbackup) debian_peer virtnbdbackup virtnbdbackup /usr/bin/virtnbdbackup ;;
    borg2) borg2_peer ;;
    restic) go_peer restic github.com/restic/restic "$RESTIC_VERSION" github.com/restic/restic/cmd/restic ;;
    kopia) go_peer kopia github.com/kopia/kopia "$KOPIA_VERSION" github.com/kopia/kopia ;;
    desync) go_peer desync github.com/folbricht/desync "$DESYNC_VERSION" github.com/folbricht/desync/cmd/desync ;;
    *) status "$p" "not installed: unknown peer" ;;
    esac
done
exit 0
