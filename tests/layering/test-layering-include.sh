#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The library's layers only look down (src/lib/meson.build): compiled with a layer's include
# path (its own folder and the folders below it, as its meson dependency gives them), every
# header of that layer compiles (the control), and no header of a higher layer is found.
# Usage: test-layering-include.sh PROBE.c CONFIG_DIR LAYER_DIR... (lowest first); $CC is the
# compiler command.
set -euo pipefail
probe=$1 config_dir=$2; shift 2
dirs=("$@")
read -r -a cc <<<"${CC:-cc}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

compile() {  # compile HEADER INCLUDE-DIR...
    local header=$1; shift
    local inc=(-I"$config_dir")
    for d in "$@"; do inc+=(-I"$d"); done
    "${cc[@]}" -std=gnu11 -D_GNU_SOURCE -fsyntax-only "${inc[@]}" -DPROBE_HEADER="\"$header\"" \
        "$probe" >"$tmp/out" 2>&1
}

fail=0 controls=0 refusals=0
for ((i = 0; i < ${#dirs[@]}; i++)); do
    below=("${dirs[@]:0:i+1}")
    layer=$(basename "${dirs[i]}")
    for h in "${dirs[i]}"/*.h; do
        if ! compile "$(basename "$h")" "${below[@]}"; then
            echo "FAIL: ${h#"${dirs[0]%/*}"/} does not compile with layer '$layer' include path:" >&2
            cat "$tmp/out" >&2
            fail=1
        fi
        controls=$((controls + 1))
    done
    for ((j = i + 1; j < ${#dirs[@]}; j++)); do
        for h in "${dirs[j]}"/*.h; do
            if compile "$(basename "$h")" "${below[@]}"; then
                echo "FAIL: layer '$layer' can include $(basename "${dirs[j]}")/$(basename "$h") of a higher layer" >&2
                fail=1
            elif ! grep -q "No such file" "$tmp/out"; then
                echo "FAIL: $(basename "$h") from layer '$layer' failed for another reason:" >&2
                cat "$tmp/out" >&2
                fail=1
            fi
            refusals=$((refusals + 1))
        done
    done
done
echo "$controls headers compile with their layer's include path; $refusals includes of a higher layer's header are refused"
exit $fail
