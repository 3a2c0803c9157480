# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers for the vm tier; source after tests/lib.sh. A scenario is a guest script run by one
# meson line (`vmrun [OPTIONS] -- bash tests/vm/test-vm-X.sh`), or, when the host must act while
# the guest runs (QMP hotplug), one script in two roles: on the host it starts the guest with
# itself as the command and drives it; in the guest ($VM_GUEST) it does the guest's part.
#
# Host side:
#   vm_need                         skip (77, with vmrun's reason) unless a guest can boot here
#   vm_start [VMRUN-OPTIONS] -- CMD vmrun in the background: results dir $VM_DIR, QMP on $VM_QMP
#   vm_wait_for NAME [SECONDS]      waits for the guest's marker $VM_DIR/NAME (fails when the
#                                   guest ended first, printing its output)
#   vm_tell NAME                    a marker for the guest (vm_await NAME there)
#   vm_qmp ARGS...                  tests/vm/vmqmp on $VM_QMP (usb-plug ID FILE, usb-unplug ID)
#   vm_finish                       waits for vmrun, prints its output, returns the command's code
# Guest side:
#   vm_in_guest                     true inside a vmrun guest
#   vm_guest_only                   fails unless inside a guest (a guest script run by hand)
#   vm_mark NAME                    a marker for the host (vm_wait_for NAME there)
#   vm_await NAME [SECONDS]         waits for the host's marker NAME
#   vm_log MESSAGE                  MESSAGE with the guest's uptime (where the time goes)
#   vm_lvm_config PV                LVM on PV only, without udev, with its own config (the host's
#                                   /etc is read-only): exports LVM_SYSTEM_DIR
#   vm_wrap TOOL SHELL              $T/bin/TOOL (before $T/bin goes first in PATH): runs SHELL, then
#                                   execs the real TOOL with the same arguments
#   vm_lvcreate_cancel              $T/bin/lvcreate (before $T/bin goes first in PATH): the real lvcreate,
#                                   then, with CANCEL_AFTER_SNAPSHOT set, SIGTERM to its parent
#   vm_lvm_job DRIVE                DRIVE formatted as target usb-1 (--no-luks, key in $T/keys) and
#                                   $conf with [job data] of /dev/vg0/data, snapshot = yes; $opts
# Markers are files in the shared results directory; the guest sees it at the host's path.
VMRUN=$SOURCE_ROOT/tests/vm/vmrun
VMQMP=$SOURCE_ROOT/tests/vm/vmqmp

vm_in_guest() { [ -n "${VM_GUEST:-}" ]; }
vm_guest_only() { vm_in_guest || die "$0 runs inside a guest: vmrun -- bash $0"; }

vm_need() {
    local rc=0
    "$VMRUN" --check 2>"$T/vm-check.err" || rc=$?
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 77 ] && skip "$(sed 's/^SKIP: //' "$T/vm-check.err")"
    cat "$T/vm-check.err" >&2
    die "vmrun --check failed ($rc)"
}

vm_start() {
    VM_DIR=$T/vm
    VM_QMP=$T/qmp.sock
    mkdir -p "$VM_DIR"
    "$VMRUN" --results "$VM_DIR" --qmp "$VM_QMP" "$@" >"$T/vm.out" 2>"$T/vm.err" &
    VM_PID=$!
    on_exit "kill $VM_PID; wait $VM_PID"
}

_vm_ended() {
    wait "$VM_PID" || true
    cat "$T/vm.out"
    cat "$T/vm.err" >&2
    die "the guest ended before '$1'"
}

vm_wait_for() {
    local name=$1 secs=${2:-600} i
    for i in $(seq $((secs * 5))); do
        [ -e "$VM_DIR/$name" ] && return 0
        kill -0 "$VM_PID" 2>/dev/null || _vm_ended "$name"
        sleep 0.2
    done
    die "no '$name' from the guest within $secs s"
}

vm_tell() { touch "$VM_DIR/$1"; }
vm_qmp() { "$VMQMP" "$VM_QMP" "$@"; }

vm_finish() {
    local rc=0
    wait "$VM_PID" || rc=$?
    cat "$T/vm.out"
    cat "$T/vm.err" >&2
    return $rc
}

vm_mark() { touch "$VM_RESULTS/$1"; }
vm_log() { local up _; read -r up _ </proc/uptime; echo "[$up] $*"; }

vm_await() {
    local name=$1 secs=${2:-600} i
    for i in $(seq $((secs * 5))); do
        [ -e "$VM_RESULTS/$name" ] && return 0
        sleep 0.2
    done
    die "no '$name' from the host within $secs s"
}

# For a test's drop-in of a hardened unit: PrivateTmp= gives the unit its own /tmp and /var/tmp,
# which hides a build tree below them (a clone in /tmp, as CI may make) and the binary under
# test with it; the drop-in then turns it off. The installed units keep PrivateTmp=yes.
vm_unit_sees_build_tree() {
    case "$BUILD_ROOT:$SOURCE_ROOT" in
    /tmp/* | /var/tmp/* | *:/tmp/* | *:/var/tmp/*) printf 'PrivateTmp=no\nReadWritePaths=/tmp /var/tmp\n' ;;
    esac
}

vm_lvm_config() {
    export LVM_SYSTEM_DIR=$T/lvm
    mkdir -p "$LVM_SYSTEM_DIR"
    cat > "$LVM_SYSTEM_DIR/lvm.conf" <<EOF
devices { filter = [ "a|^$1\$|", "r|.*|" ] obtain_device_list_from_udev = 0 use_devicesfile = 0 }
activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }
backup { backup = 0 archive = 0 }
EOF
}

vm_lvm_job() {
    conf=$T/etc/blkvault.conf
    opts=(--config="$conf" --run-dir="$T/run")
    bv target format "$1" --name=usb-1 --no-luks --key-dir="$T/keys" "${opts[@]}" >/dev/null
    cat > "$conf" <<EOF
[job data]
source = /dev/vg0/data
snapshot = yes
targets = usb-1
EOF
}

vm_wrap() {
    local real
    real=$(command -v "$1") || die "no $1"
    mkdir -p "$T/bin"
    printf '#!/bin/sh\n%s\nexec %s "$@"\n' "$2" "$real" >"$T/bin/$1"
    chmod +x "$T/bin/$1"
}

vm_lvcreate_cancel() {
    mkdir -p "$T/bin"
    cat > "$T/bin/lvcreate" <<EOF
#!/bin/sh
rc=0; $(command -v lvcreate) "\$@" || rc=\$?
[ -z "\$CANCEL_AFTER_SNAPSHOT" ] || kill -TERM \$PPID
exit \$rc
EOF
    chmod +x "$T/bin/lvcreate"
}
