#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every command's --help runs, exits 0 and names the command; bad usage exits 2.
. "$SOURCE_ROOT/tests/lib.sh"

bv --help | grep '^Usage: blkvault COMMAND' >/dev/null || die "top-level --help"
bv --version | grep '^blkvault ' >/dev/null || die "--version"
for cmd in init backup list restore verify info key serve mount umount config target job; do
    out=$(bv "$cmd" --help) || die "$cmd --help exited non-zero"
    echo "$out" | grep "^Usage: blkvault $cmd" >/dev/null || die "$cmd --help does not show its usage"
done
expect_fail 2 "unknown command 'frobnicate'" bv frobnicate
expect_fail 2 "expected exactly one argument" bv init
expect_fail 2 "unknown encryption 'rot13'" bv init "$T/r" --encryption=rot13
expect_fail 2 "invalid --chunk-size" bv init "$T/r" --chunk-size=1:2
expect_fail 2 "invalid chunk sizes" bv init "$T/r" --encryption=none --chunk-size=64K:16K:256K
expect_fail 2 "invalid --compression" bv init "$T/r" --compression=lz4
expect_fail 2 "invalid --threads '0'" bv backup "$T/r" "$T/x" --threads=0
expect_fail 2 "invalid --threads '4x'" bv restore "$T/r" latest "$T/x" --threads=4x
expect_fail 2 "unrecognized option '--frob'" bv list "$T/r" --frob
expect_fail 2 "expected exactly one argument: REPO" bv list
expect_fail 2 "expected two arguments: REPO SOURCE" bv backup "$T/r"
expect_fail 2 "expected three arguments: REPO SNAPSHOT DEST" bv restore "$T/r" latest
expect_fail 2 "expected REPO \[SNAPSHOT\]" bv verify "$T/r" latest extra
expect_fail 2 "expected: blkvault key change REPO" bv key rotate "$T/r"
expect_fail 2 "expected two arguments: REPO SNAPSHOT" bv serve "$T/r"
expect_fail 2 "--socket excludes --port and --address" bv serve "$T/r" latest --socket="$T/s" --port=10999
expect_fail 2 "expected three arguments: REPO SNAPSHOT MOUNTPOINT" bv mount "$T/r" latest
expect_fail 2 "invalid --partition '0'" bv mount "$T/r" latest "$T" --partition=0
: > "$T/file"
expect_fail 2 "is not a directory" bv mount "$T/r" latest "$T/file"
expect_fail 5 "'/' is already a mountpoint" bv mount "$T/r" latest /
expect_fail 2 "expected one argument: MOUNTPOINT" bv umount
echo "ok"
expect_fail 2 "^error: expected 'blkvault target format DEVICE --name=NAME', 'target run DEVICE|NAME' or 'target list' (see 'blkvault target --help')$" bv target eject /dev/null
