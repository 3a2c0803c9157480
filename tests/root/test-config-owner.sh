#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Who may change the configuration (issue 21, finding 5): the appliance runs a job's command, pre
# and post as root, so a conf.d file that anyone can write, or one owned by someone else, was
# someone else's root shell; `config check` passed both. As with sshd and sudo, every file and
# directory of the configuration must be owned by root and writable by it only, and a secret
# file it names readable by root only: otherwise `config check` and every run (job run, target
# run, serve --export) refuse, naming the file and its mode or owner, and nothing runs.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd setpriv

need_cmd losetup mkfs.ext4
[ -e /dev/loop-control ] || skip "no loop devices"

etc=$T/etc
conf=$etc/blkvault.conf
mkdir -p "$etc/conf.d"
opts=(--config="$conf" --run-dir="$T/run" --state-dir="$T/state")
loop_target dev usb 300M --config="$conf"
key=$T/keys/usb.key
tconf=$etc/conf.d/50-target-usb.conf
tline=$(grep -n '^key-file' "$tconf" | cut -d: -f1) # the mistake is at the key-file line
# [global] and a job whose commands would show that they ran
printf '[global]\non-failure = touch %s\n' "$T/pwned-global" >"$conf"
truncate -s 1M "$T/src.img"
printf '[job evil]\nsource = %s\npre = touch %s\non-failure = touch %s\n' "$T/src.img" "$T/pwned" "$T/pwned" \
    >"$etc/conf.d/60-job.conf"
bv config check --config="$conf" >"$T/ok.out" || die "the configuration as root wrote it was refused"
grep -q "^configuration ok: 1 target, 1 job" "$T/ok.out" || die "config check: $(cat "$T/ok.out")"

# refused_everywhere PATTERN: config check, job run and target run refuse with PATTERN (the
# untrusted file's sections are skipped), and none of its commands ran
refused_everywhere() {
    expect_fail 1 "$1" bv config check --config="$conf"
    expect_fail 1 "$1" bv job run evil "${opts[@]}"
    grep -q "^error: job evil is not run: its section has a mistake" "$T/.err" ||
        { cat "$T/.err" >&2; die "job run did not refuse job evil"; }
    expect_fail 1 "$1" bv target run "$dev" "${opts[@]}"
    [ ! -e "$T/pwned" ] || die "a command of the untrusted file ran"
}

# a world-writable conf.d file
chmod 0666 "$etc/conf.d/60-job.conf"
refused_everywhere "^$etc/conf.d/60-job.conf: file has mode 0666: writable by group or others (chmod go-w)$"
[ -e "$T/pwned-global" ] || die "[global]'s on-failure did not run after the failed run"
rm "$T/pwned-global"
chmod 0644 "$etc/conf.d/60-job.conf"
# one owned by nobody (its mode is fine)
chown nobody "$etc/conf.d/60-job.conf"
refused_everywhere "^$etc/conf.d/60-job.conf: file owned by nobody, not root (chown root)$"
chown root "$etc/conf.d/60-job.conf"
rm -f "$T/pwned-global"
# the main file, group-writable: its [global] is dropped too
chmod 0664 "$conf"
expect_fail 1 "^$conf: file has mode 0664: writable by group or others (chmod go-w)$" bv config check --config="$conf"
chmod 0644 "$conf"
# conf.d itself, where anyone could add or replace a file: every file in it is untrusted
chmod 0777 "$etc/conf.d"
refused_everywhere "^$etc/conf.d: directory has mode 0777: writable by group or others (chmod go-w)$"
grep -q "^error: target usb: " "$T/.err" || { cat "$T/.err" >&2; die "target run ran the drive of an untrusted file"; }
chmod 0755 "$etc/conf.d"
rm -f "$T/pwned-global"
chown nobody "$etc"
refused_everywhere "^$etc: directory owned by nobody, not root (chown root)$"
[ ! -e "$T/pwned-global" ] || die "[global]'s on-failure of an untrusted main file ran"
chown root "$etc"
# a key file others can read, or write, or owned by another: the drive is not run
for mode in 0440 0404 0640 0620 0600; do
    chmod "$mode" "$key"
    case $mode in
    0600) bv config check --config="$conf" >/dev/null || die "a key file of mode 0600 was refused"; continue ;;
    0620) why="file has mode 0620: writable by group or others (chmod go-w)" ;;
    *) why="secret file has mode $mode: readable by others than its owner (chmod 0600 or 0400; group read only for group blkvault)" ;;
    esac
    expect_fail 1 "^$tconf:$tline: '$key': $why$" bv config check --config="$conf"
    expect_fail 1 "^error: target usb: $tconf:$tline: '$key': $why$" bv target run "$dev" "${opts[@]}"
done
chmod 0400 "$key"
chown nobody "$key"
expect_fail 1 "^error: target usb: $tconf:$tline: '$key': file owned by nobody, not root (chown root)$" \
    bv target run "$dev" "${opts[@]}"
chown root "$key"
[ ! -e "$T/pwned" ] || die "a command of the untrusted file ran"
# an export's passphrase file: serve --export refuses it too
printf 'pass\n' >"$etc/pass"
chmod 0644 "$etc/pass"
printf '[export disk]\nrepository = %s\npassphrase-file = %s\n' "$T/repo" "$etc/pass" >"$etc/conf.d/70-export.conf"
expect_fail 1 "^error: export 'disk' is not served: its section has a mistake ($etc/conf.d/70-export.conf:3: '$etc/pass': secret file has mode 0644: readable by others than its owner (chmod 0600 or 0400; group read only for group blkvault))$" \
    bv serve --export=disk --config="$conf"
chmod 0600 "$etc/pass"

# a configuration of one's own: a user's files pass for that user, root's too, others' do not
mkdir "$T/user"
sed "s|^key-file = .*|key-file = $T/user/usb.key|" "$tconf" >"$T/user/blkvault.conf"
cp -p "$key" "$T/user/usb.key"
chown -R nobody "$T/user"
chmod 0755 "$T"
for u in nobody root; do
    setpriv --reuid=$u --regid=nogroup --clear-groups "$BLKVAULT" config check --config="$T/user/blkvault.conf" \
        >"$T/$u.out" 2>&1 && rc=0 || rc=$?
    case $u in
    nobody) [ "$rc" = 0 ] || { cat "$T/$u.out" >&2; die "nobody's own configuration was refused to nobody"; } ;;
    root) [ "$rc" = 1 ] && grep -q "^$T/user/blkvault.conf: file owned by nobody, not root (chown root)$" "$T/$u.out" ||
        { cat "$T/$u.out" >&2; die "nobody's configuration was not refused to root (exit $rc)"; } ;;
    esac
done

# A conf.d file that is a symbolic link into a directory another user can write (the attack after
# issue 21's fixes): the owner was checked with stat() on the path after the file was read, so
# nobody, swapping their own file and a link to a root-owned one there, got their job read and
# the root-owned file checked: `config check` passed it (2 in 40 tries), a target run ran its pre
# as root. The owner is now checked on the file that was read.
chmod 711 "$T"
mkdir "$T/race"
chown nobody "$T/race"
printf '# root-owned, nothing in it\n' >"$T/race-root.conf"
printf '[job race]\nsource = %s\npre = touch %s\ntargets = usb\n' "$T/src.img" "$T/pwned" >"$T/race/payload.conf"
chown nobody "$T/race/payload.conf"
ln -s "$T/race/evil.conf" "$etc/conf.d/70-race.conf"
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups bash -c 'cd "$1" || exit 1
    while :; do
        ln -f payload.conf a.tmp && mv -Tf a.tmp evil.conf
        ln -sfn "$2" b.tmp && mv -Tf b.tmp evil.conf
    done' - "$T/race" "$T/race-root.conf" &
swapper=$!
refused=0
for i in $(seq 1 200); do
    bv config check --config="$conf" >"$T/race.out" 2>&1 || true
    if grep -q "^configuration ok: 1 target, 2 jobs" "$T/race.out"; then
        kill "$swapper"
        die "config check took nobody's job from a file it checked as root's (try $i)"
    fi
    ! grep -q "^$etc/conf.d/70-race.conf: file owned by nobody, not root (chown root)$" "$T/race.out" || refused=$((refused + 1))
done
kill "$swapper"
wait "$swapper" 2>/dev/null || true
echo "race: nobody's file refused in $refused of 200 checks"
# the race ran: some checks read nobody's file (else the loop above proves nothing)
[ "$refused" -gt 0 ] || { cat "$T/race.out" >&2; die "no check read nobody's file: the swap never raced"; }
rm "$etc/conf.d/70-race.conf"
echo ok
