#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The library's layers link only downwards: no layer's archive needs a symbol that only a
# higher layer's archive defines (the executables are linked with all archives in one group,
# so the linker alone would not notice a call in the wrong direction).
# Usage: test-layering-link.sh ARCHIVE... (lowest layer first)
set -euo pipefail
archives=("$@")
fail=0
for ((i = 0; i < ${#archives[@]}; i++)); do
    undefined=$(nm -u --format=just-symbols "${archives[i]}" | sort -u)
    below=$(for ((k = 0; k <= i; k++)); do nm -g --defined-only --format=just-symbols "${archives[k]}"; done | sort -u)
    for ((j = i + 1; j < ${#archives[@]}; j++)); do
        above=$(nm -g --defined-only --format=just-symbols "${archives[j]}" | sort -u)
        wrong=$(comm -12 <(comm -23 <(echo "$undefined") <(echo "$below")) <(echo "$above"))
        if [ -n "$wrong" ]; then
            echo "FAIL: $(basename "${archives[i]}") uses $(echo $wrong) from the higher $(basename "${archives[j]}")" >&2
            fail=1
        fi
    done
done
echo "${#archives[@]} layer archives checked: none uses a symbol of a higher layer"
exit $fail
