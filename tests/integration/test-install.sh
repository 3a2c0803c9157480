#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `meson install` puts the command, the nbdkit plugin (into nbdkit's own plugin directory, so
# `nbdkit blkvault repo=... snapshot=...` finds it), the man page, the bash completion (where
# bash-completion's pkg-config file says) and the systemd units in place; every file blkvault(1)
# lists as installed (FILES) is; the installed plugin loads in nbdkit.
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
find "$dest" -name 'blkvault.1*' | grep . >/dev/null || die "the man page is not installed"
find "$dest" -name 'blkvault-nbd@.socket' | grep . >/dev/null || die "the socket unit is not installed"
find "$dest" -name 'blkvault-nbd@.service' | grep . >/dev/null || die "the service unit is not installed"
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
    find "$dest" -name "$(basename "$f")*" | grep -q . || die "blkvault(1) FILES names '$f', which is not installed"
done <"$T/files"

# The installed plugin loads (with the sanitizer runtimes first when the build has them).
preload=$(ldd "$plugin" | grep -o '/[^ ]*lib\(asan\|ubsan\)[^ ]*' | tr '\n' ' ' || true)
LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 nbdkit --dump-plugin "$plugin" > "$T/dump" 2>&1 \
    || { cat "$T/dump" >&2; die "nbdkit cannot load the installed plugin"; }
grep -qx 'name=blkvault' "$T/dump" || die "the installed plugin does not call itself blkvault"
grep -q '^thread_model=parallel' "$T/dump" || die "the plugin is not parallel"
echo ok
