#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The CLI's errors (issue 12): each starts with "error:", says what to do, and exits with the one
# code that EXIT STATUS in blkvault(1) gives its meaning.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd setpriv

# not a repository: a missing directory, an empty one, a file
expect_fail 10 "^error: repository '$T/none' does not exist (create one with 'blkvault init $T/none')$" bv list "$T/none"
mkdir "$T/empty"
expect_fail 10 "^error: '$T/empty' is not a blkvault repository (no config file)$" bv list "$T/empty"
expect_fail 10 "^error: '$T/empty' is not a blkvault repository (no config file)$" bv backup "$T/empty" /dev/null
touch "$T/file"
expect_fail 10 "^error: '$T/file' is not a blkvault repository (no config file)$" bv info "$T/file"

# option typos: "error:" and a hint, never getopt's bare message
bv init "$T/r" --encryption=none >/dev/null
expect_fail 2 "^error: unknown option '--nmae' (see 'blkvault help backup')$" bv backup "$T/r" /dev/null --nmae=x
assert_eq "$(cat "$T/.err")" "error: unknown option '--nmae' (see 'blkvault help backup')" "only one line"
expect_fail 2 "^error: option '--name' needs a value (see 'blkvault help backup')$" bv backup "$T/r" /dev/null --name
expect_fail 2 "^error: unknown option '-x' (see 'blkvault help list')$" bv list "$T/r" -x
expect_fail 2 "^error: unknown option '--bogus' (see 'blkvault help verify')$" bv verify "$T/r" --bogus
expect_fail 2 "^error: unknown option '--no' (see 'blkvault help restore')$" bv restore "$T/r" latest "$T/x" --no
expect_fail 2 "^error: unknown command 'bakup' (see 'blkvault help')$" bv bakup

# a source that does not exist is named as such, before the repository is opened (no passphrase
# is asked for) and before anything is written
expect_fail 1 "^error: source '$T/nosuch' does not exist$" bv backup "$T/r" "$T/nosuch"
assert_eq "$(cat "$T/.err")" "error: source '$T/nosuch' does not exist" "the only message for a missing source"
expect_fail 1 "^error: source 'nosuch' does not exist$" bv backup "$T/r" nosuch
expect_fail 1 "^error: source '$T/nodir/x' does not exist$" bv backup "$T/r" "$T/nodir/x"
assert_eq "$(bv list "$T/r" --json)" "[]" "snapshots after backups of missing sources"
BLKVAULT_PASSPHRASE=pw bv init "$T/enc" >/dev/null 2>&1
expect_fail 1 "^error: source '$T/nosuch' does not exist$" bv backup "$T/enc" "$T/nosuch" </dev/null

# mount and umount say they need root (exit 9), before touching anything
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
mkdir -p "$T/mp"
chmod 755 "$T" "$T/mp"
chmod -R a+rX "$T/r"
expect_fail 9 "^error: mount needs root (it sets up a loop device and mounts a filesystem): run it with sudo$" \
    "${nobody[@]}" "$BLKVAULT" mount "$T/r" latest "$T/mp"
expect_fail 9 "^error: umount needs root (it unmounts a filesystem and detaches a loop device): run it with sudo$" \
    "${nobody[@]}" "$BLKVAULT" umount "$T/mp"
# a repository the user may not read
mkdir -m 700 "$T/private"
bv init "$T/private/r" --encryption=none >/dev/null
expect_fail 9 "^error: cannot open repository '$T/private/r': Permission denied (its owner and root may open it; to let a group read it, share it: see blkvault-files(1))$" \
    "${nobody[@]}" "$BLKVAULT" list "$T/private/r"
# --encryption=none with a secret option: refused, nothing created
echo pass >"$T/pass"
for opt in --passphrase-file="$T/pass" --key-file="$T/pass" --passphrase-command="echo x" --passphrase-fd=0; do
    expect_fail 2 "^error: --encryption=none stores the data unencrypted: a passphrase or key file would protect nothing (leave out --encryption=none to encrypt)$" \
        bv init "$T/plain" --encryption=none "$opt"
    [ ! -e "$T/plain" ] || die "a refused init left '$T/plain'"
done
# a secret named for an unencrypted repository: refused by the open itself (such a repository
# opens with any secret, so it is not the one the secret belongs to), before anything is written
bv backup "$T/r" "$T/pass" --name=p >/dev/null
for opt in --passphrase-file="$T/pass" --key-file="$T/pass" --passphrase-command="echo x"; do
    what=passphrase; [ "${opt%%=*}" = --key-file ] && what="key file"
    expect_fail 3 "^error: cannot open repository '$T/r': it is not encrypted, so it is not the one the $what given belongs to (an unencrypted repository opens without one)$" \
        bv restore "$T/r" p "$T/restored" "$opt"
    [ ! -e "$T/restored" ] || die "restore with $opt wrote '$T/restored'"
    expect_fail 3 "it is not encrypted" bv backup "$T/r" "$T/pass" --name=q "$opt"
done
[ ! -e "$T/r/leases" ] || [ -z "$(ls -A "$T/r/leases")" ] || die "a refused open left a lease"
assert_eq "$(bv list "$T/r" --json | grep -c '"name": *"q"' || :)" 0 "snapshots written with a refused secret"
BLKVAULT_PASSPHRASE=pw bv list "$T/r" >/dev/null || die "an ambient \$BLKVAULT_PASSPHRASE refused an unencrypted repository"

# blkvault help CMD is the command's --help
for cmd in backup restore list info key verify; do
    assert_eq "$(bv help "$cmd")" "$(bv "$cmd" --help)" "blkvault help $cmd"
done
bv help backup | grep_q "^Usage: blkvault backup" || die "help backup shows no backup usage"
expect_fail 2 "^error: unknown command 'bakup' (see 'blkvault help')$" bv help bakup
# help help is the top-level help; help CMD SUB... (help key export) is the command's help
assert_eq "$(bv help help)" "$(bv --help)" "blkvault help help"
assert_eq "$(bv help key export)" "$(bv key --help)" "blkvault help key export"
expect_fail 2 "^error: unknown command 'bakup' (see 'blkvault help')$" bv help bakup extra
echo ok
