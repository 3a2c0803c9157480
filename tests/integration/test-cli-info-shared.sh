#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# info REPO SNAP says exactly how much of a snapshot's data its parent (the previous snapshot
# of its name) also holds: the bytes of its chunks the parent's map references too. With 64 KiB
# fixed chunks every count is known: data stored before by another name, zero blocks and a
# chunk repeated within the snapshot are told apart from what the parent shares.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

repo=$T/repo
bv init "$repo" --encryption=none --chunker=fixed --chunk-size=64K:64K:64K >/dev/null
randfile "$T/A" 2 shared-a   # 32 chunks
randfile "$T/X" 1 shared-x   # 16 chunks
bv backup "$repo" "$T/A" --name=a -q >/dev/null
bv backup "$repo" "$T/X" --name=x -q >/dev/null
# a2: A's first MiB (16 chunks the parent has), X (stored before, but not by the parent),
# 512 KiB of zeros (no data), A's chunk 0 again (the parent has it: shared a second time)
{ head -c 1M "$T/A"; cat "$T/X"; head -c 512K /dev/zero; head -c 64K "$T/A"; } >"$T/a2"
bv backup "$repo" "$T/a2" --name=a -q >/dev/null
ids=$(bv list "$repo" --json | python3 -c "import json,sys; print(' '.join(s['id'] for s in json.load(sys.stdin)))")
read -r id_a1 id_x id_a2 <<<"$ids"

# data: 1 MiB + 1 MiB + 64 KiB = 2162688 bytes; shared with a1: 1 MiB + 64 KiB = 1114112 (52%)
bv info "$repo" a@latest >"$T/info"
grep -qx "parent       ${id_a1:0:8}" "$T/info" || { cat "$T/info"; die "info names no parent"; }
grep -qx "shared       1.1 MiB of 2.1 MiB data with its parent (52%)" "$T/info" ||
    { cat "$T/info"; die "info does not say exactly what the parent shares"; }
bv info "$repo" a@latest --json | python3 -c "
import json, sys
o = json.load(sys.stdin)
assert o['parent'] == sys.argv[1], o
assert o['bytes_shared'] == 1114112, o['bytes_shared']
assert o['stats']['bytes_data'] == 2162688, o['stats']
" "$id_a1"
# no parent: nothing shared (x's data was not stored before either)
bv info "$repo" "$id_x" >"$T/info-x"
grep -qx "parent       (none: the first snapshot of its name)" "$T/info-x" || { cat "$T/info-x"; die "info of x"; }
grep -qx "shared       nothing (no parent)" "$T/info-x" || { cat "$T/info-x"; die "info of x: shared"; }
assert_eq "$(bv info "$repo" "$id_x" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['bytes_shared'])")" 0 \
    "bytes_shared without a parent"
# a snapshot of the same image again: all of it is shared
bv backup "$repo" "$T/a2" --name=a --force-read -q >/dev/null
bv info "$repo" a@latest | grep_q -x "shared       2.1 MiB of 2.1 MiB data with its parent (100%)" ||
    { bv info "$repo" a@latest; die "a repeated backup shares all"; }
# a parent with no data at all (an image of zeros): nothing is shared, and nothing goes wrong
head -c 1M /dev/zero >"$T/z"
bv backup "$repo" "$T/z" --name=z -q >/dev/null
bv backup "$repo" "$T/X" --name=z -q >/dev/null
bv info "$repo" z@latest >"$T/info-z"
grep -qx "shared       0 B of 1.0 MiB data with its parent (0%)" "$T/info-z" || { cat "$T/info-z"; die "info with an empty parent"; }
echo ok
