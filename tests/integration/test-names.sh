#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Snapshot names: backup refuses control characters (and DEL), names over 255 bytes, 4 to 32 hex
# digits (they could shadow an id or id prefix) and "latest", with exit 2 and a message; a
# default name taken from the source's file name obeys the same rules. Names written before
# these rules (rename-snapshot makes them) are listed escaped, never raw, and a name equal to
# another snapshot's 8-digit id never shadows it: restore takes the id.
. "$SOURCE_ROOT/tests/lib.sh"
[ -n "${RENAME_SNAPSHOT:-}" ] && [ -x "$RENAME_SNAPSHOT" ] || die "RENAME_SNAPSHOT (tests/integration/rename-snapshot) is not built"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
randfile "$T/a" 2 names-a
randfile "$T/b" 2 names-b
ids() { bv list "$repo" --json | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'; }

refused() { # refused NAME MESSAGE: backup --name=NAME fails with exit 2 and MESSAGE, and adds nothing
    local before
    before=$(ids)
    expect_fail 2 "^error: $2\$" bv backup "$repo" "$T/a" --name="$1" -q
    assert_eq "$(ids)" "$before" "a refused name published a snapshot"
}
refused $'two\nlines' "invalid snapshot name 'two\\\\nlines': it contains a control character"
refused $'esc\e[31mred' "invalid snapshot name 'esc\\\\x1b\\[31mred': it contains a control character"
refused $'del\x7f' "invalid snapshot name 'del\\\\x7f': it contains a control character"
refused $'tab\there' "invalid snapshot name 'tab\\\\there': it contains a control character"
long=$(printf 'n%.0s' $(seq 1 256))
refused "$long" "invalid snapshot name '$(printf 'n%.0s' $(seq 1 64))\\.\\.\\.': longer than 255 bytes"
for hex in abcd 0123abcd DEADBEEF 0123456789abcdef0123456789abcdef; do
    refused "$hex" "invalid snapshot name '$hex': 4 to 32 hex digits would be taken for a snapshot id"
done
refused latest "invalid snapshot name 'latest': 'latest' means the newest snapshot"
# a source whose file name breaks the rules needs --name
cp "$T/a" "$T/cafe1234"
expect_fail 2 "^error: invalid snapshot name 'cafe1234' (the source's file name: choose one with --name): 4 to 32 hex digits would be taken for a snapshot id$" \
    bv backup "$repo" "$T/cafe1234" -q
# what stays allowed: 255 bytes, 3 or 33 hex digits, spaces and UTF-8
ok_names=("${long:1}" abc 0123456789abcdef0123456789abcdef0 "disk 1" $'h\xc3\xa9' 'a\b')
for n in "${ok_names[@]}"; do
    bv backup "$repo" "$T/a" --name="$n" -q 2>/dev/null || die "backup --name='$n' was refused"
done
assert_eq "$(ids | wc -w)" ${#ok_names[@]} "snapshots with allowed names"
bv list "$repo" | grep_q "  disk 1 " || die "list does not show 'disk 1'"
bv list "$repo" | grep_q " hé " || die "list does not show UTF-8 as it is"
bv list "$repo" | grep_q -F ' a\\b ' || die "list does not double a backslash"

# names from before the rules: escaped by list, no fake line, no terminal escape
repo=$T/legacy
bv init "$repo" --encryption=none >/dev/null
bv backup "$repo" "$T/a" --name=a -q 2>/dev/null
bv backup "$repo" "$T/b" --name=b -q 2>/dev/null
read -r id_a id_b <<<"$(ids)"
"$RENAME_SNAPSHOT" "$repo" "$id_a" $'evil\n00000000  2000-01-01 00:00:00  fake line \e[2J\xff'
"$RENAME_SNAPSHOT" "$repo" "$id_b" "${id_a:0:8}"   # b now bears a's displayed id as its name
bv list "$repo" > "$T/list"
assert_eq "$(wc -l < "$T/list")" 3 "list lines (a header and two snapshots)"
grep -qF 'evil\n00000000  2000-01-01 00:00:00  fake line \x1b[2J\xff' "$T/list" || { cat -A "$T/list" >&2; die "list did not escape the legacy name"; }
! grep -q $'\e' "$T/list" || die "list printed a raw escape character"
# a's 8-digit id resolves to a, not to b whose name it is; b's full id and its prefix still work
bv restore "$repo" "${id_a:0:8}" "$T/out-a" -q
assert_same "$T/a" "$T/out-a"
bv restore "$repo" "${id_b:0:8}" "$T/out-b" -q
assert_same "$T/b" "$T/out-b"
# an unknown spec is echoed escaped
expect_fail 1 "^error: no snapshot matches 'no\\\\x1bsuch' (see 'blkvault list')$" bv restore "$repo" $'no\esuch' "$T/x" -q
# a bidi override (U+202E) and a C1 control (U+009B) as bytes, other UTF-8 (U+00E9) as it is
expect_fail 1 "^error: no snapshot matches 'r\\\\xe2\\\\x80\\\\xaeé\\\\xc2\\\\x9b' (see 'blkvault list')$" \
    bv restore "$repo" $'r\xe2\x80\xae\xc3\xa9\xc2\x9b' "$T/x" -q

# --json is valid JSON (UTF-8) whatever bytes a name or a source path holds: each byte that is
# not UTF-8 becomes U+FFFD, UTF-8 and control characters come out as themselves
repo=$T/bytes
bv init "$repo" --encryption=none >/dev/null
src=$T/$'src\xfe\xff.img'
cp "$T/a" "$src"
bv backup "$repo" "$src" --name=$'caf\xe9 h\xc3\xa9 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf' -q
bv backup "$repo" "$T/b" --name=b -q
"$RENAME_SNAPSHOT" "$repo" "$(bv list "$repo" --json | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin) if s["name"] == "b"][0])')" $'b\x01\t"\\\xff'
bv list "$repo" --json > "$T/list.json"
python3 - "$T/list.json" "$src" <<'PY' || die "list --json is not valid JSON with the right names"
import json, sys
d = json.loads(open(sys.argv[1], "rb").read())   # strict UTF-8: raises on any stray byte
names = sorted(s["name"] for s in d)
want = sorted(["caf\ufffd h\u00e9 \ufffd\ufffd\ufffd \ufffd\ufffd\ufffd\ufffd \ufffd\ufffd", 'b\x01\t"\\\ufffd'])
assert names == want, (names, want)
paths = [s["source"]["path"] for s in d if s["name"].startswith("caf")]
assert paths == [sys.argv[2].encode("utf-8", "surrogateescape").decode("utf-8", "replace")], paths
PY
echo ok
