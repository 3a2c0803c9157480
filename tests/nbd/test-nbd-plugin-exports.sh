#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The nbdkit plugin exports plugin_init and nothing else (nbd-plugin/plugin.syms): nbdkit loads
# plugins RTLD_GLOBAL, so every other exported function of the library linked into it would be
# visible to the modules loaded after it. The plugin still loads and serves (nbdkit --dump-plugin).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd nm
need_cmd nbdkit

[ -f "$NBD_PLUGIN" ] || die "no plugin at '$NBD_PLUGIN'"
# ASan's ODR indicators (__odr_asan.*) are the sanitizer's, not ours: with the version script
# they are local too, but allow them should a toolchain export them.
exports=$(nm -D --defined-only "$NBD_PLUGIN" | awk '{print $NF}' | grep -v '^__odr_asan' | sort)
[ "$exports" = "plugin_init" ] ||
    die "the plugin exports more than plugin_init: $(echo "$exports" | head -20 | tr '\n' ' ') ($(echo "$exports" | wc -l) symbols)"
"${NBD_ENV[@]}" nbdkit --dump-plugin "$NBD_PLUGIN" >"$T/dump" 2>&1 || { cat "$T/dump" >&2; die "nbdkit cannot load the plugin"; }
grep -q '^name=blkvault$' "$T/dump" || { cat "$T/dump" >&2; die "nbdkit --dump-plugin shows no name=blkvault"; }
echo "the plugin exports only plugin_init, and nbdkit loads it"
