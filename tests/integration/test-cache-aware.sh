#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Page cache when it holds the data, O_DIRECT when not (issue 14): on a half-cached file the
# cached half is read through the page cache and the other half with O_DIRECT (bytes_read_cached
# and bytes_read_direct in --json and the snapshot); nothing the user had cached is dropped and
# the uncached half is not pulled into the cache (but for what libblkid reads to probe the
# image). The snapshot restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3 fincore

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
jget() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
MiB=1048576
img=$T/half.img
randfile "$img" 32 seed-cache
sync "$img"

# uncache FILE [OFFSET_MIB]: drops the file's pages from OFFSET_MIB on (readahead makes a
# partial read cache more than it read, so the cache is shaped by dropping)
uncache() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, int(sys.argv[2]) << 20, 0, os.POSIX_FADV_DONTNEED)" "$1" "${2:-0}"; }
cached_bytes() { fincore -b -n -o RES "$1" | tr -d ' '; }
# cache exactly the file's first half (and all of a control file that the backup does not touch:
# other processes on a shared machine may drop the whole page cache meanwhile, which the
# control shows, and the attempt is repeated)
uncache "$img"
[ "$(cached_bytes "$img")" -lt $((MiB)) ] || skip "this filesystem keeps the file cached (fadvise DONTNEED ignored)"
head -c $((4 * MiB)) "$img" > "$T/control"
sync "$T/control"   # clean pages: a dirty control would survive a drop of the page cache
control_cached() { [ "$(cached_bytes "$T/control")" -ge $((4 * MiB)) ]; }
# kept_cache STEP: runs STEP up to 5 times; STEP reads the control first, then shapes the image's
# cache and returns 1 when that shape or the control was dropped meanwhile
kept_cache() {
    for attempt in 1 2 3 4 5; do
        "$1" && return 0
    done
    skip "the page cache was dropped during every attempt of $1 (a busy shared machine)"
}
half_cached_backup() {
    cat "$T/control" "$img" > /dev/null
    uncache "$img" 16
    before=$(cached_bytes "$img")
    [ "$before" -ge $((16 * MiB)) ] || return 1
    bv backup "$repo" "$img" --json --force-read > "$T/b.json" || die "the half-cached backup failed"
    after=$(cached_bytes "$img")
    control_cached
}
kept_cache half_cached_backup
assert_eq "$(jget "$T/b.json" bytes_read)" $((32 * MiB)) "bytes_read"
assert_eq "$(jget "$T/b.json" direct)" True "O_DIRECT is not in use on this filesystem"
assert_eq "$(jget "$T/b.json" bytes_read_cached)" $((16 * MiB)) "bytes read through the page cache"
assert_eq "$(jget "$T/b.json" bytes_read_direct)" $((16 * MiB)) "bytes read with O_DIRECT"
[ "$after" -ge "$before" ] || die "the backup dropped cached pages: $before -> $after bytes cached"
[ "$after" -le $((17 * MiB)) ] || die "the uncached half was pulled into the page cache: $after bytes cached"

# the snapshot records the split; the restore is bit-exact
bv list "$repo" --json > "$T/list.json"
python3 - "$T/list.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))[-1]["stats"]
assert st["bytes_read_cached"] == st["bytes_read_direct"] == 16 << 20, st
PY
bv restore "$repo" latest "$T/out" >/dev/null
assert_same "$img" "$T/out"

# all cached: all through the page cache; none cached: all O_DIRECT
warm_backup() {
    cat "$T/control" "$img" > /dev/null
    [ "$(cached_bytes "$img")" -ge $((32 * MiB)) ] || return 1
    bv backup "$repo" "$img" --json --force-read > "$T/warm.json" || die "the warm backup failed"
    control_cached
}
kept_cache warm_backup
assert_eq "$(jget "$T/warm.json" bytes_read_cached)" $((32 * MiB)) "warm: bytes through the page cache"
uncache "$img"
bv backup "$repo" "$img" --json --force-read > "$T/cold.json"
assert_eq "$(jget "$T/cold.json" bytes_read_direct)" $((32 * MiB)) "cold: bytes read with O_DIRECT"
[ "$(cached_bytes "$img")" -lt $((4 * MiB)) ] || die "a cold backup filled the page cache"

# --no-direct reads everything through the page cache and drops only what was not cached
no_direct_backup() {
    cat "$T/control" "$img" > /dev/null
    uncache "$img" 8
    [ "$(cached_bytes "$img")" -ge $((8 * MiB)) ] || return 1
    bv backup "$repo" "$img" --json --force-read --no-direct > "$T/nd.json" || die "the --no-direct backup failed"
    nd_after=$(cached_bytes "$img")
    control_cached
}
kept_cache no_direct_backup
assert_eq "$(jget "$T/nd.json" bytes_read_cached)" $((32 * MiB)) "--no-direct: bytes through the page cache"
assert_eq "$(jget "$T/nd.json" bytes_read_direct)" 0 "--no-direct: bytes read with O_DIRECT"
[ "$nd_after" -ge $((8 * MiB)) ] || die "--no-direct dropped pages the user had cached: $nd_after bytes cached"
echo ok
