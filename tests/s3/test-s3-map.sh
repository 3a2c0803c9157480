#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A restore from S3 fetches the snapshot's map nodes ahead of its walk, several at once (issue 23:
# a level's nodes in parallel, not one ranged GET after another), bit-exact and with every node
# still authenticated: a map node damaged on S3 (one the prefetchers fetch) stops the restore
# with an error that names the node, its pack and where in it; a missing one too.
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

# two's last leaf damaged on S3 (a byte of the first object of its pack): the prefetchers' fetch
# fails to authenticate, then the walk's, which names it
cp "$repo/$pack_two" "$T/bad.pack"
flip_byte "$T/bad.pack" 48
s3_curl -f -X PUT --data-binary @"$T/bad.pack" "$AWS_ENDPOINT_URL/bvmap/r/$pack_two" >/dev/null || die "cannot put the damaged pack"
rm -rf "$BLKVAULT_CACHE_DIR"
expect_fail 4 "restore of snapshot [0-9a-f]\{8\} stopped: damaged data at image offset [0-9]* (0x[0-9a-f]*): map node [0-9a-f]\{64\} ([0-9]* bytes at offset 32 of pack '$pack_two')[^;]*; '$T/bad.img' was not left behind as a file" \
    bv restore "$loc" two "$T/bad.img"
[ ! -e "$T/bad.img" ] || die "a damaged restore left its file behind"
# one does not use that node: it still restores
bv restore "$loc" one "$T/r-one2.img" >/dev/null || die "restore of one beside a damaged two failed"
assert_same "$img" "$T/r-one2.img"

# two's pack gone: its root is missing, named with the pack it should be in
s3_curl -f -X DELETE "$AWS_ENDPOINT_URL/bvmap/r/$pack_two" >/dev/null || die "cannot delete the pack"
rm -rf "$BLKVAULT_CACHE_DIR"
expect_fail 4 "restore of snapshot [0-9a-f]\{8\} stopped: missing data (the repository needs repair) at image offset 0 (0x0): map node [0-9a-f]\{64\} ([0-9]* bytes at offset [0-9]* of pack '$pack_two')[^;]*; '$T/bad.img' was not left behind as a file" \
    bv restore "$loc" two "$T/bad.img"
