# SPDX-License-Identifier: LGPL-2.1-or-later
# A libvirt test domain with a real guest and qemu-guest-agent. Source it after tests/lib.sh and
# tests/libvirt/libvirt-lib.sh (which serialises libvirt tests, runs libvirtd and removes the
# domain and $LV_IMAGES at exit).
#
# The guest is the vm harness's Debian kernel (tests/vm/vmrun decompresses it), booted directly
# under TCG with an initramfs (tests/libvirt/agent-guest builds it): busybox, the host's qemu-ga
# on the virtio-serial port org.qemu.guest_agent.0, and an ext4 filesystem on vda mounted on
# /data, which the agent's guest-fsfreeze-freeze freezes. Its init (agent-init) and fsfreeze hook
# (agent-fsfreeze-hook) log each step to the serial console, a file: "bvguest: UPTIME WHAT".
#
#   ag_domain NAME [yes|mute|no] [SIZE]  defines and starts bvt-$$-NAME: 160 MiB, 1 vCPU, vda a
#                                  qcow2 of SIZE (default 64M) holding ext4; the agent answers
#                                  (yes, the default), the port is held open by a reader that
#                                  never answers (mute) or no agent channel at all (no). Makes it
#                                  the current one (ag_use) and returns at once: the guest boots.
#   ag_use NAME                    makes bvt-$$-NAME current: AG_DOM, AG_CONSOLE (its console file),
#                                  AG_AGENT; the functions below work on the current domain
#   ag_wait_ready [SECONDS]        waits (default 180 s) until the guest's init says "ready" and,
#                                  with an agent, guest-ping answers; sets AG_BOOT_SECS to the
#                                  seconds from the start to that point
#   ag_wait_line PATTERN [SECONDS] waits for a console line matching PATTERN (grep)
#   ag_count PATTERN               how many console lines match PATTERN
#   ag_wait_count PATTERN N [SECONDS]  waits until N console lines match PATTERN
#   ag_agent JSON                  virsh qemu-agent-command on AG_DOM (prints the answer)
#   ag_freeze_status               "frozen" or "thawed" (guest-fsfreeze-status)
#   ag_lines PATTERN               the console's "bvguest:" lines matching PATTERN
AG_GUEST=$SOURCE_ROOT/tests/libvirt/agent-guest

ag_domain() {
    local name=bvt-$$-$1 agent=${2:-yes} size=${3:-64M} files kernel initrd dir=$LV_IMAGES
    local rc=0
    files=$(python3 "$AG_GUEST" 2>"$T/agent-guest.err") || rc=$?
    [ $rc = 77 ] && skip "$(sed 's/^SKIP: //' "$T/agent-guest.err")"
    [ $rc = 0 ] || { cat "$T/agent-guest.err" >&2; die "cannot build the guest-agent guest's boot files"; }
    mkdir -p "$dir"
    # copies the domain owns: libvirt hands the kernel and initrd to the libvirt-qemu user
    kernel=$dir/$name-vmlinux initrd=$dir/$name-initrd
    cp "$(sed -n 1p <<<"$files")" "$kernel"
    cp "$(sed -n 2p <<<"$files")" "$initrd"
    truncate -s "$size" "$T/$name-data.raw"
    mkfs.ext4 -q -F -L bvdata "$T/$name-data.raw" || die "mkfs.ext4 of the guest's data disk failed"
    qemu-img convert -q -f raw -O qcow2 "$T/$name-data.raw" "$dir/$name-vda.qcow2" ||
        die "cannot make $dir/$name-vda.qcow2"
    rm -f "$T/$name-data.raw"
    local console=$dir/$name-console.log channel="<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
    [ "$agent" = no ] && channel=""
    cat >"$T/$name.xml" <<XML
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>160</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$kernel</kernel>
    <initrd>$initrd</initrd>
    <cmdline>console=ttyS0 panic=-1 quiet mitigations=off no_timer_check bvguest.agent=$agent</cmdline>
  </os>
  <cpu mode='maximum'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$dir/$name-vda.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    $channel
    <serial type='file'><source path='$console'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XML
    lv_virsh define "$T/$name.xml" >/dev/null || die "cannot define domain $name"
    _lv_domains+=("$name")
    _ag_agent[$1]=$agent
    _ag_started[$1]=$(date +%s.%N)
    lv_virsh start "$name" >/dev/null || die "cannot start domain $name"
    ag_use "$1"
}

declare -A _ag_agent=() _ag_started=()
ag_use() {
    AG_DOM=bvt-$$-$1
    AG_CONSOLE=$LV_IMAGES/$AG_DOM-console.log
    AG_AGENT=${_ag_agent[$1]}
    AG_STARTED=${_ag_started[$1]}
}

ag_lines() { tr -d '\r' <"$AG_CONSOLE" 2>/dev/null | grep -a "^bvguest: .*$1" || true; }

ag_wait_line() {
    local i
    for i in $(seq $((${2:-180} * 5))); do
        [ -n "$(ag_lines "$1")" ] && return 0
        lv_virsh domstate "$AG_DOM" 2>/dev/null | grep -q running ||
            { cat "$AG_CONSOLE" >&2; die "domain $AG_DOM stopped before '$1' on its console"; }
        sleep 0.2
    done
    tail -n 30 "$AG_CONSOLE" >&2 || true
    die "no '$1' on $AG_DOM's console within ${2:-180} s"
}

ag_count() { ag_lines "$1" | wc -l; }

ag_wait_count() {
    local i
    for i in $(seq $((${3:-60} * 5))); do
        [ "$(ag_count "$1")" -ge "$2" ] && return 0
        sleep 0.2
    done
    tail -n 30 "$AG_CONSOLE" >&2 || true
    die "fewer than $2 lines '$1' on $AG_DOM's console within ${3:-60} s"
}

ag_agent() { lv_virsh qemu-agent-command "$AG_DOM" --timeout 10 "$1"; }

ag_wait_ready() {
    local secs=${1:-180} i
    ag_wait_line ' ready$' "$secs"
    if [ "$AG_AGENT" = yes ]; then
        for i in $(seq $((secs * 2))); do
            ag_agent '{"execute":"guest-ping"}' >/dev/null 2>&1 && break
            [ "$i" -lt $((secs * 2)) ] || die "$AG_DOM's agent does not answer guest-ping within $secs s"
            sleep 0.5
        done
    fi
    AG_BOOT_SECS=$(awk -v a="$AG_STARTED" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

ag_freeze_status() {
    local out
    out=$(ag_agent '{"execute":"guest-fsfreeze-status"}') || die "guest-fsfreeze-status failed on $AG_DOM"
    case $out in
    *'"frozen"'*) echo frozen ;;
    *'"thawed"'*) echo thawed ;;
    *) die "guest-fsfreeze-status on $AG_DOM: unexpected answer $out" ;;
    esac
}
