#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A key file whose scrypt parameters are each in range but together invalid (RFC 7914 wants
# N < 2^(16 r): N = 2^16 with r = 1 breaks it) is a corrupt key file: exit 4, "Bad message",
# not a failed allocation. The same key file with r = 2 is well-formed (and then only the key
# is wrong: exit 3).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd python3

export BLKVAULT_PASSPHRASE=pw
repo=$T/repo
bv init "$repo" >/dev/null
set_kdf() {
    python3 - "$repo/keys/default" "$1" "$2" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))
k["kdf"]["log2_n"], k["kdf"]["r"] = int(sys.argv[2]), int(sys.argv[3])
open(sys.argv[1], "w").write(json.dumps(k))
PY
}
set_kdf 16 1
expect_fail 4 "^error: cannot open repository '$repo': key slot 'keys/default' is damaged (Bad message): import a key export with 'blkvault key import $repo FILE'$" bv list "$repo"
set_kdf 16 2
expect_fail 3 "^error: cannot open repository '$repo': wrong passphrase or key$" bv list "$repo"

# no key slot at all (keys/default removed, or keys/ itself): said so, not "wrong passphrase or
# key", which would send the user hunting for the right one
rm "$repo/keys/default"
for c in list verify; do
    expect_fail 4 "^error: cannot open repository '$repo': it has no key slot (keys/ holds none): import a key export with 'blkvault key import $repo FILE'$" bv $c "$repo"
done
rmdir "$repo/keys"
expect_fail 4 "^error: cannot open repository '$repo': it has no key slot (keys/ holds none): import a key export with 'blkvault key import $repo FILE'$" bv list "$repo"
echo ok
