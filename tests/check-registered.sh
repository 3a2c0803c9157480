#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Fails the configure step when a test file on disk is not registered in a meson.build.
# Usage: check-registered.sh TESTS_DIR REGISTERED_FILE...
set -euo pipefail
dir=$1; shift
declare -A known=()
for f in "$@"; do known[$(basename "$f")]=1; done
missing=()
while IFS= read -r f; do
    [ -n "${known[$(basename "$f")]:-}" ] || missing+=("${f#"$dir"/}")
done < <(find "$dir" \( -name 'test-*.c' -o -name 'test-*.sh' -o -name 'fuzz-*.c' \) -not -path '*/corpus/*' -not -name fuzz-main.c | sort)
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests on disk but not registered in meson: ${missing[*]}" >&2
    exit 1
fi
