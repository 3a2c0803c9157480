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

etc=$T/etc
mkdir -p "$etc/conf.d" "$etc/keys"
head -c 64 /dev/urandom >"$etc/keys/usb.key"
chmod 0400 "$etc/keys/usb.key"
cat >"$etc/blkvault.conf" <<EOF
[target usb]
uuid = 0b6c1b2a-1234-4321-abcd-0123456789ab
key-file = $etc/keys/usb.key
EOF
# a job whose pre command would show that it ran
printf '[job evil]\nsource = %s\npre = touch %s\n' "$T/src.img" "$T/pwned" >"$etc/conf.d/50-job.conf"
truncate -s 1M "$T/src.img"
opts=(--config="$etc/blkvault.conf")
bv config check "${opts[@]}" >"$T/ok.out" || die "the configuration as root wrote it was refused"
grep -q "^configuration ok: 1 target, 1 job" "$T/ok.out" || die "config check: $(cat "$T/ok.out")"

# refused_everywhere PATTERN: config check, job run and target run refuse with PATTERN, and the
# job's pre command did not run
refused_everywhere() {
    expect_fail 1 "$1" bv config check "${opts[@]}"
    expect_fail 1 "$1" bv job run evil "${opts[@]}" --run-dir="$T/run" --state-dir="$T/state"
    grep -q "^error: 1 mistake in the configuration (see 'blkvault config check')$" "$T/.err" ||
        { cat "$T/.err" >&2; die "job run did not refuse the configuration"; }
    expect_fail 1 "$1" bv target run usb "${opts[@]}" --run-dir="$T/run" --state-dir="$T/state"
    [ ! -e "$T/pwned" ] || die "the job's pre command ran"
}

# a world-writable conf.d file
chmod 0666 "$etc/conf.d/50-job.conf"
refused_everywhere "^$etc/conf.d/50-job.conf: file has mode 0666: writable by group or others (chmod go-w)$"
chmod 0644 "$etc/conf.d/50-job.conf"
# one owned by nobody (its mode is fine)
chown nobody "$etc/conf.d/50-job.conf"
refused_everywhere "^$etc/conf.d/50-job.conf: file owned by nobody, not root (chown root)$"
chown root "$etc/conf.d/50-job.conf"
# the main file, group-writable
chmod 0664 "$etc/blkvault.conf"
refused_everywhere "^$etc/blkvault.conf: file has mode 0664: writable by group or others (chmod go-w)$"
chmod 0644 "$etc/blkvault.conf"
# conf.d itself, where anyone could add or replace a file
chmod 0777 "$etc/conf.d"
refused_everywhere "^$etc/conf.d: directory has mode 0777: writable by group or others (chmod go-w)$"
chmod 0755 "$etc/conf.d"
chown nobody "$etc"
refused_everywhere "^$etc: directory owned by nobody, not root (chown root)$"
chown root "$etc"
# a key file others can read, or write; one the group may read
for mode in 0440 0404 0600 0640 0620; do
    chmod "$mode" "$etc/keys/usb.key"
    case $mode in
    0600) bv config check "${opts[@]}" >/dev/null || die "a key file of mode 0600 was refused" ;;
    0620) refused_everywhere "^$etc/blkvault.conf:1: '$etc/keys/usb.key': file has mode 0620: writable by group or others (chmod go-w)$" ;;
    *) refused_everywhere "^$etc/blkvault.conf:1: '$etc/keys/usb.key': secret file has mode $mode: readable by others than its owner (chmod 0400)$" ;;
    esac
done
chmod 0400 "$etc/keys/usb.key"
chown nobody "$etc/keys/usb.key"
refused_everywhere "^$etc/blkvault.conf:1: '$etc/keys/usb.key': file owned by nobody, not root (chown root)$"
chown root "$etc/keys/usb.key"
# an export's passphrase file: serve --export refuses it too
printf 'pass\n' >"$etc/pass"
chmod 0644 "$etc/pass"
printf '[export disk]\nrepository = %s\npassphrase-file = %s\n' "$T/repo" "$etc/pass" >"$etc/conf.d/60-export.conf"
expect_fail 1 "^$etc/conf.d/60-export.conf:1: '$etc/pass': secret file has mode 0644: readable by others than its owner (chmod 0400)$" \
    bv serve --export=disk "${opts[@]}"
chmod 0600 "$etc/pass"

# a configuration of one's own: a user's files pass for that user, root's too, others' do not
cp -r "$etc" "$T/user"
rm -r "$T/user/conf.d" "$T/user/keys"
sed -i "s|^key-file = .*|key-file = $T/user/usb.key|" "$T/user/blkvault.conf"
cp -p "$etc/keys/usb.key" "$T/user/usb.key"
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
echo ok
