#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Progress on a terminal (issue 12): backup, restore and verify --read-data show a progress line
# on a pseudo-terminal, with the work (bytes read or written: not the holes of a sparse image)
# of its total, a rate and an ETA; a line while the key is derived; -q silences those (the
# messages stay), a standard error that is not a terminal gets none; every command accepts -q
# and -v.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd openssl python3 sha256sum

onpty() { python3 "$SOURCE_ROOT/tests/onpty.py" "$@"; }
# lines OUT: what the terminal showed, one redraw a line (\r and the erase sequence removed)
lines() { sed 's/\x1b\[K//g' "$1" | tr '\r' '\n' | sed '/^$/d'; }
# has OUT REGEX WHAT
has() { lines "$1" | grep_q -E "$2" || { lines "$1" | cat -A >&2; die "$3"; }; }

echo pass-progress >"$T/pass"
P=(--passphrase-file="$T/pass")
repo=$T/repo
bv init "$repo" "${P[@]}" -q
[ -d "$repo/keys" ] || die "init -q created no repository"
# a sparse 32 MiB image with 4 MiB of data at 8 MiB
randfile "$T/data" 4 progress
truncate -s 32M "$T/img"
dd if="$T/data" of="$T/img" bs=1M seek=8 conv=notrunc status=none
rate='([0-9.]+ (B|KiB|MiB|GiB)|--)/s'

# --- on a terminal ---------------------------------------------------------------------------
onpty "$T/backup.tty" -- "$BLKVAULT" backup "$repo" "$T/img" --name=img "${P[@]}" >/dev/null
has "$T/backup.tty" '^deriving the key from the passphrase \(scrypt\)\.\.\.$' "backup showed no key derivation line"
# the work is the 4 MiB of data, not the 32 MiB image: the holes are not read
has "$T/backup.tty" "^backup 4\.0 MiB / 4\.0 MiB \(100%\) of 32\.0 MiB image, $rate, ETA 0:00\$" \
    "backup showed no final progress line counting the data only"
has "$T/backup.tty" '^snapshot [0-9a-f]{8}: 32\.0 MiB image, 4\.0 MiB data, 4\.0 MiB new, ' "backup printed no result"
# every progress line: work / total (percent), rate, ETA
lines "$T/backup.tty" | grep '^backup ' | grep_q -Ev "^backup [0-9.]+ (B|KiB|MiB) / [0-9.]+ (B|KiB|MiB) \([0-9]+%\)( of 32\.0 MiB image)?, $rate, ETA ([0-9]+:)?[0-9]+:[0-9]{2}\$" &&
    die "a backup progress line has another form: $(lines "$T/backup.tty" | grep '^backup ' | head -3)"

onpty "$T/restore.tty" -- "$BLKVAULT" restore "$repo" img "$T/out" "${P[@]}"
assert_eq "$(sha256sum <"$T/out")" "$(sha256sum <"$T/img")" "the restored image differs"
has "$T/restore.tty" '^deriving the key from the passphrase \(scrypt\)\.\.\.$' "restore showed no key derivation line"
has "$T/restore.tty" "^restore 4\.0 MiB / 4\.0 MiB \(100%\) of 32\.0 MiB image, $rate, ETA 0:00\$" \
    "restore showed no final progress line counting the data only"

onpty "$T/verify.tty" -- "$BLKVAULT" verify "$repo" --read-data "${P[@]}"
has "$T/verify.tty" "^verify: read 4\.0 MiB / 4\.0 MiB \(100%\), $rate, ETA 0:00\$" "verify --read-data showed no progress"
has "$T/verify.tty" '^ok: 1 snapshots, ' "verify printed no result"
# without --read-data nothing is read: no progress line
onpty "$T/verify-s.tty" -- "$BLKVAULT" verify "$repo" "${P[@]}"
lines "$T/verify-s.tty" | grep_q '^verify: read' && die "verify without --read-data showed a read progress"

# restore to a pipe: every byte is written, holes too
onpty "$T/stdout.tty" -- "$BLKVAULT" restore "$repo" img - "${P[@]}" >"$T/out2"
assert_eq "$(sha256sum <"$T/out2")" "$(sha256sum <"$T/img")" "the image restored to stdout differs"
has "$T/stdout.tty" "^restore 32\.0 MiB / 32\.0 MiB \(100%\), $rate, ETA 0:00\$" "restore to stdout showed no progress"

# -v: how long the open took
onpty "$T/list-v.tty" -- "$BLKVAULT" list "$repo" -v "${P[@]}" >/dev/null
has "$T/list-v.tty" "^opened repository '$repo' in [0-9]+\.[0-9]{2} s \(most of it deriving the key from the passphrase\)\$" \
    "list -v did not say how long the open took"

# --- -q on a terminal: the messages only, no progress or status line --------------------------
onpty "$T/q1.tty" -- "$BLKVAULT" backup "$repo" "$T/img" --name=img2 -q "${P[@]}" >/dev/null
onpty "$T/q2.tty" -- "$BLKVAULT" restore "$repo" img2 "$T/out3" --quiet "${P[@]}"
onpty "$T/q3.tty" -- "$BLKVAULT" verify "$repo" --read-data -q "${P[@]}"
for f in q1 q2 q3; do
    if grep -q $'\x1b' "$T/$f.tty" || lines "$T/$f.tty" | grep_q -E 'deriving|ETA'; then
        cat -A "$T/$f.tty" >&2; die "-q left a progress or status line on the terminal ($f)"
    fi
    assert_eq "$(lines "$T/$f.tty" | wc -l)" 1 "lines on the terminal with -q ($f)"
done
has "$T/q1.tty" '^snapshot [0-9a-f]{8}: 32\.0 MiB image, ' "backup -q printed no result"
assert_eq "$(sha256sum <"$T/out3")" "$(sha256sum <"$T/img")" "the image restored with -q differs"

# --- not a terminal: no progress, no status line, no escape sequence -------------------------
bv backup "$repo" "$T/img" --name=img3 "${P[@]}" >/dev/null 2>"$T/plain.err"
bv restore "$repo" img3 "$T/out4" "${P[@]}" 2>>"$T/plain.err"
bv verify "$repo" --read-data "${P[@]}" 2>>"$T/plain.err"
if grep -Eq $'\r|\x1b|deriving|ETA' "$T/plain.err"; then cat -A "$T/plain.err" >&2; die "progress on a non-terminal"; fi
grep -Eq '^snapshot [0-9a-f]{8}: 32\.0 MiB image' "$T/plain.err" || die "backup printed no result line"
assert_eq "$(wc -l <"$T/plain.err")" 3 "lines on a non-terminal stderr"

# --- -q and -v on every command --------------------------------------------------------------
for cmd in init backup list restore verify info key delete protect serve mount umount target job config; do
    for o in -q --quiet -v --verbose; do
        bv "$cmd" "$o" --help >/dev/null || die "'blkvault $cmd $o --help' failed"
    done
    bv help "$cmd" | grep_q -- '-q, --quiet' || die "'blkvault help $cmd' does not list -q"
done
bv info "$repo" -q "${P[@]}" >/dev/null
bv list "$repo" --verbose "${P[@]}" >/dev/null 2>&1
echo "ok"
