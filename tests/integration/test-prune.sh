#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# prune: the policy per name on snapshots at chosen times (rename-snapshot sets them), the exact
# dry-run listing (the rule that keeps each snapshot, or that none does), --json, protected
# snapshots kept and shown by list, usage errors; what is kept still verifies and restores.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3
export TZ=UTC

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
newest_id() { bv list "$repo" --json --last=1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["snapshot"])'; }
# backup_at NAME SEED 'DATE': a snapshot of 1 MiB named NAME whose time is DATE (UTC)
ids=()
backup_at() {
    randfile "$T/$2" 1 "$2"
    bv backup "$repo" "$T/$2" --name="$1" >/dev/null
    local id; id=$(newest_id)
    "$RENAME_SNAPSHOT" "$repo" "$id" "$1" "$(date -u -d "$3" +%s)"
    ids+=("$id")
}
backup_at db s1 '2026-01-01 10:00'
backup_at db s2 '2026-01-01 12:00'
backup_at db s3 '2026-01-02 10:00'
backup_at db s4 '2026-01-03 10:00'
backup_at db s5 '2026-01-10 10:00'
backup_at db s6 '2026-02-15 10:00'
backup_at web w1 '2026-01-05 10:00'
backup_at web w2 '2026-01-06 10:00'
bv protect "$repo" "${ids[0]}" 2>/dev/null

# usage errors
expect_fail 2 "^error: prune needs a --keep-\* rule (without one it would forget every snapshot)$" bv prune "$repo"
# rules given, but each 0: they keep nothing, which is not "no rule"
expect_fail 2 "^error: the rules --keep-last=0 --keep-daily=0 keep nothing: prune would forget every snapshot (give a count above 0, or -1; 'blkvault delete' forgets snapshots by name)$" \
    bv prune "$repo" --keep-last=0 --keep-daily=0
expect_fail 2 "^error: invalid --keep-daily 'x' (a number of snapshots, or -1 for all)$" bv prune "$repo" --keep-daily=x
expect_fail 2 "^error: invalid --keep-last '-2' (a number of snapshots, or -1 for all)$" bv prune "$repo" --keep-last=-2
expect_fail 2 "^error: invalid --keep-within '3x' (a number and a unit: s, min, h, d or w, as in 7d)$" \
    bv prune "$repo" --keep-within=3x
expect_fail 2 "^error: expected 'blkvault prune REPO' (see 'blkvault help prune')$" bv prune --keep-last=1

# list shows the protected snapshot, in text and JSON
bv list "$repo" | grep_q "^${ids[0]:0:8} .* \[protected\]$" || die "list does not show the protected snapshot"
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print([s["protected"] for s in json.load(sys.stdin)])')" \
    "[True, False, False, False, False, False, False, False]" "protected in list --json"

# dry run: every snapshot of the name with its rule, nothing changes
line() { printf '%-6s  %-8.8s  %-25s  %-24s %s\n' "$1" "$2" "$(date -u -d "$3" '+%Y-%m-%d %H:%M:%S +0000')" "$4" "$5"; }
{
    line keep "${ids[0]}" '2026-01-01 10:00' db protected
    line forget "${ids[1]}" '2026-01-01 12:00' db 'no rule keeps it'
    line forget "${ids[2]}" '2026-01-02 10:00' db 'no rule keeps it'
    line forget "${ids[3]}" '2026-01-03 10:00' db 'no rule keeps it'
    line keep "${ids[4]}" '2026-01-10 10:00' db daily
    line keep "${ids[5]}" '2026-02-15 10:00' db daily
} >"$T/want"
bv prune "$repo" --name=db --keep-daily=2 --dry-run >"$T/out" 2>"$T/err"
diff -u "$T/want" "$T/out" || die "prune --dry-run listing"
assert_eq "$(cat "$T/err")" "would forget 3 of 6 snapshots (dry run: nothing changed)" "dry-run summary"
assert_eq "$(ls "$repo/snapshots" | grep -c '\.snap$')" 8 "snapshots after a dry run"

# --json: action and rule of each, for every name
bv prune "$repo" --keep-last=1 --keep-within=1d --dry-run --json >"$T/json" 2>/dev/null
assert_eq "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["dry_run"], d["forgotten"], [(s["name"], s["action"], s["rule"], s["protected"]) for s in d["snapshots"]])' "$T/json")" \
    "True 4 [('db', 'keep', 'protected', True), ('db', 'forget', None, False), ('db', 'forget', None, False), ('db', 'forget', None, False), ('web', 'keep', 'within', False), ('web', 'keep', 'last', False), ('db', 'forget', None, False), ('db', 'keep', 'last', False)]" \
    "prune --json"

# the real run: forgets, keeps the protected one, leaves the other name alone
bv prune "$repo" --name=db --keep-last=1 --no-gc >"$T/out" 2>"$T/err"
assert_eq "$(cat "$T/err")" "forgot 4 of 6 snapshots" "prune summary"
assert_eq "$(grep -c '^forget ' "$T/out")" 4 "forget lines"
assert_eq "$(bv list "$repo" --json | python3 -c 'import json,sys; print([(s["name"], s["snapshot"][:8]) for s in json.load(sys.stdin)])')" \
    "[('db', '${ids[0]:0:8}'), ('web', '${ids[6]:0:8}'), ('web', '${ids[7]:0:8}'), ('db', '${ids[5]:0:8}')]" "snapshots after prune"
bv prune "$repo" --name=db --keep-last=1 --no-gc >/dev/null 2>"$T/err"
assert_eq "$(cat "$T/err")" "forgot 0 of 2 snapshots" "a second prune forgets nothing"
# a --name that no snapshot has (a typo) is said, not a silent "forgot 0 of 0"
bv prune "$repo" --name=dbb --keep-last=1 --no-gc >/dev/null 2>"$T/err"
assert_eq "$(cat "$T/err")" "warning: no snapshot is named 'dbb' in '$repo' (names: db, web)
forgot 0 of 0 snapshots" "prune --name of no snapshot"
bv verify "$repo" >/dev/null 2>&1 || die "verify after prune"
bv restore "$repo" "${ids[5]}" "$T/r6" 2>/dev/null
assert_same "$T/s6" "$T/r6"
bv restore "$repo" "${ids[0]}" "$T/r1" 2>/dev/null
assert_same "$T/s1" "$T/r1"

# a record whose time does not fit a signed 64-bit count of seconds (2^63: the codec takes any
# u64): prune must not overflow computing how old the others are (UBSan stopped it in the policy)
backup_at odd o1 '2026-03-01 10:00'
backup_at odd o2 '2026-03-02 10:00'
"$RENAME_SNAPSHOT" "$repo" "${ids[-1]}" odd 9223372036854775808
bv prune "$repo" --keep-within=1d --name=odd --dry-run >"$T/odd.out" 2>&1 || { cat "$T/odd.out" >&2; die "prune with a time of 2^63"; }
bv delete "$repo" "${ids[-1]}" 2>/dev/null # it would list as the newest below

# a clock that was wrong once: a snapshot dated in the future must not become the reference of
# --keep-within (it made prune forget every real snapshot of its name) nor take a bucket; it is
# kept, by the rule 'future', until its date has passed
backup_at skew k1 '2026-01-01 10:00'
backup_at skew k2 '2026-01-02 10:00'
k2=${ids[-1]}
backup_at skew k3 '2099-01-01 10:00'
k3=${ids[-1]}
bv prune "$repo" --name=skew --keep-within=1d --keep-daily=1 --dry-run >"$T/skew.out" 2>&1
grep -q "^keep    ${k3:0:8}  2099-01-01 10:00:00 +0000  skew                     future$" "$T/skew.out" ||
    { cat "$T/skew.out" >&2; die "the future snapshot is not kept as 'future'"; }
grep -q "^keep    ${k2:0:8}  2026-01-02 10:00:00 +0000  skew                     within$" "$T/skew.out" ||
    { cat "$T/skew.out" >&2; die "the newest real snapshot is not kept within a day of itself"; }
bv prune "$repo" --name=skew --keep-within=1d --no-gc >/dev/null 2>&1
[ -e "$repo/snapshots/$k2.snap" ] || die "prune forgot the newest real snapshot beside a future-dated one"
# and NAME@latest names it with a warning: it may not be the last snapshot written
bv restore "$repo" skew@latest "$T/skew.img" >/dev/null 2>"$T/skew.err"
grep -qx "warning: skew@latest is snapshot ${k3:0:8}, dated 2099-01-01 10:00:00 +0000, after the current time: it was made while the clock was set ahead and may not be the last one written (see 'blkvault list')" "$T/skew.err" ||
    { cat "$T/skew.err" >&2; die "no warning for a future-dated latest"; }
