#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Selecting and describing snapshots (issue 12): NAME@latest, a bare 'latest' refused when two
# sources share the repository, list --name/--last/--utc and local time, the host and absolute
# path recorded, info REPO SNAP.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 2 snap-a
randfile "$T/b" 1 snap-b
mkdir "$T/sub"
(cd "$T/sub" && bv backup "$repo" ../a --name=a -q >/dev/null)
bv backup "$repo" "$T/b" --name=b -q >/dev/null
# a second snapshot of a, half of it changed
randfile "$T/a2" 2 snap-a
randfile "$T/half" 1 snap-a2
dd if="$T/half" of="$T/a2" conv=notrunc status=none
bv backup "$repo" "$T/a2" --name=a -q >/dev/null
ids=$(bv list "$repo" --json | python3 -c "import json,sys; print(' '.join(s['id'] for s in json.load(sys.stdin)))")
read -r id_a1 id_b id_a2 <<<"$ids"

# a bare 'latest' is refused, naming the names; NAME@latest picks that name's newest
expect_fail 2 "^error: 'latest' is ambiguous: the repository holds snapshots of 2 names (a, b); say which with NAME@latest$" \
    bv restore "$repo" latest "$T/x"
[ ! -e "$T/x" ] || die "a refused restore left a file"
bv restore "$repo" a@latest "$T/a.out" -q >/dev/null
assert_same "$T/a2" "$T/a.out"
bv restore "$repo" b@latest "$T/b.out" -q >/dev/null
assert_same "$T/b" "$T/b.out"
expect_fail 1 "^error: no snapshot is named 'c' (see 'blkvault list')$" bv restore "$repo" c@latest "$T/x"
assert_eq "$(cat "$T/.err")" "error: no snapshot is named 'c' (see 'blkvault list')" "the only message for c@latest"
# with one name, 'latest' is that name's newest
bv init "$T/one" --encryption=none >/dev/null
bv backup "$T/one" "$T/b" --name=b -q >/dev/null
bv restore "$T/one" latest "$T/one.out" -q >/dev/null
assert_same "$T/b" "$T/one.out"
bv init "$T/empty" --encryption=none >/dev/null
expect_fail 1 "^error: the repository has no snapshot yet$" bv restore "$T/empty" latest "$T/x"
assert_eq "$(cat "$T/.err")" "error: the repository has no snapshot yet" "the only message for latest of none"

# list: --name, --last, local time by default, --utc
assert_eq "$(bv list "$repo" --name=a | awk 'NR > 1 { print $1 }' | tr '\n' ' ')" "${id_a1:0:8} ${id_a2:0:8} " "list --name=a"
assert_eq "$(bv list "$repo" --last=1 | awk 'NR > 1 { print $1 }')" "${id_a2:0:8}" "list --last=1"
assert_eq "$(bv list "$repo" --name=b --last=5 --json | python3 -c "import json,sys; print([s['id'] for s in json.load(sys.stdin)])")" "['$id_b']" "list --name=b --json"
TZ=XYZ-9 bv list "$repo" >"$T/local"
head -1 "$T/local" | grep_q "TIME " || die "list's header: $(head -1 "$T/local")"
grep -q " +0900 " "$T/local" || { cat "$T/local"; die "list does not show local time"; }
bv list "$repo" --utc >"$T/utc"
head -1 "$T/utc" | grep_q "TIME (UTC)" || die "list --utc's header: $(head -1 "$T/utc")"
grep -q " +0900 " "$T/utc" && die "list --utc shows local time"
expect_fail 2 "^error: invalid --last '0' (a number of snapshots, 1 or more)$" bv list "$repo" --last=0
expect_fail 2 "^error: invalid --last '99999999999999999999' (a number of snapshots, 1 or more)$" bv list "$repo" --last=99999999999999999999

# the source is recorded with the host and its absolute path (the backup ran in $T/sub with ../a)
bv list "$repo" --json | python3 -c "
import json, sys, socket
s = json.load(sys.stdin)[0]['source']
assert s['host'] == socket.gethostname(), s
assert s['abs_path'] == sys.argv[1], s
assert s['path'] == '../a', s
" "$(realpath "$T/a")"

# info REPO SNAP: source, host, sizes, parent and what it shares with earlier data
bv info "$repo" a@latest >"$T/info"
grep -q "^snapshot     $id_a2$" "$T/info" || { cat "$T/info"; die "info names no snapshot"; }
grep -q "^host         $(hostname)$" "$T/info" || { cat "$T/info"; die "info names no host"; }
grep -q "^source       $T/a2 (file)$" "$T/info" || { cat "$T/info"; die "info names no source"; }
grep -q "^parent       ${id_a1:0:8}$" "$T/info" || { cat "$T/info"; die "info names no parent"; }
# chunk cuts (the chunker key is random) make the unchanged half somewhat less than 1 MiB
grep -Eq "^shared       [0-9.]* [KM]i*B of 2.0 MiB data with its parent \((4[0-9]|50)%\)$" "$T/info" ||
    { cat "$T/info"; die "info does not say what is shared"; }
bv info "$repo" "$id_a1" | grep_q "^parent       (none: the first snapshot of its name)$" || die "info of the first snapshot"
bv info "$repo" a@latest --json | python3 -c "
import json, sys
o = json.load(sys.stdin)
assert o['parent'] == sys.argv[1] and 0.40 < o['bytes_shared'] / (1 << 21) <= 0.5 and o['stats']['bytes_data'] == 2 << 20, o
" "$id_a1"
expect_fail 2 "^error: expected 'blkvault info REPO \[SNAPSHOT\]' (see 'blkvault help info')$" bv info "$repo" a b
# BLKVAULT_REPO stands for a REPO left out
export BLKVAULT_REPO=$repo
assert_eq "$(bv list --name=b --json | python3 -c "import json,sys; print([s['id'] for s in json.load(sys.stdin)])")" "['$id_b']" "BLKVAULT_REPO list"
bv restore b@latest "$T/env.out" -q >/dev/null
assert_same "$T/b" "$T/env.out"
bv info a@latest | grep_q "^snapshot     $id_a2$" || die "BLKVAULT_REPO info SNAP"
bv backup "$T/b" --name=b -q >/dev/null
assert_eq "$(bv list --name=b | tail -n +2 | wc -l)" 2 "BLKVAULT_REPO backup"
# an explicit REPO still wins
assert_eq "$(bv list "$T/one" | tail -n +2 | wc -l)" 1 "explicit REPO with BLKVAULT_REPO set"
# a command given all its arguments says what is wrong with its REPO, not that there is one too many
expect_fail 10 "^error: repository '$T/typo' does not exist (create one with 'blkvault init $T/typo')$" bv list "$T/typo"
expect_fail 10 "^error: repository '$T/typo' does not exist (create one with 'blkvault init $T/typo')$" bv protect "$T/typo" a@latest
expect_fail 10 "^error: repository '$T/typo' does not exist (create one with 'blkvault init $T/typo')$" bv mount "$T/typo" a@latest "$T"
# serve --export takes its repository from its [export] section: BLKVAULT_REPO is not put before it
printf '[export x]\nrepository = %s\nsnapshot = latest\n' "$T/typo" >"$T/export.conf"
expect_fail 10 "^error: repository '$T/typo' does not exist (create one with 'blkvault init $T/typo')$" bv serve --export=x --config="$T/export.conf"
# the options are parsed before REPO is put in: a value may be the next word
assert_eq "$(bv list --name b | tail -n +2 | wc -l)" 2 "BLKVAULT_REPO with '--name b'"
# verify resolves NAME@latest (it looked the spec up again, by id only: No such file or directory)
bv verify a@latest --read-data 2>&1 | grep_q "^ok: 1 snapshots, " || die "BLKVAULT_REPO verify NAME@latest"
unset BLKVAULT_REPO
bv verify "$repo" a@latest --read-data --written 2>&1 | grep_q "^ok: 1 snapshots, " || die "verify NAME@latest --written"
echo ok
