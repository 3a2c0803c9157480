# SPDX-License-Identifier: LGPL-2.1-or-later
# The machine's libvirtd and QEMU for a test, with throwaway domains. Source it after tests/lib.sh.
# Sourcing it:
#   - skips (77) only when libvirt is truly absent (no virsh, libvirtd, virtlogd, qemu-system-x86_64
#     or qemu-img);
#   - takes /run/lock/blkvault-libvirt-test.lock for the whole test (one libvirtd serves the
#     machine: libvirt tests of every engineer and CI run one at a time);
#   - starts virtlogd and libvirtd (-d) when they are not running, and stops at exit only what it
#     started;
#   - exports LIBVIRT_DEFAULT_URI=qemu:///system.
#
#   lv_domain NAME [DISK-SIZE...]  defines and starts domain bvt-$$-NAME (TCG, 64 MiB, no OS) with
#                                  one qcow2 virtio disk per size (vda, vdb, ...; default one of
#                                  64M) in $LV_IMAGES (below /var/lib/libvirt/images, which the
#                                  libvirt-qemu user reaches); sets LV_DOM to its name. At exit the
#                                  domain is destroyed and undefined (its checkpoints' metadata
#                                  too) and the images are removed. --no-start: defined only.
#   lv_domain_xml [--no-start] NAME DISK-XML  the same with the <disk> elements given (images the
#                                  caller made, below $LV_IMAGES)
#   lv_image DOM TARGET            the image file of TARGET
#   lv_qdev DOM TARGET             the qdev path of TARGET's device ("info block", "Attached to:"),
#                                  for qemu-io -d (the -d ALIAS form silently writes nothing)
#   lv_write DOM TARGET CMD...     runs qemu-io commands ("write -P 0x5a 3M 64k") on the running
#                                  disk through the monitor, then flushes (so qemu-img sees them)
#   lv_copy DOM TARGET OUT         a bit-exact raw copy of TARGET as it is now (qemu-img convert -U)
#   lv_virsh ARGS...               virsh on LIBVIRT_DEFAULT_URI
#   lv_job_type DOM                the type of DOM's job now (None, Unbounded, ...), from
#                                  `virsh domjobinfo` read whole before it is matched: never
#                                  `lv_virsh ... | grep -q` (under pipefail, grep quits at the first
#                                  line that matches, and virsh, which writes line by line, dies of
#                                  SIGPIPE at its next line when load delays it: the pipeline fails
#                                  though the line was there); "(domjobinfo failed)" when virsh does
#   lv_restart_libvirtd            stops the running libvirtd (TERM) and starts it again with the
#                                  command line it ran with (-d added): running domains survive it;
#                                  a libvirtd this test started is still stopped at exit (the pid
#                                  file names the new one), one it found is left running

for _c in virsh libvirtd virtlogd qemu-system-x86_64 qemu-img flock; do
    command -v "$_c" >/dev/null 2>&1 ||
        skip "libvirt is absent: no $_c (scripts/install-deps.sh installs libvirt-daemon-system, libvirt-clients, libvirt-daemon-driver-qemu, qemu-system-x86)"
done
[ "$(id -u)" = 0 ] || skip "needs root (libvirtd's system instance, images below /var/lib/libvirt)"

export LIBVIRT_DEFAULT_URI=qemu:///system
# No leak check at exit in these tests: since libvirt is loaded by dlopen (util/dlib.h), GCC 12's
# LeakSanitizer crashes walking the dynamic TLS of libvirt's threads ("Tracer caught signal 11",
# "LeakSanitizer has encountered a fatal error"; 4 of 15 libvirt tests in one CI run). ASan's
# other checks stay on here, and every other suite keeps the leak check.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
LV_LOCK=/run/lock/blkvault-libvirt-test.lock
exec {_lv_lock_fd}>"$LV_LOCK"
flock "$_lv_lock_fd" || die "cannot lock $LV_LOCK"

lv_virsh() { virsh -q -c "$LIBVIRT_DEFAULT_URI" "$@"; }

# _lv_alive PIDFILE COMM: whether the pid file names a live COMM.
_lv_alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

# _lv_stop PIDFILE COMM: stops what we started (TERM, then KILL after 10 s).
_lv_stop() {
    local pid i
    pid=$(cat "$1" 2>/dev/null) || return 0
    _lv_alive "$1" "$2" || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

_lv_start_daemons() {
    local i
    # the daemons must not inherit the lock's descriptor: one that did would hold the lock for as
    # long as it runs, and every later test would wait for it
    if ! _lv_alive /run/virtlogd.pid virtlogd; then
        virtlogd -d {_lv_lock_fd}>&- || die "cannot start virtlogd"
        on_exit "_lv_stop /run/virtlogd.pid virtlogd"
    fi
    if ! _lv_alive /run/libvirtd.pid libvirtd; then
        libvirtd -d {_lv_lock_fd}>&- || die "cannot start libvirtd"
        on_exit "_lv_stop /run/libvirtd.pid libvirtd"
    fi
    for i in $(seq 1 100); do
        lv_virsh version >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    lv_virsh version || die "libvirtd does not answer on $LIBVIRT_DEFAULT_URI"
}
_lv_start_daemons

lv_restart_libvirtd() {
    local pid i args=()
    _lv_alive /run/libvirtd.pid libvirtd || die "no libvirtd runs (/run/libvirtd.pid) to restart"
    pid=$(cat /run/libvirtd.pid)
    mapfile -d '' args </proc/"$pid"/cmdline
    [[ " ${args[*]} " == *" -d "* || " ${args[*]} " == *" --daemon "* ]] || args+=(-d)
    kill -TERM "$pid"
    for i in $(seq 1 300); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = libvirtd ] || break
        sleep 0.1
    done
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != libvirtd ] || die "libvirtd ($pid) did not stop within 30 s"
    "${args[@]}" {_lv_lock_fd}>&- || die "cannot start libvirtd again (${args[*]})"
    for i in $(seq 1 300); do
        lv_virsh version >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "libvirtd does not answer on $LIBVIRT_DEFAULT_URI after its restart"
}

LV_IMAGES=/var/lib/libvirt/images/bvt-$$
_lv_domains=()
_lv_cleanup() {
    local d c
    for d in "${_lv_domains[@]}"; do
        lv_virsh destroy "$d" >/dev/null 2>&1 || true
        for c in $(lv_virsh checkpoint-list "$d" --name 2>/dev/null); do
            lv_virsh checkpoint-delete "$d" "$c" --metadata >/dev/null 2>&1 || true
        done
        lv_virsh undefine "$d" --checkpoints-metadata >/dev/null 2>&1 ||
            lv_virsh undefine "$d" >/dev/null 2>&1 || true
    done
    rm -rf "$LV_IMAGES"
}
on_exit _lv_cleanup

lv_domain() {
    local start=1
    [ "${1:-}" = --no-start ] && { start=0; shift; }
    local name=bvt-$$-$1; shift
    local sizes=("$@") disks="" i=0 letters=abcdefgh img
    [ ${#sizes[@]} -gt 0 ] || sizes=(64M)
    mkdir -p "$LV_IMAGES"
    for s in "${sizes[@]}"; do
        img=$LV_IMAGES/$name-vd${letters:$i:1}.qcow2
        qemu-img create -q -f qcow2 "$img" "$s" || die "cannot create $img"
        disks+="<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='$img'/><target dev='vd${letters:$i:1}' bus='virtio'/></disk>"
        i=$((i + 1))
    done
    local opt=()
    [ $start = 1 ] || opt=(--no-start)
    lv_domain_xml "${opt[@]}" "${name#bvt-$$-}" "$disks"
}

lv_domain_xml() {
    local start=1
    [ "${1:-}" = --no-start ] && { start=0; shift; }
    local name=bvt-$$-$1 disks=$2
    mkdir -p "$LV_IMAGES"
    cat >"$T/$name.xml" <<XML
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    $disks
  </devices>
</domain>
XML
    lv_virsh define "$T/$name.xml" >/dev/null || die "cannot define domain $name"
    _lv_domains+=("$name")
    [ $start = 0 ] || lv_virsh start "$name" >/dev/null || die "cannot start domain $name"
    LV_DOM=$name
}

# jget FILE EXPR: EXPR (Python, d the JSON document) of a --json output file
jget() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
lv_job_type() {
    local i
    i=$(lv_virsh domjobinfo "$1") || { echo "(domjobinfo failed)"; return 0; }
    sed -n 's/^Job type: *\([^ ]*\).*/\1/p' <<<"$i"
}
# lv_job_active DOM: whether a backup job runs on DOM
lv_job_active() { local i; i=$(lv_virsh domjobinfo "$1" 2>/dev/null) || return 1; [[ $i == *Operation:*Backup* ]]; }
# lv_nothing_left DOM WHEN: dies unless blkvault left no backup job, scratch directory or socket
lv_nothing_left() {
    local uuid
    uuid=$(lv_virsh domuuid "$1")
    lv_job_active "$1" && die "a backup job still runs on $1 ($2)"
    [ ! -e "/var/lib/libvirt/qemu/blkvault-$uuid.d" ] || die "the scratch directory was left ($2)"
    [ ! -e "/var/lib/libvirt/qemu/blkvault-$uuid.sock" ] || die "the socket was left ($2)"
}
# lv_ours DOM: blkvault's checkpoints of DOM, sorted, on one line
lv_ours() { lv_virsh checkpoint-list "$1" --name | grep '^blkvault-' | sort | xargs; }

lv_image() {
    lv_virsh domblklist "$1" | awk -v t="$2" '$1 == t { print $2 }'
}

lv_qdev() {
    local img
    img=$(lv_image "$1" "$2")
    [ -n "$img" ] || die "domain $1 has no disk $2"
    lv_virsh qemu-monitor-command "$1" --hmp 'info block' | tr -d '\r' |
        awk -v img="$img" 'index($0, img) { found = 1; next }
                           found && /Attached to:/ { print $3; exit }
                           /^[^ ]/ { found = 0 }'
}

lv_write() {
    local dom=$1 target=$2 qdev out; shift 2
    qdev=$(lv_qdev "$dom" "$target")
    [ -n "$qdev" ] || die "no qdev path for $dom's $target in 'info block'"
    for c in "$@" flush; do
        out=$(lv_virsh qemu-monitor-command "$dom" --hmp "qemu-io -d $qdev \"$c\"") ||
            die "qemu-io '$c' on $dom $target ($qdev) failed: $out"
        case $out in *rror*) die "qemu-io '$c' on $dom $target ($qdev): $out" ;; esac
    done
}

lv_copy() {
    local img
    img=$(lv_image "$1" "$2")
    [ -n "$img" ] || die "domain $1 has no disk $2"
    local fmt
    fmt=$(qemu-img info -U --output=json "$img" | python3 -c 'import json, sys; print(json.load(sys.stdin)["format"])')
    qemu-img convert -U -f "$fmt" -O raw "$img" "$3" || die "cannot copy $img"
}
