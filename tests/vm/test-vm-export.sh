#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Guest script (meson: vmrun --systemd -- bash test-vm-export.sh): an [export NAME] section of the
# configuration serves over NBD as systemd runs it (issue 21, finding 6). blkvault-nbd@.socket
# was conditioned on /etc/blkvault/exports/NAME.conf, a file nothing creates, so following the
# man page nothing listened. Now blkvault-generator (the build's binary, installed as a generator
# with the test's configuration) makes sockets.target want the socket of every declared export:
# after daemon-reload and a start of sockets.target the socket listens, the first client starts
# blkvault-nbd@NAME.service (the built unit: DynamicUser, sandboxed) and nbdinfo and nbdcopy read
# the snapshot; an export that is not declared gets no socket.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
. "$SOURCE_ROOT/tests/vm/vm-lib.sh"
vm_guest_only
need_cmd nbdcopy
assert_eq "$(cat /proc/1/comm)" systemd "PID 1"

# the service has a private /tmp and sees the file system read-only: its files live in /run
d=/run/bvtest-export
mkdir -p "$d"
chmod 0755 "$d"
# DynamicUser= gives the service a private /tmp and /var/tmp whatever PrivateTmp= says: a build
# below them (a clone in /tmp) is out of its sight, so it runs copies of the binary and the plugin
case "$BLKVAULT" in /tmp/* | /var/tmp/*) cp "$BLKVAULT" "$d/blkvault" && BLKVAULT=$d/blkvault ;; esac
case "$NBD_PLUGIN" in /tmp/* | /var/tmp/*) cp "$NBD_PLUGIN" "$d/plugin.so" && NBD_PLUGIN=$d/plugin.so ;; esac
randfile "$d/disk.img" 4 vm-export
# a repository the service's dynamic user can read (an encrypted one needs a secret file that
# the static group blkvault may read, which the guest's read-only /etc cannot give)
bv init "$d/repo" --encryption=none >/dev/null
bv backup "$d/repo" "$d/disk.img" --name=disk >/dev/null
chmod -R a+rX "$d/repo"
printf '[job unrelated]\nsource = /dev/null\n' >"$d/blkvault.conf"

# the generator: the build's binary under the generator's name, with the test's configuration
mkdir -p /run/systemd/system-generators /run/systemd/system/blkvault-nbd@.service.d
ln -s "$BLKVAULT" "$d/blkvault-generator"
cat >/run/systemd/system-generators/blkvault-generator <<EOF
#!/bin/sh
export BLKVAULT_CONFIG=$d/blkvault.conf ASAN_OPTIONS=${ASAN_OPTIONS:-} UBSAN_OPTIONS=${UBSAN_OPTIONS:-}
exec $d/blkvault-generator "\$@"
EOF
chmod 0755 /run/systemd/system-generators/blkvault-generator
# the units as built, the service with the build's binary and plugin
cp "$BUILD_ROOT/systemd/blkvault-nbd@.socket" /run/systemd/system/
sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$BUILD_ROOT/systemd/blkvault-nbd@.service" \
    >/run/systemd/system/blkvault-nbd@.service
cat >/run/systemd/system/blkvault-nbd@.service.d/vmtest.conf <<EOF
[Unit]
ConditionPathExists=
[Service]
Environment=BLKVAULT_CONFIG=$d/blkvault.conf BLKVAULT_NBD_PLUGIN=$NBD_PLUGIN UBSAN_OPTIONS=${UBSAN_OPTIONS:-}
Environment=ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "LD_PRELOAD=$NBD_PRELOAD"
$(vm_unit_sees_build_tree)
EOF
sock=/run/blkvault/nbd/disk.sock
systemctl daemon-reload
systemctl start sockets.target
[ "$(systemctl show -P ActiveState blkvault-nbd@disk.socket)" = inactive ] || die "a socket for an export nobody declared"
[ ! -e "$sock" ] || die "$sock exists before the export is declared"
vm_log "export: units in place"

# the export declared: after daemon-reload (the generator) the socket is wanted and listens
printf '[export disk]\nrepository = %s/repo\nsnapshot = disk\n' "$d" >>"$d/blkvault.conf"
bv config check >/dev/null || die "the test's configuration: $(bv config check 2>&1)"
systemctl daemon-reload
assert_eq "$(systemctl show -P WantedBy blkvault-nbd@disk.socket)" sockets.target "what wants the export's socket"
systemctl start sockets.target
assert_eq "$(systemctl show -P ActiveState blkvault-nbd@disk.socket)" active "state of blkvault-nbd@disk.socket"
[ -S "$sock" ] || die "no socket at $sock"
vm_log "export: socket listens"
size=$(nbdinfo --size "nbd+unix:///?socket=$sock") || { journalctl -u blkvault-nbd@disk.service --no-pager; die "nbdinfo of the export failed"; }
assert_eq "$size" $((4 << 20)) "size of the export"
nbdcopy "nbd+unix:///?socket=$sock" "$T/copy.img" ||
    { journalctl -u blkvault-nbd@disk.service --no-pager; die "nbdcopy of the export failed"; }
assert_same "$d/disk.img" "$T/copy.img"
assert_eq "$(systemctl show -P ActiveState blkvault-nbd@disk.service)" active "state of the export's service"
vm_log "export: read back"
systemctl stop blkvault-nbd@disk.socket blkvault-nbd@disk.service
echo ok
