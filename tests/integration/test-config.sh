#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# `blkvault config check`: the appliance's configuration (a main file and conf.d/*.conf in name
# order, from --config or $BLKVAULT_CONFIG) is accepted when right, and every mistake is named
# as FILE:LINE: MESSAGE (all of them, in file and line order), exit 1.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd systemd-analyze

d=$T/etc
mkdir -p "$d/conf.d"
cat > "$d/blkvault.conf" <<'EOF'
# the appliance
[target usb-a]
uuid = 0B6C1B2A-1234-4321-ABCD-0123456789AB  ; the LUKS UUID
key-file = /etc/blkvault/keys/usb-a.key
repository = blkvault
mode = backup

[target usb-b]
uuid = 11111111-2222-3333-4444-555555555555
key-file = /etc/blkvault/keys/usb-b.key
mode = restore-only
power-off = yes
luks = no
fs-options = commit=60

[job vm1]
source = /dev/vg0/vm1
snapshot = yes
targets = any
schedule = daily
keep-daily = 7
keep-weekly = 4
keep-monthly = -1   ; as prune's --keep-monthly=-1: one of every month
max-age = 7d
EOF
cat > "$d/conf.d/20-more.conf" <<'EOF'
[job db]
    command = pg_dump --format=custom db   ; indented keys are keys
    targets = usb-a, usb-b
    schedule = Mon..Fri *-*-* 02:30:00
    keep-last = 3
    keep-within = 2w
    pre = systemctl stop db
    post = systemctl start db
    on-failure = mail -s failed root
    on-success = true
    max-age = 36h

[export vm1-latest]
repository = /srv/backup/repo
snapshot = vm1@latest
key-file = /etc/blkvault/keys/repo.key
cache = 512M
EOF
echo '[job ignored]' > "$d/conf.d/ignored.conf.disabled"
bv config check --config="$d/blkvault.conf" >"$T/out"
assert_eq "$(cat "$T/out")" "configuration ok: 2 targets, 2 jobs, 1 export (2 files read)"
BLKVAULT_CONFIG=$d/blkvault.conf bv config check >"$T/out"
assert_eq "$(cat "$T/out")" "configuration ok: 2 targets, 2 jobs, 1 export (2 files read)"

# a drop-in of mistakes: each one named, in order, then the count (a key that was refused counts
# as missing where the section needs it)
cat > "$d/conf.d/10-bad.conf" <<'EOF'
orphan = 1
[target usb-c]
uuid = nope
uuid = 0b6c1b2a-1234-4321-abcd-0123456789ab
mode = sometimes
colour = red
this line is wrong
power-off = maybe
repository = ../elsewhere
key-file = keys/c.key
[job vm2]
command = qemu-img dd
snapshot = yes
targets = usb-a, usb-x
schedule = every full moon
keep-daily = -3
max-age = 7x
pre =
[thing x]
a = b
[job vm1]
source = /x
[export e]
cache = 12Q
passphrase-file = /p
key-file = /k
[job bad name!]
source = /dev/sdz
[job]
source = /dev/sdz
[job both]
source = /dev/sdz
command = cat /dev/sdz
targets = any usb-a
[job none]
targets = usb-a
[target dup]
uuid = 0b6c1b2a-1234-4321-abcd-0123456789ab
key-file = /k
[global]
on-failure = mail -s blkvault root
colour = red
[global]
on-success = true
[job c2]
source = command:
[job c3]
source = command:cat /dev/sdz
snapshot = yes
[job k0]
source = /dev/sdz
keep-last = 0
keep-daily = 0
[export z]
repository = /r
cache = 0M
[export huge]
repository = /r
cache = 99999999999T
[job u1]
source = command:cat /dev/sdz
used-only = yes
EOF
f=$d/conf.d/10-bad.conf
cat > "$T/expected" <<EOF
$f:1: 'orphan' is outside of any section
$f:2: [target usb-c] has no uuid
$f:2: [target usb-c] has no key-file
$f:3: invalid uuid 'nope' (expected 8-4-4-4-12 hexadecimal digits)
$f:4: 'uuid' is set twice in [target usb-c] (first on line 3)
$f:5: invalid mode 'sometimes' (expected backup or restore-only)
$f:6: unknown key 'colour' in [target usb-c]
$f:7: expected '[section]', 'key = value' or a comment
$f:8: invalid value 'maybe' for power-off (expected yes or no)
$f:9: repository must be a relative path inside the drive's filesystem, without '..', not '../elsewhere'
$f:10: key-file must be an absolute path, not 'keys/c.key'
$f:11: [job vm2]: snapshot = yes needs a source that is an LVM logical volume, not a command
$f:14: [job vm2]: unknown target 'usb-x' (no [target usb-x])
$f:15: [job vm2]: invalid schedule 'every full moon' (Failed to parse calendar specification 'every full moon': Invalid argument)
$f:16: invalid value '-3' for keep-daily (expected a whole number from 0 to 1000000, or -1 for every one)
$f:17: invalid duration '7x' for max-age (expected a number and a unit: s, min, h, d or w, as in 7d)
$f:18: 'pre' has no value
$f:19: unknown section [thing x] (expected [global], [target NAME], [job NAME], [export NAME] or [remote NAME])
$f:21: [job vm1] is defined twice (first at $d/blkvault.conf:16)
$f:23: [export e] has no repository
$f:24: invalid size '12Q' for cache (expected digits and an optional K, M, G or T)
$f:27: invalid name 'bad name!' in [job bad name!] (letters, digits, '.', '_' and '-', at most 64, not starting with '.' or '-')
$f:29: [job] needs a name, as in [job NAME]
$f:31: [job both] has both source and command (set one)
$f:34: 'any' cannot be combined with target names
$f:35: [job none] has no source (set source = PATH or command = COMMAND)
$f:37: [target dup] has the same uuid as [target usb-a] ($d/blkvault.conf:2)
$f:42: unknown key 'colour' in [global]
$f:43: [global] is defined twice (first at $f:40)
$f:45: [job c2] has no source (set source = PATH or command = COMMAND)
$f:46: source = command: names no command
$f:47: [job c3]: snapshot = yes needs a source that is an LVM logical volume, not a command
$f:50: [job k0]: its keep-* rules keep nothing (all 0), so each run would forget every snapshot: keep at least one, or set no keep-* to prune nothing
$f:56: invalid size '0M' for cache (a size such as 256M: the cache cannot be turned off)
$f:59: invalid size '99999999999T' for cache (too large: nbdkit takes less than 8E)
$f:60: [job u1]: used-only = yes needs a source that is a device or an image file, not a command (a stream cannot skip what it does not read)
EOF
rc=0
bv config check --config="$d/blkvault.conf" >"$T/out" 2>"$T/err" || rc=$?
assert_eq "$rc" 1 "config check of a bad drop-in: exit status"
grep -v '^error: ' "$T/err" | diff -u "$T/expected" - || die "config check did not name each mistake as expected"
assert_eq "$(tail -n1 "$T/err")" "error: $(wc -l < "$T/expected") mistakes in the configuration"
[ ! -s "$T/out" ] || die "config check printed on stdout with mistakes: $(cat "$T/out")"

# what cannot be read: a --config that does not exist (the default may be missing), a FIFO (no
# hang), a directory, a line too long for the parser
expect_fail 1 "^$T/none.conf: cannot read: No such file or directory$" bv config check --config="$T/none.conf"
mkfifo "$T/fifo.conf"
expect_fail 1 "^$T/fifo.conf: not a regular file$" bv config check --config="$T/fifo.conf"
mkdir -p "$T/dir/conf.d/x.conf"
expect_fail 1 "^$T/dir/conf.d/x.conf: not a regular file$" bv config check --config="$T/dir/blkvault.conf"
{ echo '[job long]'; printf 'source = /%0300d\n' 0; echo 'source = /dev/sdb'; } > "$T/long.conf"
expect_fail 1 "^$T/long.conf:2: line is longer than 198 bytes$" bv config check --config="$T/long.conf"
assert_eq "$(grep -c ':' "$T/.err")" 2 "the long line was the only mistake"
printf '[job nul]\nsource = /dev/sdb\0x\n' > "$T/nul.conf"
expect_fail 1 "^$T/nul.conf:2: line holds a NUL byte$" bv config check --config="$T/nul.conf"
# an empty configuration is fine
: > "$T/empty.conf"
assert_eq "$(bv config check --config="$T/empty.conf")" "configuration ok: 0 targets, 0 jobs, 0 exports (1 file read)"
expect_fail 2 "^error: expected 'blkvault config check' (see 'blkvault help config')$" bv config
expect_fail 2 "^error: expected 'blkvault config check' (see 'blkvault help config')$" bv config show
printf '[job x]\nsource = /dev/sdb\ntargets = , ,\n' > "$T/t.conf"
expect_fail 1 "^$T/t.conf:3: targets names no target (a list of names, or any)$" bv config check --config="$T/t.conf"
# metrics: a path, or no (none, off) for no textfile; anything else says both
printf '[global]\nmetrics = none\n[job x]\nsource = /dev/sdb\n' > "$T/m.conf"
bv config check --config="$T/m.conf" >/dev/null || die "metrics = none was refused"
printf '[global]\nmetrics = blkvault.prom\n[job x]\nsource = /dev/sdb\n' > "$T/m.conf"
expect_fail 1 "^$T/m.conf:2: metrics must be an absolute path, or no to write no textfile, not 'blkvault.prom'$" \
    bv config check --config="$T/m.conf"

# a running libvirt domain as a job's source, with its connection's URI; "libvirt:" alone names none
printf '[job web]\nsource = libvirt:web01\nlibvirt-uri = qemu:///system\n' > "$T/v.conf"
bv config check --config="$T/v.conf" >/dev/null || die "source = libvirt:web01 was refused"
printf '[job web]\nsource = libvirt:web01\nfreeze = no\n' > "$T/v.conf"
bv config check --config="$T/v.conf" >/dev/null || die "freeze = no was refused"
printf '[job web]\nsource = libvirt:web01\nfreeze = maybe\n' > "$T/v.conf"
expect_fail 1 "^$T/v.conf:3: invalid value 'maybe' for freeze (expected yes or no)$" bv config check --config="$T/v.conf"
printf '[job web]\nsource = libvirt:\n' > "$T/v.conf"
expect_fail 1 "^$T/v.conf:2: source = libvirt: names no domain$" bv config check --config="$T/v.conf"
# disk = picks the domain's disks; it and libvirt-uri need a libvirt source, which reads no path
printf '[job web]\nsource = libvirt:web01\ndisk = vda, sdb\n' > "$T/v.conf"
bv config check --config="$T/v.conf" >/dev/null || die "disk = vda, sdb was refused"
printf '[job web]\nsource = libvirt:web01\ndisk = ,\n' > "$T/v.conf"
expect_fail 1 "^$T/v.conf:3: disk names no disk (a list of targets such as vda)$" bv config check --config="$T/v.conf"
printf '[job web]\nsource = /dev/vg0/web\ndisk = vda\n' > "$T/v.conf"
expect_fail 1 "^$T/v.conf:1: \\[job web\\]: disk needs source = libvirt:DOMAIN$" bv config check --config="$T/v.conf"
printf '[job web]\nsource = /dev/vg0/web\nlibvirt-uri = qemu:///system\n' > "$T/v.conf"
expect_fail 1 "^$T/v.conf:1: \\[job web\\]: libvirt-uri needs source = libvirt:DOMAIN$" bv config check --config="$T/v.conf"
printf '[job web]\nsource = libvirt:web01\nused-only = yes\n' > "$T/v.conf"
expect_fail 1 "^$T/v.conf:1: \\[job web\\]: source = libvirt: takes none of snapshot, used-only" bv config check --config="$T/v.conf"
