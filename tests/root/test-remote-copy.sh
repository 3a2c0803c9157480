#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The appliance's off-site copy (issue 23; blkvault.conf(5) [remote NAME], copy-to): a drive
# formatted by `target format` (a loop device), a job with copy-to = offsite (versitygw on
# 127.0.0.1, with a root-only credentials file and no AWS key in the environment), a target with
# copy-to = vault (a directory):
#  1. `job run` backs up, says "safe to unplug" and asks systemd for blkvault-copy@NAME.service
#     (no systemd here: it says its timer copies later);
#  2. the copy unit's own command line (ExecStart of blkvault-copy@.service, %i = offsite) copies
#     the job's snapshots, not the other job's, to s3://BUCKET/PREFIX/usb-1, which restores
#     bit-exact; the drive is unmounted again; the vault gets every snapshot of the drive, then
#     its own keep-last prunes it there;
#  3. `status` shows each remote's last good copy and its age (text and JSON); an incremental
#     copy sends only the new snapshot;
#  4. a run of the drive stops a copy that holds it (SIGTERM) instead of waiting on the network,
#     and the next copy completes; object-lock = 1d locks what the copy writes (COMPLIANCE), and a
#     bucket without Object Lock is refused before anything is written;
#  5. a copy that fails (the server stopped) says which object and why, is recorded, and status
#     shows it; the age alarm fires for a remote whose last good copy is older than its max-age
#     (exit 11, the warning), and is silent again after a good copy;
#  6. no drive attached: nothing done, exit 0.
# Also: a copy killed with SIGKILL leaves its mount and LUKS mapping, which the next copy clears;
# keep-last at an s3:// remote prunes and collects it there after the copy.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
. "$SOURCE_ROOT/tests/s3/s3-lib.sh"
need_cmd losetup mkfs.ext4 python3
[ -e /dev/loop-control ] || skip "no loop devices"
s3_start
s3_mb bvremote
export BLKVAULT_CACHE_DIR=$T/cache

conf=$T/etc/blkvault.conf
mkdir -p "$T/etc" "$T/mnt" "$T/vault"
chmod 0755 "$T" "$T/etc"
opts=(--config="$conf" --run-dir="$T/run" --state-dir="$T/state")
sopts=(--config="$conf" --state-dir="$T/state")
randfile "$T/vm.img" 8 remote-vm
randfile "$T/db.img" 2 remote-db
loop_target dev usb-1 300M "${opts[@]}"
echo "copy-to = vault" >>"$T/etc/conf.d/50-target-usb-1.conf"
creds=$T/etc/offsite.credentials
printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$S3_KEY" "$S3_SECRET" >"$creds"
chmod 0600 "$creds"
cat >"$conf" <<CONF
[job vm]
source = $T/vm.img
copy-to = offsite
[job db]
source = $T/db.img

[remote offsite]
location = s3://bvremote/site
credentials = $creds
endpoint = $AWS_ENDPOINT_URL
region = us-east-1
limit-upload = 200M

[remote vault]
location = $T/vault
max-age = 2d
keep-last = 1
CONF
bv config check --config="$conf" >/dev/null || die "config check"
# the unit's environment has no AWS key: the credentials file must be what opens the bucket
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL

# the copy unit's command line, from the unit file itself (%i: the remote)
unit=$BUILD_ROOT/systemd/blkvault-copy@.service
[ -f "$unit" ] || die "blkvault-copy@.service not built"
copy_unit() { # REMOTE [ARGS...]: ExecStart of the unit, the build's binary, the test's directories
    local line
    line=$(sed -n 's/^ExecStart=//p' "$unit")
    line=${line//%i/$1}
    read -r -a cmd <<<"$line"
    cmd[0]=$BLKVAULT
    "${cmd[@]}" "${opts[@]}" "${@:2}"
}
grep -qx 'ExecStart=.*/blkvault remote copy %i' "$unit" || die "the unit does not run 'blkvault remote copy %i'"

# 1. the drive's run: backup, safe to unplug, then the copy asked for (not waited for)
bv job run vm "${opts[@]}" >"$T/run.out" 2>"$T/run.err" || { cat "$T/run.out" "$T/run.err"; die "job run vm"; }
grep -qx "target usb-1: 1 jobs, 0 failed, 8.0 MiB new; safe to unplug" "$T/run.out" || { cat "$T/run.out"; die "run summary"; }
grep -q "^warning: target usb-1: cannot start blkvault-copy@offsite.service (systemctl: exit status [0-9]*.*): blkvault-copy@offsite.timer copies later$" "$T/run.err" ||
    { cat "$T/run.err"; die "the run did not ask for blkvault-copy@offsite.service"; }
grep -q "blkvault-copy@vault.service" "$T/run.err" || { cat "$T/run.err"; die "the run did not ask for the vault's copy (copy-to on the target)"; }
bv job run db "${opts[@]}" >/dev/null 2>&1 || die "job run db"
bv job run db "${opts[@]}" 2>"$T/run.err" >/dev/null
! grep -q "blkvault-copy@offsite" "$T/run.err" || die "job db (no copy-to) asked for the offsite copy"
grep -q "blkvault-copy@vault" "$T/run.err" || die "job db on a target with copy-to = vault did not ask for the vault"

# 2. the copy, as the unit runs it
copy_unit offsite >"$T/copy.out" 2>"$T/copy.err" || { cat "$T/copy.out" "$T/copy.err"; die "the offsite copy failed"; }
grep -q "^copy of target usb-1 to offsite (s3://bvremote/site/usb-1): 1 snapshots copied, 0 there already, [0-9.]* MiB sent (the remote's repository created)$" "$T/copy.out" ||
    { cat "$T/copy.out" "$T/copy.err"; die "copy line"; }
assert_eq "$(tail -n1 "$T/copy.out")" "remote offsite: 1 targets, 0 failed"
! grep -q " $dev " /proc/self/mountinfo || die "the drive is still mounted after the copy"
[ ! -e "$T/run/target-usb-1" ] || die "the copy left its mountpoint"
s3list() { # the snapshot names at s3://bvremote/site/usb-1
    AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT \
        "$BLKVAULT" list s3://bvremote/site/usb-1 --key-file="$T/keys/usb-1.key" --json |
        python3 -c 'import json,sys; print(" ".join(sorted(s["name"] for s in json.load(sys.stdin))))'
}
assert_eq "$(s3list)" "vm" "the offsite copy holds the job's snapshots, not the other job's"
AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT \
    bv restore s3://bvremote/site/usb-1 vm "$T/vm.out" --key-file="$T/keys/usb-1.key" -q || die "restore from the remote"
assert_same "$T/vm.img" "$T/vm.out"
copy_unit vault >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "the vault copy failed"; }
grep -q "^copy of target usb-1 to vault ($T/vault/usb-1): 3 snapshots copied, 0 there already, [0-9.]* MiB sent (the remote's repository created); retention there kept 2 snapshots, forgot 1, gc deleted [0-9]* packs, .*$" "$T/copy.out" ||
    { cat "$T/copy.out"; die "vault copy"; }
assert_eq "$(bv list "$T/vault/usb-1" --key-file="$T/keys/usb-1.key" --json |
             python3 -c 'import json,sys; print(" ".join(sorted(s["name"] for s in json.load(sys.stdin))))')" "db vm" \
    "the vault (copy-to on the target: every snapshot of the drive) after its keep-last = 1, by name"
bv verify "$T/vault/usb-1" --key-file="$T/keys/usb-1.key" --read-data >/dev/null 2>&1 || die "verify of the vault after its retention"

# 3. status: each remote's last good copy and its age
bv status "${sopts[@]}" >"$T/status" || die "status"
grep -Eq "^remote offsite \(s3://bvremote/site\): last copy [0-9T:-]+Z of usb-1: ok; last good copy [0-9T:-]+Z of usb-1 \([0-9]+s old\); max-age 1w: ok$" "$T/status" ||
    { cat "$T/status"; die "status of remote offsite"; }
grep -Eq "^remote vault \($T/vault\): .* max-age 2d: ok$" "$T/status" || { cat "$T/status"; die "status of remote vault"; }
bv status --json "${sopts[@]}" >"$T/status.json" || die "status --json"
python3 - "$T/status.json" <<'PY' || die "status --json of the remotes"
import json, sys
r = {x["name"]: x for x in json.load(open(sys.argv[1]))["remotes"]}
o = r["offsite"]
assert o["location"] == "s3://bvremote/site" and o["result"] == "ok" and o["last_good_target"] == "usb-1", o
assert o["alarm"] is False and o["age_seconds"] < 600 and o["max_age_seconds"] == 7 * 86400, o
assert r["vault"]["max_age_seconds"] == 2 * 86400 and r["vault"]["alarm"] is False, r["vault"]
PY
# incremental: a new backup, only it travels
dd if=/dev/urandom of="$T/vm.img" bs=1M seek=3 count=1 conv=notrunc status=none
bv job run vm "${opts[@]}" >/dev/null 2>&1 || die "second job run"
copy_unit offsite >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "incremental copy"; }
grep -q "^copy of target usb-1 to offsite (s3://bvremote/site/usb-1): 1 snapshots copied, 1 there already, [0-9.]* \(KiB\|MiB\) sent$" "$T/copy.out" ||
    { cat "$T/copy.out"; die "incremental copy line"; }

# 4. a run does not wait on the network: it stops a copy that holds the drive
dd if=/dev/urandom of="$T/vm.img" bs=1M count=8 conv=notrunc status=none
bv job run vm "${opts[@]}" >/dev/null 2>&1 || die "third job run"
sed -i 's/^limit-upload = .*/limit-upload = 256K/' "$conf"
copy_unit offsite >"$T/slow.out" 2>"$T/slow.err" &
slow=$!
for _ in $(seq 1 100); do
    grep -q '^copy=offsite$' "$T/run/targets.holder" 2>/dev/null && break
    sleep 0.1
done
grep -q '^copy=offsite$' "$T/run/targets.holder" || { cat "$T/slow.err"; die "the copy did not take the drive"; }
sleep 1
start=$(date +%s)
bv job run vm "${opts[@]}" >"$T/run.out" 2>"$T/run.err" || { cat "$T/run.out" "$T/run.err"; die "job run beside a copy"; }
took=$(( $(date +%s) - start ))
rc=0; wait "$slow" || rc=$?
grep -q "^target usb-1: stopping the copy of target usb-1 to offsite (pid [0-9]*): a backup does not wait on the network; the copy continues after this run$" "$T/run.err" ||
    { cat "$T/run.err"; die "the run did not say it stopped the copy"; }
[ "$rc" != 0 ] || die "the stopped copy exited 0"
grep -q "^error: copy of target usb-1 to offsite (s3://bvremote/site/usb-1) failed: stopped (a run of the drive, or the service stopping)" "$T/slow.err" ||
    { cat "$T/slow.err"; die "the stopped copy's message"; }
[ "$took" -lt 60 ] || die "the run waited ${took}s for the copy"
sed -i 's/^limit-upload = .*/limit-upload = 200M/' "$conf"
copy_unit offsite >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "the copy after the stopped one"; }
grep -q "^copy of target usb-1 to offsite .*: 2 snapshots copied, 2 there already" "$T/copy.out" || { cat "$T/copy.out"; die "copy after stop"; }
assert_eq "$(s3list)" "vm vm vm vm" "the remote after the stopped copy and the next one"
# a copy killed with SIGKILL (systemd's stop past its timeout) leaves its mount (when it ran in
# this mount namespace) and its LUKS mapping: the next copy clears them (the mount stayed before,
# under the next copy's own: checked failing)
on_exit "umount -l $T/run/target-usb-1 2>/dev/null; cryptsetup close blkvault-usb-1 2>/dev/null"
dd if=/dev/urandom of="$T/vm.img" bs=1M count=8 conv=notrunc status=none
bv job run vm "${opts[@]}" >/dev/null 2>&1 || die "job run before the killed copy"
sed -i 's/^limit-upload = .*/limit-upload = 256K/' "$conf"
copy_unit offsite >/dev/null 2>"$T/killed.err" &
for _ in $(seq 1 100); do
    grep -q " $T/run/target-usb-1 " /proc/self/mountinfo && break
    sleep 0.1
done
grep -q " $T/run/target-usb-1 " /proc/self/mountinfo || { cat "$T/killed.err"; die "the copy did not mount the drive"; }
kill -9 "$(sed -n 's/^pid=//p' "$T/run/targets.holder")"
wait $! 2>/dev/null || true
# the mapping where this machine has device-mapper (else the drive is not LUKS here); the mount
# always (no private mount namespace here, unlike the unit's)
luks=false
cryptsetup status blkvault-usb-1 >/dev/null 2>&1 && luks=true
grep -q " $T/run/target-usb-1 " /proc/self/mountinfo || die "the killed copy left no mount: the test cannot tell"
sed -i 's/^limit-upload = .*/limit-upload = 200M/' "$conf"
copy_unit offsite >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "the copy after one killed with SIGKILL"; }
grep -q "^copy of target usb-1 to offsite .*: 1 snapshots copied" "$T/copy.out" || { cat "$T/copy.out"; die "copy after the killed one"; }
! $luks || ! cryptsetup status blkvault-usb-1 >/dev/null 2>&1 || die "the mapping is left after the copy"
! grep -q " $T/run/target-usb-1 " /proc/self/mountinfo || die "the drive is left mounted after the copy"

# object-lock: every object the copy writes is retained (COMPLIANCE); a bucket without Object
# Lock is refused before anything is written
s3_mb bvlocked lock
cp "$conf" "$T/conf.before-lock"
printf '[remote locked]\nlocation = s3://bvlocked/site\ncredentials = %s\nendpoint = http://127.0.0.1:%s\nobject-lock = 1d\n' \
    "$creds" "$S3_PORT" >>"$conf"
printf '[remote unlockable]\nlocation = s3://bvremote/nolock\ncredentials = %s\nendpoint = http://127.0.0.1:%s\nobject-lock = 1d\n' \
    "$creds" "$S3_PORT" >>"$conf"
sed -i 's/^copy-to = offsite$/copy-to = offsite, locked, unlockable/' "$conf"
copy_unit locked >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "the copy to a bucket with Object Lock"; }
grep -q "^copy of target usb-1 to locked (s3://bvlocked/site/usb-1): [0-9]* snapshots copied" "$T/copy.out" || { cat "$T/copy.out"; die "locked copy line"; }
s3tool() { AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT "$S3_TOOL" "$@"; }
pack=$(s3tool s3://bvlocked/site/usb-1 list | awk '$1 ~ /^packs\// { print $1; exit }')
[ -n "$pack" ] || die "no pack at the locked remote"
s3tool s3://bvlocked/site/usb-1 head "$pack" | grep_q ' lock=compliance ' || die "$pack at the locked remote is not locked"
rc=0; copy_unit unlockable >"$T/copy.out" 2>"$T/copy.err" || rc=$?
assert_eq "$rc" 1 "exit status of object-lock into a bucket without it"
grep -q "^error: copy of target usb-1 to unlockable (s3://bvremote/nolock/usb-1) failed: object-lock is set, but the bucket has no Object Lock enabled (it is enabled when a bucket is made); nothing was written" "$T/copy.err" ||
    { cat "$T/copy.err"; die "the refusal of object-lock into a plain bucket"; }
[ -z "$(s3tool s3://bvremote/nolock list)" ] || die "a refused copy wrote into the bucket"
cp "$T/conf.before-lock" "$conf"

# 5. a failed copy is recorded and shown; the age alarm covers remotes
dd if=/dev/urandom of="$T/vm.img" bs=1M count=1 conv=notrunc status=none
bv job run vm "${opts[@]}" >/dev/null 2>&1 || die "fourth job run"
s3_stop
rc=0; AWS_MAX_ATTEMPTS=1 copy_unit offsite >"$T/copy.out" 2>"$T/copy.err" || rc=$?
[ "$rc" != 0 ] || die "a copy to a stopped server succeeded"
grep -q "^error: copy of target usb-1 to offsite (s3://bvremote/site/usb-1) failed: .*" "$T/copy.err" || { cat "$T/copy.err"; die "failed copy line"; }
! grep -q " $dev " /proc/self/mountinfo || die "the drive is still mounted after a failed copy"
bv status "${sopts[@]}" >"$T/status" || die "status"
grep -Eq "^remote offsite \(s3://bvremote/site\): last copy .* of usb-1: open remote failed: .*; last good copy .* of usb-1 \(.* old\); max-age 1w: ok$" "$T/status" ||
    { cat "$T/status"; die "status after a failed copy"; }
# a last good copy older than the max-age: the alarm
sed -i "s/^last-good=.*/last-good=$(( $(date +%s) - 8 * 86400 ))/" "$T/state/copy-offsite@usb-1"
rc=0; bv status --check-age "${sopts[@]}" >"$T/age.out" 2>"$T/age.err" || rc=$?
assert_eq "$rc" 11 "status --check-age with a stale remote"
grep -q "^warning: remote offsite: no good copy off-site within its max-age of 1w (last good: .* of usb-1)$" "$T/age.err" ||
    { cat "$T/age.err"; die "the alarm's warning"; }
grep -qx "age check: 2 remotes, 1 without a good copy within their max-age" "$T/age.out" || { cat "$T/age.out"; die "age check line"; }
bv status "${sopts[@]}" | grep_q "^remote offsite .*max-age 1w: ALARM$" || die "status shows no ALARM for the stale remote"
s3_start   # on another port: the remote's endpoint follows it
sed -i "s|^endpoint = .*|endpoint = $AWS_ENDPOINT_URL|" "$conf"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL
copy_unit offsite >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "the copy once the server is back"; }
rc=0; bv status --check-age "${sopts[@]}" >"$T/age.out" 2>&1 || rc=$?
grep -qx "age check: 2 remotes, 0 without a good copy within their max-age" "$T/age.out" || { cat "$T/age.out"; die "alarm after a good copy"; }

# a remote whose LOCATION/TARGET holds a repository of another drive: refused, said how to go on
printf '[remote stranger]\nlocation = %s\n' "$T/stranger" >>"$conf"
sed -i 's/^copy-to = vault$/copy-to = vault, stranger/' "$T/etc/conf.d/50-target-usb-1.conf"
mkdir -p "$T/stranger"
BLKVAULT_PASSPHRASE=other bv init "$T/stranger/usb-1" -q
rc=0; copy_unit stranger >"$T/copy.out" 2>"$T/copy.err" || rc=$?
assert_eq "$rc" 1 "exit status of a copy into an unrelated repository"
grep -qx "error: copy of target usb-1 to stranger ($T/stranger/usb-1) failed: the remote holds a repository not related to the drive's (another repository id): give the drive's copy another location" "$T/copy.err" ||
    { cat "$T/copy.err"; die "the refusal of an unrelated repository"; }
! grep -q " $dev " /proc/self/mountinfo || die "the drive is still mounted after a refused copy"

# keep-* at an s3:// remote: after the copy, the remote's repository is pruned and collected on S3
printf '[remote pruned]\nlocation = s3://bvremote/pruned\ncredentials = %s\nendpoint = %s\nkeep-last = 1\n' \
    "$creds" "$(sed -n 's/^endpoint = //p' "$conf" | head -n 1)" >>"$conf"
sed -i 's/^copy-to = offsite$/copy-to = offsite, pruned/' "$conf"
bv config check --config="$conf" >/dev/null || die "config check of keep-last at an s3:// remote: $(bv config check --config="$conf" 2>&1)"
copy_unit pruned >"$T/copy.out" 2>&1 || { cat "$T/copy.out"; die "the copy to a remote with keep-last"; }
grep -q "^copy of target usb-1 to pruned (s3://bvremote/pruned/usb-1): [0-9]* snapshots copied, 0 there already, [0-9.]* MiB sent (the remote's repository created); retention there kept 1 snapshots, forgot [1-9][0-9]*, gc deleted [0-9]* packs" "$T/copy.out" ||
    { cat "$T/copy.out"; die "the copy line of a remote with keep-last"; }
pruned=$(AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_ENDPOINT_URL=$(sed -n 's/^endpoint = //p' "$conf" | head -n 1) \
    "$BLKVAULT" list s3://bvremote/pruned/usb-1 --key-file="$T/keys/usb-1.key" --json |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
assert_eq "$pruned" 1 "snapshots at the s3:// remote with keep-last = 1"
rm -f "$T/vm.out"
AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_ENDPOINT_URL=$(sed -n 's/^endpoint = //p' "$conf" | head -n 1) \
    bv restore s3://bvremote/pruned/usb-1 vm "$T/vm.out" --key-file="$T/keys/usb-1.key" -q || die "restore from the pruned remote"
assert_same "$T/vm.img" "$T/vm.out"

# 6. the drive not attached: nothing to read, nothing done
detach_loop "$dev" || die "cannot detach the drive"
assert_eq "$(copy_unit offsite | tail -n2)" "target usb-1: not attached; its copy to offsite waits for it
remote offsite: none of its targets is attached; nothing done"
