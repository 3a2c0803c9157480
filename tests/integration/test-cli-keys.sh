#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Keys (issue 12): init says where the key is; export, lose keys/default, import, the repository
# opens; the paper form round-trips and a one-character typo is found on its line; several key
# slots (add, list, remove; the last one stays).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl

repo=$T/repo
echo "correct horse" >"$T/pass"
echo "second secret" >"$T/pass2"
bv init "$repo" --passphrase-file="$T/pass" 2>"$T/init.err" >/dev/null || { cat "$T/init.err"; die "init failed"; }
grep -q "the repository key is sealed in '$repo/keys/default', its only copy: export it and keep the export elsewhere ('blkvault key export $repo FILE', or --paper to print it)" "$T/init.err" ||
    { cat "$T/init.err"; die "init does not say where the key is"; }
randfile "$T/a" 1 keys
bv backup "$repo" "$T/a" --passphrase-file="$T/pass" -q >/dev/null
P=(--passphrase-file="$T/pass")

# export to a file and to stdout; lose keys/default; import; the repository opens
bv key export "$repo" "$T/key.json" "${P[@]}" 2>/dev/null
bv key export "$repo" "${P[@]}" >"$T/key.stdout"
assert_same "$T/key.json" "$T/key.stdout"
bv key export "$repo" "$T/key.paper" --paper "${P[@]}" 2>/dev/null
rm "$repo/keys/default"
expect_fail 4 "^error: cannot open repository '$repo': it has no key slot (keys/ holds none): import a key export with 'blkvault key import $repo FILE'$" bv list "$repo" "${P[@]}"
bv key import "$repo" "$T/key.json" 2>/dev/null
bv restore "$repo" latest "$T/a.out" "${P[@]}" -q >/dev/null
assert_same "$T/a" "$T/a.out"
expect_fail 1 "^error: '$repo' has a key slot 'default' already: import as another with --slot=NAME$" bv key import "$repo" "$T/key.json"

# the paper form: printable, round-trips, a typo is found on its line
head -1 "$T/key.paper" | grep_q "^blkvault paper key v1, [0-9]* bytes$" || die "paper header: $(head -1 "$T/key.paper")"
! LC_ALL=C grep -q '[^ -~]' "$T/key.paper" || die "the paper form is not printable"
rm "$repo/keys/default"
bv key import "$repo" "$T/key.paper" 2>/dev/null
bv list "$repo" "${P[@]}" >/dev/null
# one character changed on line 3 (the first hex digit after "03: ")
sed '4s/^\(03: \)\(.\)/\1X\2/; 4s/^\(03: \)X0/\11/; 4s/^\(03: \)X[^0]/\10/' "$T/key.paper" >"$T/typo.paper"
! cmp -s "$T/key.paper" "$T/typo.paper" || die "the typo was not made"
expect_fail 1 "^error: line 3 of the paper key in '$T/typo.paper' does not match its checksum: a typo? Compare it with the paper$" \
    bv key import "$repo" "$T/typo.paper" --slot=typo
sed '5d' "$T/key.paper" >"$T/missing.paper"
expect_fail 1 "^error: line 4 of the paper key in '$T/missing.paper' is missing (line 5 follows line 3)$" \
    bv key import "$repo" "$T/missing.paper" --slot=missing
# another repository's key is refused
bv init "$T/other" --passphrase-file="$T/pass" >/dev/null 2>&1
expect_fail 3 "^error: '$T/key.json' holds the key of another repository$" bv key import "$T/other" "$T/key.json" --slot=x

# key slots: add, list, open with either, remove; the last slot stays
bv key add "$repo" "${P[@]}" --new-passphrase-file="$T/pass2" 2>/dev/null
assert_eq "$(bv key list "$repo" "${P[@]}" | tr '\n' ' ')" "default key-1 " "key list"
bv list "$repo" --passphrase-file="$T/pass2" >/dev/null
bv key remove "$repo" default "${P[@]}" 2>/dev/null
expect_fail 3 "^error: cannot open repository '$repo': wrong passphrase or key$" bv list "$repo" "${P[@]}"
expect_fail 1 "^error: 'key-1' is the last key slot of '$repo': removing it would make every snapshot unreadable (add another first with 'blkvault key add')$" \
    bv key remove "$repo" key-1 --passphrase-file="$T/pass2"
expect_fail 1 "^error: '$repo' has no key slot 'nosuch' (see 'blkvault key list $repo')$" \
    bv key remove "$repo" nosuch --passphrase-file="$T/pass2"
bv restore "$repo" latest "$T/a2.out" --passphrase-file="$T/pass2" -q >/dev/null
assert_same "$T/a" "$T/a2.out"
expect_fail 2 "^error: invalid --slot 'A B' (1 to 64 of a-z, 0-9, '.', '_', '-')$" bv key add "$repo" --slot='A B'
expect_fail 2 "^error: expected 'blkvault key change|export|import|add|list|remove ...' (see 'blkvault help key')$" bv key frob "$repo"
echo ok
