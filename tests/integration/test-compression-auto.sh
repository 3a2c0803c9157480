#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# --compression=auto, the default: recorded in the repository's config (FORMAT.md "config"),
# shown by info; a backup of text and random data restores bit for bit and verifies, its random
# part stored as raw chunks at once, its text in compressed groups, the repository within 3% of
# a zstd:3 one of the same data. zstd:N and none stay what they were.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd python3 openssl

json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
codec() { python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['compression']; print(c['codec'], c['level'])" "$1/config"; }

bv init "$T/auto" --encryption=none >/dev/null
assert_eq "$(codec "$T/auto")" "auto 3" "the default compression in the config"
bv init "$T/auto2" --encryption=none --compression=auto >/dev/null
assert_eq "$(codec "$T/auto2")" "auto 3" "--compression=auto in the config"
bv init "$T/z3" --encryption=none --compression=zstd >/dev/null
assert_eq "$(codec "$T/z3")" "zstd 3" "--compression=zstd in the config"
bv init "$T/z7" --encryption=none --compression=zstd:7 >/dev/null
assert_eq "$(codec "$T/z7")" "zstd 7" "--compression=zstd:7 in the config"
bv init "$T/none" --encryption=none --compression=none >/dev/null
assert_eq "$(codec "$T/none")" "none 0" "--compression=none in the config"
bv info "$T/auto" --json >"$T/info.json"
assert_eq "$(json_field "$T/info.json" compression)" auto "info's compression"
bv info "$T/auto" >"$T/info.txt"
grep -q '^compression  auto ' "$T/info.txt" || die "info does not say auto"
bv info "$T/z7" --json >"$T/info.json"
assert_eq "$(json_field "$T/info.json" compression)" zstd "info's compression of zstd:7"

# 8 MiB of text-like lines, then 8 MiB of random bytes
seq -f "%010g a line of a log file, compressible, with a number" 1 200000 >"$T/img"
truncate -s 8M "$T/img"
randfile "$T/random" 8 seed26
cat "$T/random" >>"$T/img"
for r in auto z3 none; do
    bv backup "$T/$r" "$T/img" --json >"$T/$r.json"
    bv restore "$T/$r" img "$T/$r.out" >/dev/null
    assert_same "$T/img" "$T/$r.out"
    bv verify "$T/$r" >/dev/null
done
size() { du -sb "$1/packs" | cut -f1; }
a=$(size "$T/auto") z=$(size "$T/z3") n=$(size "$T/none")
echo "packs: auto $a, zstd:3 $z, none $n"
[ "$a" -le $(( z * 103 / 100 )) ] || die "auto's packs ($a) more than 3% above zstd:3's ($z)"
[ "$a" -lt $(( n * 3 / 4 )) ] || die "auto did not compress the text ($a of $n uncompressed)"
bv info "$T/auto" --json >"$T/info.json"
[ "$(json_field "$T/info.json" groups)" -ge 1 ] || die "auto stored no compression group"
# the random half: raw chunks, none of them grouped
[ "$(( $(json_field "$T/info.json" chunks) - $(json_field "$T/info.json" grouped_chunks) ))" -ge 64 ] ||
    die "auto grouped the random data"
