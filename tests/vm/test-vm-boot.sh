#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The harness itself: vmrun boots Debian's kernel in plain mode and runs a command there with the
# host's environment, working directory and build tree (an ASan blkvault runs), its arguments
# intact; the command's output and exit code come back; the root is the host's, read-only, with
# tmpfs where tests write; the hard timeout kills a guest that does not end; usage errors.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_need

expect_fail 2 "no command given" "$VMRUN"
expect_fail 2 "bad size 'big'" "$VMRUN" --scratch big -- true

# the command comes from the results directory: the guest's /var/tmp (where $T is) is a tmpfs
res=$T/res
mkdir -p "$res"
cat >"$res/probe.sh" <<'EOF'
echo "args: $#|$1|$2"
echo "kernel: $(uname -r)"
echo "root: $(findmnt -n -o FSTYPE /) $(findmnt -n -o OPTIONS / | cut -d, -f1)"
for d in /tmp /var/tmp /run; do echo "$d: $(findmnt -n -o FSTYPE "$d")"; done
touch /usr/vmrun-probe 2>/dev/null && echo "root is writable"
echo "cwd: $PWD"
echo "marker: $VMBOOT_MARKER"
"$BLKVAULT" init /tmp/repo --encryption=none >/dev/null 2>&1 && echo "blkvault ran"
echo "to stderr" >&2
exit 3
EOF
export VMBOOT_MARKER="from the host"
rc=0
(cd "$SOURCE_ROOT" && "$VMRUN" --results "$res" -- bash "$res/probe.sh" "two words" x) >"$T/out" 2>"$T/err" || rc=$?
cat "$T/out" "$T/err"
assert_eq "$rc" 3 "vmrun's exit code"
kver=$(sed -n 's/^kernel: //p' "$T/out")
[ -e "/lib/modules/$kver/modules.dep" ] || die "the guest ran kernel '$kver', not a packaged one"
[ "$kver" != "$(uname -r)" ] || die "the guest ran the host's kernel"
for line in "args: 2|two words|x" "root: 9p ro" "/tmp: tmpfs" "/var/tmp: tmpfs" "/run: tmpfs" \
            "cwd: $SOURCE_ROOT" "marker: from the host" "blkvault ran" "to stderr"; do
    grep -qxF "$line" "$T/out" || die "guest output lacks '$line'"
done
! grep -q "root is writable" "$T/out" || die "the guest could write to the host's root"
grep -q "plain mode, command started at .* exit 3$" "$T/err" || die "no timing line from vmrun"

# a guest that does not end is killed at the hard timeout
expect_fail 124 "timed out after 5 s: the guest was killed" "$VMRUN" --timeout 5 -- sleep 600
