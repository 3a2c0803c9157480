#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A restore from S3 fetches the snapshot's map nodes ahead of its walk, several at once (issue 23:
# a level's nodes in parallel, not one ranged GET after another), bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd rclone
s3_start
s3_mb bvmap
export BLKVAULT_CACHE_DIR=$T/cache
export BLKVAULT_PASSPHRASE='s3 map test'

# one: 64 MiB of random data, about a thousand chunks, so a map of a root and some 16 leaves
img=$T/one.img
randfile "$img" 64 s3map
repo=$T/repo
bv init "$repo" >/dev/null
bv backup "$repo" "$img" --name=one >/dev/null
packs() { (cd "$repo" && find packs -name '*.pack' | sort); }
packs_one=$(packs)
# two: the same data and 1 MiB of zeroes after it: no new chunk, so its new pack holds map nodes
# only, its last leaf first (the builder stores a node before the nodes above it)
cp "$img" "$T/two.img"
head -c 1048576 /dev/zero >>"$T/two.img"
bv backup "$repo" "$T/two.img" --name=two >/dev/null
pack_two=$(packs | grep -vxF "$packs_one")
[ "$(echo "$pack_two" | wc -l)" = 1 ] || die "expected one new pack for two, got: $pack_two"

s3_rclone_remote
rclone copy --exclude 'locks/**' --exclude 'tmp/**' --exclude 'leases/**' "$repo" gw:bvmap/r || die "rclone copy failed"
loc=s3://bvmap/r

# cold (the local cache empty): bit-exact, and the leaves fetched ahead of the walk, several at once
for s in one two; do
    rm -rf "$BLKVAULT_CACHE_DIR"
    before=$(s3_log_count s3_GetObject)
    bv restore --json "$loc" "$s" "$T/r-$s.img" >"$T/$s.json" || die "restore of $s from S3 failed"
    assert_same "$T/$s.img" "$T/r-$s.img"
    read -r ahead at_once < <(python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); print(j["map_nodes_prefetched"], j["map_fetches_at_once"])' "$T/$s.json")
    echo "# restore $s: $(( $(s3_log_count s3_GetObject) - before )) GETs, $ahead map nodes fetched ahead, at most $at_once at once"
    [ "$ahead" -ge 8 ] || die "restore of $s fetched $ahead map nodes ahead"
    [ "$at_once" -ge 2 ] || die "restore of $s fetched at most $at_once map nodes at once"
done
# a local repository's map is read as before (nothing fetched ahead: no round trip to hide)
bv restore --json "$repo" one "$T/r-local.img" >"$T/local.json" || die "local restore failed"
assert_same "$img" "$T/r-local.img"
python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["map_nodes_prefetched"] != 0)' "$T/local.json" ||
    die "a local restore prefetched map nodes: $(cat "$T/local.json")"
