#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The test command: install what is missing, build with sanitizers, run every suite, and end
# with one line "N passed, N failed" summarising meson's results.
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }

builddir=${BUILDDIR:-build-test}
if [ ! -f "$builddir/build.ninja" ]; then
    meson setup "$builddir" -Db_sanitize=address,undefined -Db_lundef=false -Dwerror_strict=true \
        >"$builddir.setup.log" 2>&1 || { cat "$builddir.setup.log"; echo "0 passed, 1 failed"; exit 1; }
fi
if ! ninja -C "$builddir" >"$builddir.build.log" 2>&1; then
    tail -50 "$builddir.build.log"
    echo "0 passed, 1 failed"
    exit 1
fi

# Every suite but 'slow' (and 'vm' when asked to skip it: BLKVAULT_NO_VM=1).
meson test -C "$builddir" --no-rebuild --print-errorlogs --no-suite slow ${BLKVAULT_NO_VM:+--no-suite vm} "$@"
rc=$?

# Then every fuzz target under libFuzzer for a short while, in its own clang build
# (scripts/fuzz.sh; BLKVAULT_FUZZ_SECONDS each, BLKVAULT_NO_FUZZ=1 skips it). Its result counts
# as one test in the summary.
fuzz_result=
if [ -z "${BLKVAULT_NO_FUZZ:-}" ] && [ $# -eq 0 ]; then
    if ./scripts/fuzz.sh; then fuzz_result=OK; else fuzz_result=FAIL; rc=1; fi
fi

python3 - "$builddir/meson-logs/testlog.json" "$fuzz_result" <<'PY'
import json, sys
counts = {}
if sys.argv[2]:
    counts[sys.argv[2]] = 1
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)["result"]
        counts[r] = counts.get(r, 0) + 1
passed = counts.get("OK", 0) + counts.get("EXPECTEDFAIL", 0)
skipped = counts.get("SKIP", 0)
failed = sum(v for k, v in counts.items() if k not in ("OK", "EXPECTEDFAIL", "SKIP"))
for k in sorted(counts):
    print(f"  {k}: {counts[k]}")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $rc
