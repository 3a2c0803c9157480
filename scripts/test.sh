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

# Mounts shared, as systemd makes them at boot (this machine's PID 1 is not systemd: every mount
# was private). A mount namespace made as a slave of ours then follows our umounts: libvirt makes
# one for each QEMU it starts, and with private mounts its copy of every filesystem mounted at
# that moment kept the filesystem and its device after the test that mounted it unmounted it
# (bench/fs-compare's btrfs row: "'/dev/loop1' is in use", held by a QEMU of the libvirt suite).
[ "$(id -u)" != 0 ] || mount --make-rshared / || echo "warning: cannot make / a shared mount (mount --make-rshared /)"

# Every suite but 'slow' (and 'vm' when asked to skip it: BLKVAULT_NO_VM=1), then every fuzz target
# under libFuzzer for a short while, in its own clang build (scripts/fuzz.sh; BLKVAULT_FUZZ_SECONDS
# each, BLKVAULT_NO_FUZZ=1 skips it; its result counts as one test in the summary).
# Without arguments, three things at once, so that the two cores stay busy:
#  - the guest suites, vm then libvirt: each of their tests boots a QEMU guest under TCG (one
#    core), one at a time (vm: one guest at a time; libvirt: one libvirtd, under its lock), in a
#    meson run of their own (its log meson-logs/testlog-guests.*), then the fuzzing;
#  - the clang build of the fuzz targets, niced, so that it takes only what the tests leave;
#  - every other suite, in the foreground.
# With arguments (meson test's: a suite, a test), one meson run with them and no fuzzing.
fuzz=
[ -z "${BLKVAULT_NO_FUZZ:-}" ] && [ $# -eq 0 ] && fuzz=1
logs=("$builddir/meson-logs/testlog.json")
fuzz_result=
if [ $# -eq 0 ]; then
    rm -f "$builddir/meson-logs/testlog-guests.json" "$builddir/meson-logs/guests.rc" "$builddir/meson-logs/fuzz.rc"
    [ -z "$fuzz" ] || { nice -n 10 ./scripts/fuzz.sh --build-only >"$builddir.fuzz-build.log" 2>&1 & }
    guests=(--suite libvirt)
    [ -n "${BLKVAULT_NO_VM:-}" ] || guests=(--suite vm --suite libvirt)
    (
        meson test -C "$builddir" --no-rebuild --print-errorlogs --logbase testlog-guests \
            --no-suite slow "${guests[@]}"
        echo $? >"$builddir/meson-logs/guests.rc"
        # waits for the build above (scripts/fuzz.sh takes the build directory's lock)
        if [ -n "$fuzz" ]; then ./scripts/fuzz.sh; echo $? >"$builddir/meson-logs/fuzz.rc"; fi
    ) >"$builddir.guests.log" 2>&1 &
    guests_pid=$!
    meson test -C "$builddir" --no-rebuild --print-errorlogs --no-suite slow --no-suite vm --no-suite libvirt
    rc=$?
    wait "$guests_pid"
    echo "--- the guest suites (vm, libvirt) and the fuzzing, run beside the above:"
    cat "$builddir.guests.log"
    [ "$(cat "$builddir/meson-logs/guests.rc" 2>/dev/null)" = 0 ] || rc=1
    logs+=("$builddir/meson-logs/testlog-guests.json")
    if [ -n "$fuzz" ]; then
        if [ "$(cat "$builddir/meson-logs/fuzz.rc" 2>/dev/null)" = 0 ]; then fuzz_result=OK; else fuzz_result=FAIL; rc=1; fi
    fi
    wait
else
    meson test -C "$builddir" --no-rebuild --print-errorlogs --no-suite slow ${BLKVAULT_NO_VM:+--no-suite vm} "$@"
    rc=$?
fi

python3 - "$fuzz_result" "${logs[@]}" <<'PY'
import json, os, sys
counts = {}
if sys.argv[1]:
    counts[sys.argv[1]] = 1
for log in sys.argv[2:]:
    if not os.path.exists(log):  # a meson run that did not start: count it as a failure
        counts["ERROR"] = counts.get("ERROR", 0) + 1
        continue
    with open(log) as f:
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
