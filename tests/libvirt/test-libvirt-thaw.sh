#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The edges of the guest-agent freeze of blkvault backup libvirt:DOMAIN (issue 24):
#   - a thaw that fails (virtgate.so's BV_VIRT_THAW_FAIL: libvirt refuses all three tries) leaves
#     the snapshot published but exits 1, saying the guest is still frozen and how to thaw it
#     (virsh domfsthaw), in --json too (thaw_failed);
#   - the next backup with --no-freeze finds the guest it left frozen (the mark file
#     blkvault-UUID.frozen in the run directory) and thaws it, saying so; a guest frozen by
#     someone else (virsh domfsfreeze, no mark of ours) is left as it is with --no-freeze;
#   - a paused domain: no agent is asked (none can answer) and the note says the domain is
#     paused and what that means for the backup, not libvirt's "domain is not running".
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/libvirt/libvirt-lib.sh"
. "$SOURCE_ROOT/tests/libvirt/agent-guest-lib.sh"
need_cmd python3
[ -f "${VIRTGATE:-}" ] || die "VIRTGATE (tests/fault/virtgate.so) is not built"

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null

# a paused domain (no guest at all: the note is blkvault's, no agent is waited for)
lv_domain paused 16M
lv_virsh suspend "$LV_DOM" >/dev/null || die "cannot suspend $LV_DOM"
bv backup "$repo" "libvirt:$LV_DOM" 2>"$T/p.err" >/dev/null || { cat "$T/p.err"; die "backup of a paused domain failed"; }
cat "$T/p.err"
grep -q "note: domain '$LV_DOM' is paused: no guest agent can freeze its filesystems, so the backup is crash-consistent, the disks as they were when it was paused" "$T/p.err" ||
    die "no note that the domain is paused"
grep -q "not running" "$T/p.err" && die "the paused domain's note still says 'not running'"
bv backup "$repo" "libvirt:$LV_DOM" --json >"$T/p.json" 2>/dev/null || die "backup --json of a paused domain failed"
assert_eq "$(jget "$T/p.json" 'd["consistency"], d["paused"], d["crash_consistent_because"]')" \
    "('crash', True, 'the domain is paused')" "a paused domain in --json"
assert_eq "$(lv_virsh domstate "$LV_DOM")" paused "the domain after its backups"
lv_virsh destroy "$LV_DOM" >/dev/null

ag_domain ga yes
ag_wait_ready 300
uuid=$(lv_virsh domuuid "$AG_DOM")
mark=/var/lib/libvirt/qemu/blkvault-$uuid.frozen
assert_eq "$(ag_freeze_status)" thawed "a fresh guest"

# the thaw fails: published, exit 1, the guest said to be frozen and how to thaw it
rc=0
env LD_PRELOAD="$VIRTGATE" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" BV_VIRT_THAW_FAIL=1 \
    "$BLKVAULT" backup "$repo" "libvirt:$AG_DOM" >/dev/null 2>"$T/t.err" || rc=$?
cat "$T/t.err"
assert_eq "$rc" 1 "the exit status of a backup whose thaw failed"
grep -q "error: the filesystems of '$AG_DOM' are still frozen: the thaw after the backup job's start failed (.*unsupported flags.*); its programs cannot write to them until they are thawed: run 'virsh domfsthaw $AG_DOM'" "$T/t.err" ||
    die "no error saying the guest is frozen and how to thaw it"
grep -q "^snapshot [0-9a-f]\{8\} ($AG_DOM-vda)" "$T/t.err" || die "the snapshot was not published (or not said)"
bv list "$repo" --json >"$T/list.json"
assert_eq "$(jget "$T/list.json" "len([s for s in (d if isinstance(d, list) else d['snapshots']) if s['name'] == '$AG_DOM-vda'])")" 1 \
    "snapshots of $AG_DOM-vda after the failed thaw"
assert_eq "$(ag_freeze_status)" frozen "the guest after the failed thaw"
[ -e "$mark" ] || die "no mark $mark of the freeze left"

# the next backup, with --no-freeze, thaws it and says so
bv backup "$repo" "libvirt:$AG_DOM" --no-freeze 2>"$T/n.err" >/dev/null || { cat "$T/n.err"; die "--no-freeze after the failed thaw failed"; }
cat "$T/n.err"
grep -q "the filesystems of '$AG_DOM' were frozen when this backup began .*thawed them (1)" "$T/n.err" ||
    die "--no-freeze did not say it thawed the guest left frozen"
grep -q "note: no freeze (--no-freeze): the backup of '$AG_DOM' is crash-consistent" "$T/n.err" ||
    die "no --no-freeze note"
assert_eq "$(ag_freeze_status)" thawed "the guest after the --no-freeze backup"
[ ! -e "$mark" ] || die "the mark $mark stayed after the thaw"

# --json: thaw_failed and exit 1; a job (target run) fails with it
rc=0
env LD_PRELOAD="$VIRTGATE" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" BV_VIRT_THAW_FAIL=1 \
    "$BLKVAULT" backup "$repo" "libvirt:$AG_DOM" --json >"$T/t.json" 2>"$T/t.err" || rc=$?
assert_eq "$rc" 1 "the exit status of a --json backup whose thaw failed"
grep -q "unsupported flags" <<<"$(jget "$T/t.json" 'd["thaw_failed"]')" || die "no thaw_failed in --json: $(cat "$T/t.json")"
assert_eq "$(ag_freeze_status)" frozen "the guest after the failed thaw (--json)"
# a freeze of its own (no --no-freeze) thaws the stale one first, and thaws its own
bv backup "$repo" "libvirt:$AG_DOM" 2>"$T/f.err" >/dev/null || { cat "$T/f.err"; die "the backup after the failed thaw failed"; }
grep -q "thawed them (1)" "$T/f.err" || die "the freezing backup did not say it thawed the stale freeze"
assert_eq "$(ag_freeze_status)" thawed "after a freezing backup"
[ ! -e "$mark" ] || die "the mark $mark stayed after a freezing backup"

# frozen by someone else (no mark of ours): --no-freeze leaves it frozen
lv_virsh domfsfreeze "$AG_DOM" >/dev/null || die "virsh domfsfreeze failed"
bv backup "$repo" "libvirt:$AG_DOM" --no-freeze 2>"$T/o.err" >/dev/null || { cat "$T/o.err"; die "--no-freeze on a guest frozen by hand failed"; }
grep -q "thawed them" "$T/o.err" && die "--no-freeze thawed a freeze that was not blkvault's"
assert_eq "$(ag_freeze_status)" frozen "a guest frozen by hand after a --no-freeze backup"
lv_virsh domfsthaw "$AG_DOM" >/dev/null || die "virsh domfsthaw failed"
echo PASS
