#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Bit-exact round trips through the real binary: random data, all-zero data, a sparse file with
# holes, a size that is not a multiple of 4 KiB, an empty file and stdin; restores are sparse.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

randfile "$T/random" 24 seed1
truncate -s 32M "$T/zeros"
# sparse: data at 0, 10 MiB and at the very end, holes between
truncate -s 64M "$T/sparse"
dd if="$T/random" of="$T/sparse" bs=1M count=2 conv=notrunc status=none
dd if="$T/random" of="$T/sparse" bs=1M count=3 seek=10 skip=5 conv=notrunc status=none
dd if="$T/random" of="$T/sparse" bs=4096 count=1 seek=$((64 * 256 - 1)) conv=notrunc status=none
head -c 1234567 "$T/random" > "$T/odd"
: > "$T/empty"

for f in random zeros sparse odd empty; do
    bv backup "$repo" "$T/$f" --json > "$T/$f.json"
    bv restore "$repo" "$f" "$T/$f.out" >/dev/null
    assert_same "$T/$f" "$T/$f.out"
done

# all-zero data stores nothing and is restored as a hole
assert_eq "$(json_field "$T/zeros.json" bytes_new)" 0 "zero image stored data"
[ "$(allocated "$T/zeros.out")" -lt 65536 ] || die "restored zero image is not sparse"
# holes of the sparse file are never read, and the restore is sparse again
hole=$(json_field "$T/sparse.json" bytes_hole)
[ "$hole" -ge $((58 * 1048576)) ] || die "holes were read: bytes_hole=$hole"
[ "$(allocated "$T/sparse.out")" -lt $((8 * 1048576)) ] || die "restored sparse file is not sparse"

# stdin
bv backup "$repo" - --name=piped --json < "$T/random" > "$T/stdin.json"
bv restore "$repo" piped "$T/stdin.out" >/dev/null
assert_same "$T/random" "$T/stdin.out"
# the same data again dedups completely
assert_eq "$(json_field "$T/stdin.json" bytes_new)" 0 "stdin copy of stored data was stored again"

# list --json: oldest first, with snapshot, name, time, size, and the stats backup printed,
# under the same names (docs/man/blkvault-json.7); "id" stays an alias until 0.3
bv list "$repo" --json > "$T/list.json"
python3 - "$T/list.json" "$T/random.json" "$T/sparse.json" <<'PY'
import json, sys
snaps = json.load(open(sys.argv[1]))
backup, sparse = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
stat_names = ["bytes_read", "bytes_read_cached", "bytes_read_direct", "bytes_zero", "bytes_hole", "bytes_data", "bytes_new", "bytes_stored",
              "chunks", "chunks_new", "packs", "seconds"]
assert sorted(backup["stats"]) == sorted(stat_names), backup["stats"]
assert sorted(snaps[0]["stats"]) == sorted(stat_names), snaps[0]["stats"]
assert snaps[0]["snapshot"] == backup["snapshot"] == snaps[0]["id"], (snaps[0], backup)
for k in stat_names[:-1]:
    assert snaps[0]["stats"][k] == backup["stats"][k] == backup[k], k  # flat names: aliases until 0.3
assert snaps[2]["stats"]["bytes_hole"] == sparse["stats"]["bytes_hole"] > 0
assert snaps[0]["source"]["kind"] == "file" and snaps[0]["source"]["size"] == 24 << 20, snaps[0]["source"]
assert snaps[0]["chunker"]["kind"] == "hybrid" and snaps[0]["chunker"]["avg"] > 0, snaps[0]["chunker"]
assert snaps[5]["source"]["kind"] == "stream" and "probe" not in snaps[5]["source"], snaps[5]["source"]
names = [s["name"] for s in snaps]
assert names == ["random", "zeros", "sparse", "odd", "empty", "piped"], names
for s in snaps:
    assert len(s["id"]) == 32 and s["time"] > 0 and "size" in s, s
assert [s["size"] for s in snaps][:3] == [24 << 20, 32 << 20, 64 << 20]
times = [s["time"] for s in snaps]
assert times == sorted(times)
PY
# snapshot specs: latest (refused with several names), NAME@latest, unique prefix, unknown
expect_fail 2 "'latest' is ambiguous" bv restore "$repo" latest "$T/latest.out"
bv restore "$repo" random@latest "$T/latest.out" >/dev/null
assert_same "$T/random" "$T/latest.out"
id=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['id'][:10])" "$T/list.json")
bv restore "$repo" "$id" "$T/prefix.out" >/dev/null
assert_same "$T/random" "$T/prefix.out"
expect_fail 1 "no snapshot matches 'nosuch'" bv restore "$repo" nosuch "$T/x"
# restore never overwrites an existing file
expect_fail 1 "^error: '$T/random' exists: restore writes a new file (use --force to replace it)$" bv restore "$repo" random@latest "$T/random"

bv verify "$repo" --read-data >/dev/null
bv info "$repo" --json > "$T/info.json"
python3 - "$T/info.json" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))
assert i["snapshots"] == 6, i
assert i["dedup_ratio"] >= 1.0 and i["bytes_stored"] > 0, i
assert i["chunker"]["kind"] == "hybrid" and i["chunker"]["avg"] == i["chunk_avg"], i
for old, new in [("id", "repository"), ("logical_bytes", "bytes_logical"), ("data_bytes", "bytes_data"),
                 ("unique_bytes", "bytes_unique"), ("stored_bytes", "bytes_stored"), ("index_bytes", "bytes_index")]:
    assert i[old] == i[new], (old, new)  # aliases until 0.3
PY
echo ok
