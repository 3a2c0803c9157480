#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A repository written before --compression=auto existed (tests/golden/repo-zstd3: zstd level 3,
# AES-256-GCM, key file tests/golden/repo-zstd3.key, one snapshot 'golden' of the image
# tests/golden/make-source.py writes) reads unchanged: restore gives the same bytes, verify finds
# nothing wrong, the config still says zstd level 3, and a new backup into it keeps zstd level 3
# and leaves its config as it was.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd python3 sha256sum

golden=$SOURCE_ROOT/tests/golden
repo=$T/repo key=$T/key
cp -r "$golden/repo-zstd3" "$repo"
mkdir -p "$repo/tmp" "$repo/leases"  # empty directories do not live in git
install -m 600 "$golden/repo-zstd3.key" "$key"
python3 "$golden/make-source.py" "$T/source"
assert_eq "$(sha256sum <"$T/source" | cut -d' ' -f1)" 49afd0efeec8bed52020c11dc4f18721aa3851fd70e04345e064d826e30bdfee \
    "tests/golden/make-source.py wrote other bytes than the golden repository holds"

bv restore "$repo" golden "$T/out" --key-file="$key" >/dev/null
assert_same "$T/source" "$T/out"
bv verify "$repo" --key-file="$key" >/dev/null
bv info "$repo" --key-file="$key" --json >"$T/info.json"
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$T/info.json" "$1"; }
assert_eq "$(field compression)" zstd "compression of the golden repository"
assert_eq "$(field compression_level)" 3 "compression level of the golden repository"
[ "$(field groups)" -ge 1 ] || die "the golden repository holds no compression group"

# a new backup into it: the repository's own setting, never auto; the config is not rewritten
cmp "$repo/config" "$golden/repo-zstd3/config" || die "opening the golden repository changed its config"
python3 - "$T/source" "$T/more" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(d[:512 * 1024][::-1] + d)
PY
bv backup "$repo" "$T/more" --name=more --key-file="$key" >/dev/null
cmp "$repo/config" "$golden/repo-zstd3/config" || die "a backup changed the golden repository's config"
bv restore "$repo" more "$T/more.out" --key-file="$key" >/dev/null
assert_same "$T/more" "$T/more.out"
bv verify "$repo" --key-file="$key" >/dev/null
