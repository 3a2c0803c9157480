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
#     runs unfrozen with libvirt's reason, the silent agent given up after the timeout;
#   - blkvault backup libvirt:DOMAIN the same (virDomainBackupBegin held or failed by virtgate.so):
#     frozen and thawed around the job's start, the hold in --json and the log; thawed when the
#     job does not begin; killed with -9 while frozen, the next backup thaws the guest and says
#     so; --no-freeze; a domain without an agent gives a crash-consistent backup with a note;
#     libvirtd restarted while blkvault holds the guest frozen: thawed all the same;
#     held at the job's start the guest is frozen (its write waits), held in the read after it
#     the guest is thawed (the freeze wraps the job's start only).
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

# blkvault backup of the domain: the same freeze around virDomainBackupBegin
need_cmd python3
[ -f "${VIRTGATE:-}" ] || die "VIRTGATE (tests/fault/virtgate.so) is not built"
repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
gated() { # ENV...: blkvault backup under virtgate.so, its stderr in $T/gated.err
    env LD_PRELOAD="$VIRTGATE" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$@" \
        "$BLKVAULT" backup "$repo" "libvirt:$AG_DOM" >/dev/null 2>"$T/gated.err"
}
freezes=$(hooks freeze) thaws=$(hooks thaw)
bv backup "$repo" "libvirt:$AG_DOM" --json >"$T/b1.json"
assert_eq "$(jget "$T/b1.json" 'd["consistency"], d["filesystems_frozen"]')" "('frozen', 1)" "backup 1: frozen"
echo "blkvault backup: the guest's freeze held $(jget "$T/b1.json" 'd["freeze_hold_ms"]') ms"
ag_wait_count "fsfreeze-hook thaw" $((thaws + 1)) 30
assert_eq "$(hooks freeze)" $((freezes + 1)) "freezes seen by the guest after backup 1"
assert_eq "$(ag_freeze_status)" thawed "after backup 1"
bv backup "$repo" "libvirt:$AG_DOM" 2>"$T/b2.err" >/dev/null || { cat "$T/b2.err"; die "backup 2 failed"; }
grep -q "froze 1 filesystem of '$AG_DOM' through its guest agent for the job's start: held [0-9]* ms" "$T/b2.err" ||
    die "backup 2 logged no freeze: $(cat "$T/b2.err")"
hold2=$(sed -n "s/.*froze 1 filesystem of '$AG_DOM' .*: held \([0-9]*\) ms.*/\1/p" "$T/b2.err")
echo "blkvault backup 2: the guest's freeze held $hold2 ms (logged)"
# frozen only around the job's start: held at virDomainBackupBegin (virtgate.so) the guest is
# frozen and its write waits; once the job has begun, held in the backup's first pack write
# (stall.so, after the 4 KiB of its lock files: the job's export is being read) the guest is thawed and the write has returned
[ -f "${STALL:-}" ] || die "STALL (tests/fault/stall.so) is not built"
bv init "$T/repo-h" --encryption=none --compression=none >/dev/null
rm -f "$T/vgate" "$T/vgate.waiting" "$T/sgate" "$T/sgate.waiting"
ag_wait_count "write returned" "$(hooks freeze)" 30 # the earlier freezes' writers are done
freezes=$(hooks freeze) thaws=$(hooks thaw) writes=$(ag_count 'write returned')
(exec env LD_PRELOAD="$VIRTGATE:$STALL" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
    BV_VIRT_GATE="$T/vgate" BV_STALL_WRITE=1 BV_STALL_AFTER=4096 BV_STALL_GATE="$T/sgate" \
    "$BLKVAULT" backup "$T/repo-h" "libvirt:$AG_DOM" --json >"$T/h.json" 2>"$T/h.err") &
hpid=$!
on_exit "kill -KILL $hpid"
for _ in $(seq 300); do [ -e "$T/vgate.waiting" ] || [ -e "$T/sgate.waiting" ] && break; sleep 0.1; done
[ ! -e "$T/sgate.waiting" ] || die "blkvault wrote packs before the job's start"
[ -e "$T/vgate.waiting" ] || { cat "$T/h.err"; die "blkvault was not held at virDomainBackupBegin"; }
assert_eq "$(ag_freeze_status)" frozen "while blkvault is held at the job's start"
ag_wait_count "write starts" $((writes + 1))
sleep 2
assert_eq "$(ag_count 'write returned')" "$writes" "guest writes returned while held at the job's start"
touch "$T/vgate"
for _ in $(seq 600); do [ -e "$T/sgate.waiting" ] && break; kill -0 $hpid 2>/dev/null || break; sleep 0.1; done
[ -e "$T/sgate.waiting" ] || { cat "$T/h.err"; die "blkvault was not held in its first pack write"; }
lv_virsh domjobinfo "$AG_DOM" >"$T/h.job" 2>&1; grep -q "Job type: *Unbounded" "$T/h.job" || die "no backup job while blkvault reads: $(cat "$T/h.job")"
assert_eq "$(ag_freeze_status)" thawed "while blkvault reads the job's export"
ag_wait_count "write returned" $((writes + 1)) 30
assert_eq "$(hooks freeze) $(hooks thaw)" "$((freezes + 1)) $((thaws + 1))" "fsfreeze hook calls (freeze thaw) by the read"
read -r start end < <(ag_lines 'write returned' | tail -n 1 | sed 's/^bvguest: \([0-9.]*\) .*started \([0-9.]*\))$/\2 \1/')
waited=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
awk -v w="$waited" 'BEGIN { exit !(w >= 1) }' || die "the guest's write waited only $waited s (held 2 s at the job's start)"
echo "blkvault held at the job's start: a guest write waited $waited s for the thaw"
touch "$T/sgate"
wait $hpid || { cat "$T/h.err"; die "the held backup failed"; }
held=$(jget "$T/h.json" 'd["freeze_hold_ms"]')
awk -v h="$held" 'BEGIN { exit !(h >= 2000) }' || die "freeze_hold_ms $held for a job start held over 2 s"
# the job's start fails: thawed all the same
thaws=$(hooks thaw)
gated BV_VIRT_BEGIN_FAIL=1 && die "a backup whose job did not begin succeeded"
grep -q "backup of domain '$AG_DOM' failed" "$T/gated.err" || die "no failure named: $(cat "$T/gated.err")"
ag_wait_count "fsfreeze-hook thaw" $((thaws + 1)) 30
assert_eq "$(ag_freeze_status)" thawed "after a backup whose job did not begin"
# killed with -9 while frozen (held before virDomainBackupBegin): the next backup thaws the guest
rm -f "$T/vgate" "$T/vgate.waiting"
(exec env LD_PRELOAD="$VIRTGATE" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" BV_VIRT_GATE="$T/vgate" \
    "$BLKVAULT" backup "$repo" "libvirt:$AG_DOM" >/dev/null 2>"$T/gated.err") &
bpid=$! # blkvault itself: the kill must hit it
on_exit "kill -KILL $bpid"
for _ in $(seq 300); do [ -e "$T/vgate.waiting" ] && break; sleep 0.1; done
[ -e "$T/vgate.waiting" ] || { cat "$T/gated.err"; die "blkvault never reached virDomainBackupBegin"; }
assert_eq "$(ag_freeze_status)" frozen "while blkvault is held before the job's start"
kill -KILL $bpid
wait $bpid || true
assert_eq "$(ag_freeze_status)" frozen "after blkvault was killed"
bv backup "$repo" "libvirt:$AG_DOM" 2>"$T/b3.err" >/dev/null || { cat "$T/b3.err"; die "the backup after the kill failed"; }
cat "$T/b3.err"
grep -q "the filesystems of '$AG_DOM' were frozen when this backup began .*thawed them (1)" "$T/b3.err" ||
    die "the backup after the kill did not say it thawed the guest"
assert_eq "$(ag_freeze_status)" thawed "after the backup that followed the kill"
# libvirtd restarted while blkvault holds the guest frozen at the job's start: the begin fails on
# the closed connection, the thaw connects again; the guest is thawed and no job is left
rm -f "$T/vgate" "$T/vgate.waiting"
(exec env LD_PRELOAD="$VIRTGATE" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" BV_VIRT_GATE="$T/vgate" \
    "$BLKVAULT" backup "$repo" "libvirt:$AG_DOM" >/dev/null 2>"$T/r.err") &
bpid=$!
on_exit "kill -KILL $bpid"
for _ in $(seq 300); do [ -e "$T/vgate.waiting" ] && break; sleep 0.1; done
[ -e "$T/vgate.waiting" ] || { cat "$T/r.err"; die "blkvault never reached virDomainBackupBegin"; }
assert_eq "$(ag_freeze_status)" frozen "while blkvault is held before the job's start"
lv_restart_libvirtd
touch "$T/vgate"
rc=0; wait $bpid || rc=$?
cat "$T/r.err"
[ $rc = 1 ] || die "the backup whose libvirtd restarted at the job's start exited $rc"
grep -q "backup of domain '$AG_DOM' failed: .* (the connection to libvirtd was lost during it: libvirtd restarted?)" "$T/r.err" ||
    die "no clear error for libvirtd's restart"
assert_eq "$(ag_freeze_status)" thawed "after libvirtd restarted while blkvault held the guest frozen"
job=$(lv_job_type "$AG_DOM")
[ "$job" = None ] || die "a job was left on $AG_DOM (job type '$job')"
# --no-freeze
freezes=$(hooks freeze)
bv backup "$repo" "libvirt:$AG_DOM" --no-freeze 2>"$T/b4.err" >/dev/null || { cat "$T/b4.err"; die "--no-freeze failed"; }
grep -q "note: no freeze (--no-freeze): the backup of '$AG_DOM' is crash-consistent" "$T/b4.err" ||
    die "no note for --no-freeze: $(cat "$T/b4.err")"
bv backup "$repo" "libvirt:$AG_DOM" --no-freeze --json >"$T/b4.json" || die "--no-freeze --json failed"
assert_eq "$(jget "$T/b4.json" 'd["consistency"], d["crash_consistent_because"], "freeze_hold_ms" in d')" \
    "('crash', 'no freeze was asked for', False)" "--no-freeze in --json"
sleep 1
assert_eq "$(hooks freeze)" "$freezes" "freezes in the guest with blkvault's --no-freeze"

# the guests without an agent boot now, after the measured freezes
lv_virsh destroy "$AG_DOM" >/dev/null
ag_domain none no
ag_domain mute mute

# 6. no agent channel: unfrozen, libvirt's reason
tool "bvt-$$-none" > "$T/7.out" || { cat "$T/7.out"; die "agent-tool on a domain without an agent failed"; }
cat "$T/7.out"
assert_eq "$(field agent "$T/7.out")" no "a domain without an agent channel"
grep -qi '^note .*agent.*not configured' "$T/7.out" || die "no reason for the missing agent: $(cat "$T/7.out")"
bv backup "$repo" "libvirt:bvt-$$-none" 2>"$T/b5.err" >/dev/null || { cat "$T/b5.err"; die "backup without an agent failed"; }
grep -q "note: no guest agent answers (.*not configured): the backup of 'bvt-$$-none' is crash-consistent" "$T/b5.err" ||
    die "no crash-consistency note: $(cat "$T/b5.err")"
bv backup "$repo" "libvirt:bvt-$$-none" --json >"$T/b5.json" || die "backup --json without an agent failed"
assert_eq "$(jget "$T/b5.json" 'd["consistency"], "freeze_hold_ms" in d')" "('crash', False)" "no agent in --json"
grep -qi 'agent.*not configured' <<<"$(jget "$T/b5.json" 'd["crash_consistent_because"]')" ||
    die "no reason for the missing agent in --json: $(cat "$T/b5.json")"

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
