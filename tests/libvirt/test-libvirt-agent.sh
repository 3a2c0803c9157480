#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The guest-agent freeze of src/lib/virt/agent.c against real guests (tests/libvirt/agent-guest-lib.sh:
# Debian's kernel, qemu-ga, ext4 on vda) through agent-tool, whose stand-in for the backup job's
# start can be held at a gate:
#   - a freeze around the call, proven in the guest: qemu-ga's fsfreeze hook ran freeze then
#     thaw, guest-fsfreeze-status is "frozen" while the call is held and "thawed" after, and a
#     write in the guest started during the freeze returns only at the thaw; the hold is measured;
#   - the call failing: thawed all the same;
#   - the tool killed with -9 while the guest is frozen: the next run finds it frozen and thaws it;
#   - --no-freeze, a domain without an agent channel and one whose agent never answers: the call
#     runs unfrozen with libvirt's reason, the silent agent given up after the timeout.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
. "$SOURCE_ROOT/tests/libvirt/agent-guest-lib.sh"
[ -x "${AGENT_TOOL:-}" ] || die "AGENT_TOOL (tests/libvirt/agent-tool) is not built"

tool() { "$AGENT_TOOL" "$@"; }
field() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
hooks() { ag_count "fsfreeze-hook $1"; }
# tool_at_gate OUT: agent-tool --gate in the background (pid in $pid, killed at exit), output to
# OUT; returns once it is held at the gate, the guest frozen
tool_at_gate() {
    rm -f "$T/gate" "$T/gate.waiting"
    "$AGENT_TOOL" --gate="$T/gate" "$AG_DOM" >"$1" &
    pid=$!
    on_exit "kill -KILL $pid"
    for _ in $(seq 300); do [ -e "$T/gate.waiting" ] && break; sleep 0.1; done
    [ -e "$T/gate.waiting" ] || { cat "$1"; die "agent-tool never reached the gate"; }
}

ag_domain ga yes
ag_wait_ready 300
echo "boot to an answering agent: $AG_BOOT_SECS s (domain start to guest-ping)"
assert_eq "$(ag_freeze_status)" thawed "a fresh guest"

# 1. frozen around the call: the hook ran once each way, thawed after
tool "$AG_DOM" > "$T/1.out" || { cat "$T/1.out"; die "agent-tool failed"; }
cat "$T/1.out"
assert_eq "$(field agent "$T/1.out")" yes "the agent answers"
assert_eq "$(field frozen "$T/1.out")" 1 "filesystems frozen (/data)"
hold=$(awk '$1 == "frozen" { print $4 }' "$T/1.out")
ag_wait_line "fsfreeze-hook thaw" 30
ag_wait_count "write returned" 1   # the hook's writer, a second after the freeze
assert_eq "$(hooks freeze) $(hooks thaw)" "1 1" "fsfreeze hook calls (freeze thaw)"
assert_eq "$(ag_freeze_status)" thawed "after the call"
echo "freeze hold time: $hold ms (freeze asked to thaw returned; the freeze call $(awk '$1 == "frozen" { print $6 }' "$T/1.out") ms of it)"

# 2. held at the gate: frozen inside, a guest write waits for the thaw
tool_at_gate "$T/2.out"
assert_eq "$(ag_freeze_status)" frozen "while the call is held"
ag_wait_count "write starts" 2
sleep 2
[ "$(ag_count 'write returned')" = 1 ] || die "a write in the frozen guest returned: $(ag_lines 'write returned' | tail -n 1)"
touch "$T/gate"
wait $pid || { cat "$T/2.out"; die "agent-tool (held) failed"; }
ag_wait_count "write returned" 2
read -r start end < <(ag_lines 'write returned' | tail -n 1 | sed 's/^bvguest: \([0-9.]*\) .*started \([0-9.]*\))$/\2 \1/')
waited=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
echo "a write started in the frozen guest waited $waited s for the thaw"
awk -v w="$waited" 'BEGIN { exit !(w >= 1) }' || die "the guest's write waited only $waited s (held 2 s)"
held=$(awk '$1 == "frozen" { print $4 }' "$T/2.out")
awk -v h="$held" 'BEGIN { exit !(h >= 2000) }' || die "a hold of $held ms reported for a freeze held over 2 s"
assert_eq "$(ag_freeze_status)" thawed "after the held call"

# 3. the call fails: thawed all the same
tool --fail "$AG_DOM" > "$T/3.out" || { cat "$T/3.out"; die "agent-tool --fail: the thaw failed"; }
assert_eq "$(field call "$T/3.out")" EIO "the failed call's error"
assert_eq "$(field frozen "$T/3.out")" 1 "frozen before the failed call"
assert_eq "$(ag_freeze_status)" thawed "after a failed call"

# 4. killed with -9 while frozen: the guest stays frozen until the next run thaws it
tool_at_gate "$T/4.out"
kill -KILL $pid
wait $pid || true
assert_eq "$(tool --status "$AG_DOM")" frozen "left by the killed run"
thaws=$(hooks thaw)
tool "$AG_DOM" > "$T/5.out" || { cat "$T/5.out"; die "the run after the kill failed"; }
cat "$T/5.out"
assert_eq "$(field stale-thawed "$T/5.out")" 1 "filesystems found frozen and thawed"
assert_eq "$(field frozen "$T/5.out")" 1 "then frozen for its own call"
assert_eq "$(ag_freeze_status)" thawed "after the run that followed the kill"
[ "$(hooks thaw)" -ge $((thaws + 2)) ] || die "the guest saw no thaw of the stale freeze"

# 5. --no-freeze: the agent is not asked
freezes=$(hooks freeze)
tool --no-freeze "$AG_DOM" > "$T/6.out"
assert_eq "$(field agent "$T/6.out")" no "--no-freeze asks no agent"
grep -q '^note no freeze was asked for$' "$T/6.out" || die "no note for --no-freeze: $(cat "$T/6.out")"
sleep 1
assert_eq "$(hooks freeze)" "$freezes" "freezes in the guest with --no-freeze"

# the guests without an agent boot now, after the measured freezes
lv_virsh destroy "$AG_DOM" >/dev/null
ag_domain none no
ag_domain mute mute

# 6. no agent channel: unfrozen, libvirt's reason
tool "bvt-$$-none" > "$T/7.out" || { cat "$T/7.out"; die "agent-tool on a domain without an agent failed"; }
cat "$T/7.out"
assert_eq "$(field agent "$T/7.out")" no "a domain without an agent channel"
grep -qi '^note .*agent.*not configured' "$T/7.out" || die "no reason for the missing agent: $(cat "$T/7.out")"

# 7. an agent that never answers: given up after --timeout
ag_wait_ready 300
t0=$(date +%s)
tool --timeout=3 "$AG_DOM" > "$T/8.out" || { cat "$T/8.out"; die "agent-tool on a silent agent failed"; }
took=$(( $(date +%s) - t0 ))
cat "$T/8.out"
assert_eq "$(field agent "$T/8.out")" no "a silent agent"
grep -q '^note .' "$T/8.out" || die "no reason for the silent agent"
[ "$took" -le 20 ] || die "a silent agent held the call up $took s"
echo "a silent agent was given up after $took s"
