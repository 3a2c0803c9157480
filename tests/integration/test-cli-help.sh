#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every command's --help runs, exits 0 and names the command; bad usage exits 2, and too few or
# too many arguments are said one way: "expected 'blkvault CMD ARGS' (see 'blkvault help CMD')".
. "$SOURCE_ROOT/tests/lib.sh"

# expect_usage FORM CMD ARG...: 'blkvault CMD ARG...' exits 2 with the one usage error, naming FORM
expect_usage() {
    local form=$1; shift
    expect_fail 2 "" bv "$@"
    assert_eq "$(cat "$T/.err")" "error: expected 'blkvault $form' (see 'blkvault help $1')" "usage error of 'blkvault $*'"
}

bv --help | grep '^Usage: blkvault COMMAND' >/dev/null || die "top-level --help"
bv --version | grep '^blkvault ' >/dev/null || die "--version"
# every command the top-level help lists (main.c's table)
commands=$(bv --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
[ "$(echo "$commands" | wc -w)" -ge 19 ] || die "blkvault --help lists too few commands: $commands"
for cmd in $commands; do
    out=$(bv "$cmd" --help) || die "$cmd --help exited non-zero"
    echo "$out" | grep "^Usage: blkvault $cmd" >/dev/null || die "$cmd --help does not show its usage"
done
expect_fail 2 "^error: unknown command 'frobnicate' (see 'blkvault help')$" bv frobnicate
expect_usage "init REPO" init
expect_fail 2 "^error: unknown encryption 'rot13' (aes-256-gcm or none)$" bv init "$T/r" --encryption=rot13
expect_fail 2 "^error: invalid --chunk-size '1:2' (expected MIN:AVG:MAX)$" bv init "$T/r" --chunk-size=1:2
expect_fail 2 "^error: invalid chunk sizes 65536:16384:262144 for the hybrid chunker (need min < avg < max, multiples of 4 KiB for hybrid and fixed, at most 4 MiB)$" \
    bv init "$T/r" --encryption=none --chunk-size=64K:16K:256K
expect_fail 2 "^error: invalid --compression 'lz4' (auto, zstd, zstd:LEVEL 1-19, or none)$" bv init "$T/r" --compression=lz4
expect_fail 2 "^error: invalid --threads '0' (1 to 256)$" bv backup "$T/r" "$T/x" --threads=0
expect_fail 2 "^error: invalid --threads '4x' (1 to 256)$" bv restore "$T/r" latest "$T/x" --threads=4x
expect_fail 2 "^error: unknown option '--frob' (see 'blkvault help list')$" bv list "$T/r" --frob
expect_usage "list REPO" list
expect_usage "backup REPO SOURCE" backup "$T/r"
expect_usage "restore REPO SNAPSHOT DEST" restore "$T/r" latest
expect_usage "verify REPO [SNAPSHOT]" verify "$T/r" latest extra
expect_usage "info REPO [SNAPSHOT]" info "$T/r" latest extra
expect_usage "repair REPO" repair "$T/r" extra
expect_usage "gc REPO" gc
expect_usage "copy SRC DST [SNAPSHOT...]" copy "$T/r"
expect_usage "prune REPO" prune
expect_usage "delete REPO SNAPSHOT..." delete "$T/r"
expect_usage "protect REPO SNAPSHOT" protect "$T/r" a b
expect_usage "status" status extra
expect_usage "serve REPO SNAPSHOT" serve "$T/r"
expect_usage "serve --export=NAME" serve --export=x "$T/r"
expect_fail 2 "^error: --socket excludes --listen$" bv serve "$T/r" latest --socket="$T/s" --listen=127.0.0.1:10999 --insecure
expect_usage "mount REPO SNAPSHOT MOUNTPOINT" mount "$T/r" latest
# --cache: a size; 0 is refused (the cache cannot be turned off), as is one beyond 2^63 bytes
for cmd in serve mount; do
    args=("$T/r" latest) && [ "$cmd" = mount ] && args+=("$T")
    for size in 0 0M 00k; do
        expect_fail 2 "" bv "$cmd" "${args[@]}" --cache="$size"
        assert_eq "$(cat "$T/.err")" "error: invalid --cache '$size' (a size such as 256M: the cache cannot be turned off)" "$cmd --cache=$size"
    done
    for size in 8388608T 99999999999999999999 12Q -1 +5M 5MB ''; do
        expect_fail 2 "" bv "$cmd" "${args[@]}" --cache="$size"
        assert_eq "$(cat "$T/.err")" "error: invalid --cache '$size' (a size such as 256M)" "$cmd --cache=$size"
    done
done
for n in 0 4097 -1 2x ''; do
    expect_fail 2 "^error: invalid --partition '$n' (1 to 4096)$" bv mount "$T/r" latest "$T" --partition="$n"
done
: > "$T/file"
expect_fail 2 "^error: mountpoint '$T/file' is not a directory$" bv mount "$T/r" latest "$T/file"
expect_fail 7 "^error: '/' is already a mountpoint$" bv mount "$T/r" latest /
expect_usage "umount MOUNTPOINT" umount
# the commands whose first argument is a keyword: an unknown one lists them, a known one with too
# few or too many arguments gets its own form
expect_usage "key change|export|import|add|list|remove ..." key rotate "$T/r"
expect_usage "key change|export|import|add|list|remove ..." key
expect_usage "key import REPO FILE" key import "$T/r"
expect_usage "key export REPO [FILE|-]" key export "$T/r" a b
expect_usage "key remove REPO SLOT" key remove "$T/r"
expect_usage "target format|run|list ..." target eject /dev/null
expect_usage "target format DEVICE --name=NAME" target format
expect_usage "target run DEVICE|NAME" target run a b
expect_usage "target list" target list extra
expect_usage "job run NAME" job start a
expect_usage "job run NAME" job run
expect_usage "config check" config show
expect_usage "config check" config check extra
# 'blkvault KEYWORD help' is the command's help, as 'blkvault help KEYWORD' is
for cmd in key target job config; do
    bv "$cmd" help >"$T/help" || die "'blkvault $cmd help' exited non-zero"
    assert_eq "$(cat "$T/help")" "$(bv help "$cmd")" "blkvault $cmd help"
    head -1 "$T/help" | grep_q "^Usage: blkvault $cmd " || die "'blkvault $cmd help' does not show its usage"
done
echo "ok"
