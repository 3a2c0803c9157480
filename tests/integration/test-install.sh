#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `meson install` puts the command, the nbdkit plugin (into nbdkit's own plugin directory, so
# `nbdkit blkvault repo=... snapshot=...` finds it), the man pages, the bash completion (where
# bash-completion's pkg-config file says), the systemd units and generator and the udev rule where
# pkg-config says systemd and udev look for them; the installed units run the installed binary;
# every file blkvault(1) lists as installed (FILES) is; the installed plugin loads in nbdkit.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd meson nbdkit pkg-config

dest=$T/root
meson install -C "$BUILD_ROOT" --no-rebuild --quiet --destdir "$dest" >/dev/null
prefix=$(meson introspect "$BUILD_ROOT" --buildoptions | python3 -c '
import json, sys
print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
plugindir=$(pkg-config --variable=plugindir nbdkit)

[ -x "$dest$prefix/bin/blkvault" ] || die "blkvault is not installed in $prefix/bin"
plugin=$dest$plugindir/nbdkit-blkvault-plugin.so
[ -f "$plugin" ] || die "the plugin is not installed in nbdkit's plugin directory $plugindir"
mandir=$dest$prefix/$(meson introspect "$BUILD_ROOT" --buildoptions | python3 -c '
import json, sys
print([o["value"] for o in json.load(sys.stdin) if o["name"] == "mandir"][0])')
[ -f "$mandir/man1/blkvault.1" ] || die "blkvault.1 is not installed in $mandir/man1"
for cmd in backup copy files restore; do
    [ -f "$mandir/man1/blkvault-$cmd.1" ] || die "blkvault-$cmd.1 is not installed in $mandir/man1"
done
[ -f "$mandir/man7/blkvault-json.7" ] || die "blkvault-json.7 is not installed in $mandir/man7"
[ -f "$mandir/man5/blkvault.conf.5" ] || die "blkvault.conf.5 is not installed in $mandir/man5"
if pkg-config --exists systemd; then
    unitdir=$dest$(pkg-config --variable=systemdsystemunitdir systemd)
    gendir=$dest$(pkg-config --variable=systemdsystemgeneratordir systemd)
else
    unitdir=$dest$prefix/lib/systemd/system gendir=$dest$prefix/lib/systemd/system-generators
fi
for u in blkvault-nbd@.socket blkvault-nbd@.service blkvault-target@.service blkvault-job@.service \
         blkvault-alarm.service blkvault-alarm.timer; do
    [ -f "$unitdir/$u" ] || die "$u is not installed in $unitdir"
done
for u in blkvault-nbd@.service blkvault-target@.service blkvault-job@.service blkvault-alarm.service; do
    grep -q "^ExecStart=$prefix/bin/blkvault " "$unitdir/$u" || die "$u does not run $prefix/bin/blkvault"
done
assert_eq "$(readlink "$gendir/blkvault-generator")" "$prefix/bin/blkvault" "the generator"
if pkg-config --exists udev; then
    rulesdir=$dest$(pkg-config --variable=udevdir udev)/rules.d
else
    rulesdir=$dest$prefix/lib/udev/rules.d
fi
[ -f "$rulesdir/80-blkvault.rules" ] || die "the udev rule is not installed in $rulesdir"
completionsdir=$(pkg-config --variable=completionsdir bash-completion) ||
    die "bash-completion's pkg-config file is missing (scripts/install-deps.sh installs bash-completion)"
[ -f "$dest$completionsdir/blkvault" ] || die "the bash completion is not installed in $completionsdir"
cmp "$dest$completionsdir/blkvault" "$SOURCE_ROOT/shell-completion/blkvault.bash" || die "the installed completion differs"
# blkvault(1) FILES, "Installed": each file named there (by its name: the directories depend on
# the prefix and the pkg-config files)
MANWIDTH=200 man -l "$SOURCE_ROOT/docs/man/blkvault.1" 2>/dev/null |
    sed -n '/^FILES/,/^ *Used at run time/p' | grep -E '^ {7}/' | sed 's/^ *//; s/, /\n/g' >"$T/files"
[ "$(wc -l <"$T/files")" -ge 9 ] || die "found too few files in blkvault(1) FILES: $(cat "$T/files")"
while read -r f; do
    find "$dest" -name "$(basename "$f")*" | grep_q . || die "blkvault(1) FILES names '$f', which is not installed"
done <"$T/files"

# The installed plugin loads (with the sanitizer runtimes first when the build has them).
preload=$(ldd "$plugin" | grep -o '/[^ ]*lib\(asan\|ubsan\)[^ ]*' | tr '\n' ' ' || true)
LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 nbdkit --dump-plugin "$plugin" > "$T/dump" 2>&1 \
    || { cat "$T/dump" >&2; die "nbdkit cannot load the installed plugin"; }
grep -qx 'name=blkvault' "$T/dump" || die "the installed plugin does not call itself blkvault"
grep -q '^thread_model=parallel' "$T/dump" || die "the plugin is not parallel"
echo ok
