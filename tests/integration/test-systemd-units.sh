#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The NBD export units pass `systemd-analyze verify` without a single warning, carry the
# hardening they promise, and the service's command line (blkvault serve --export=%i, which
# reads the [export NAME] section of the configuration and becomes nbdkit) serves a snapshot on
# a socket passed by socket activation (systemd-socket-activate stands in for PID 1); the
# errors of an export that is not configured or cannot be opened.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd systemd-analyze
units=$BUILD_ROOT/systemd
service=$units/blkvault-nbd@.service
socket=$units/blkvault-nbd@.socket
[ -f "$service" ] && [ -f "$socket" ] || die "units not built in $units"

# verify needs an instance; copy the templates so the instance resolves next to them
mkdir -p "$T/units"
cp "$socket" "$T/units/"
# verify checks that the binary is executable: the build's, for the installed path
sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$service" > "$T/units/blkvault-nbd@.service"
rc=0
(cd "$T/units" && systemd-analyze verify --man=no "$T/units/blkvault-nbd@vm1.socket" \
    "$T/units/blkvault-nbd@vm1.service") >"$T/verify.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ ! -s "$T/verify.out" ] || { cat "$T/verify.out" >&2; die "systemd-analyze verify complained"; }

for key in DynamicUser=yes ProtectSystem=strict PrivateNetwork=yes NoNewPrivileges=yes ProtectHome=yes \
           RestrictAddressFamilies=AF_UNIX MemoryDenyWriteExecute=yes SystemCallFilter=@system-service; do
    grep -qx "$key" "$service" || die "service lacks $key"
done
grep -qx "ListenStream=/run/blkvault/nbd/%i.sock" "$socket" || die "socket does not listen on /run/blkvault/nbd/%i.sock"
grep -qx "ExecStart=.*/blkvault serve --export=%i" "$service" || die "the service does not serve the configured export %i"
! grep -q "EnvironmentFile" "$service" || die "the service still reads an EnvironmentFile"

# the off-site copy: its service and timer verify cleanly; the service runs `blkvault remote copy
# %i` with the network (the drive's units have none), after network-online.target, and the
# timer is hourly and persistent
cservice=$units/blkvault-copy@.service
ctimer=$SOURCE_ROOT/systemd/blkvault-copy@.timer
[ -f "$cservice" ] || die "blkvault-copy@.service not built in $units"
sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$cservice" > "$T/units/blkvault-copy@.service"
cp "$ctimer" "$T/units/"
rc=0
(cd "$T/units" && systemd-analyze verify --man=no "$T/units/blkvault-copy@offsite.timer" \
    "$T/units/blkvault-copy@offsite.service") >"$T/verify.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ ! -s "$T/verify.out" ] || { cat "$T/verify.out" >&2; die "systemd-analyze verify of the copy units complained"; }
grep -qx "ExecStart=.*/blkvault remote copy %i" "$cservice" || die "the copy service does not run 'blkvault remote copy %i'"
for key in Type=oneshot After=network-online.target\ local-fs.target Wants=network-online.target ProtectSystem=strict \
           NoNewPrivileges=yes CacheDirectory=blkvault; do
    grep -qx "$key" "$cservice" || die "copy service lacks $key"
done
! grep -q "^PrivateNetwork=yes" "$cservice" || die "the copy service has no network"
grep -qx "OnCalendar=hourly" "$ctimer" && grep -qx "Persistent=yes" "$ctimer" || die "copy timer"
grep -qx "PrivateNetwork=yes" "$units/blkvault-target@.service" || die "the drive's run has the network: a backup would wait on it"

# scheduled verification: the timer and its service verify cleanly, and the service's command
# line, with a configuration, reads a sample of the packs and records it in the repository
vservice=$units/blkvault-verify@.service
vtimer=$units/blkvault-verify@.timer
[ -f "$vservice" ] && [ -f "$vtimer" ] || die "verify units not built in $units"
sed "s|^ExecStart=[^ ]*/blkvault |ExecStart=$BLKVAULT |" "$vservice" > "$T/units/blkvault-verify@.service"
cp "$vtimer" "$T/units/"
rc=0
(cd "$T/units" && systemd-analyze verify --man=no "$T/units/blkvault-verify@main.timer" \
    "$T/units/blkvault-verify@main.service") >"$T/verify.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ ! -s "$T/verify.out" ] || { cat "$T/verify.out" >&2; die "systemd-analyze verify of the verify units complained"; }
for key in Type=oneshot ProtectSystem=full PrivateNetwork=yes NoNewPrivileges=yes IOSchedulingClass=idle \
           Environment=VERIFY_OPTIONS=--max-duration=1h EnvironmentFile=/etc/blkvault/verify/%i.conf; do
    grep -qx "$key" "$vservice" || die "verify service lacks $key"
done
grep -qx "Persistent=yes" "$vtimer" && grep -qx "WantedBy=timers.target" "$vtimer" || die "verify timer"
randfile "$T/vimg" 1 vimg
bv init "$T/vrepo" --encryption=none >/dev/null
bv backup "$T/vrepo" "$T/vimg" --name=v >/dev/null
REPO=$T/vrepo VERIFY_OPTIONS=--sample=100 SECRET=
vline=$(sed -n 's/^ExecStart=//p' "$vservice")
vline=${vline//\$\{REPO\}/$REPO}
vline=${vline//\$VERIFY_OPTIONS/$VERIFY_OPTIONS}
vline=${vline//\$SECRET/$SECRET}
read -r -a vcmd <<< "$vline"
vcmd[0]=$BLKVAULT
"${vcmd[@]}" >/dev/null 2>"$T/vrun.err" || { cat "$T/vrun.err" >&2; die "the verify service's command failed"; }
grep -qx "scheduled: data of 1 of 1 packs read; 0 packs never read yet" "$T/vrun.err" || { cat "$T/vrun.err" >&2; die "verify service output"; }
assert_eq "$(head -1 "$T/vrepo/verify-state")" "blkvault-verify-state 1" "verify-state header"

# the ExecStart line, with the export's configuration, under socket activation
[ -n "${NBD_PLUGIN:-}" ] || skip "no nbdkit plugin built: the activation part cannot run"
need_cmd systemd-socket-activate nbdcopy
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
randfile "$T/img" 4 units
repo=$T/repo
printf 'secret words\n' > "$T/pass"
chmod 0600 "$T/pass"   # a secret file others can read is refused (blkvault.conf(5))
BLKVAULT_PASSPHRASE='secret words' bv init "$repo" >/dev/null
BLKVAULT_PASSPHRASE='secret words' bv backup "$repo" "$T/img" --name=vm1 >/dev/null
mkdir -p "$T/etc"
cat > "$T/etc/blkvault.conf" <<EOF
[export vm1]
repository = $repo
snapshot = latest
passphrase-file = $T/pass
cache = 16M
EOF
# systemd-socket-activate passes only the environment named with -E
envs=(-E ASAN_OPTIONS=detect_leaks=0 -E "BLKVAULT_CONFIG=$T/etc/blkvault.conf" -E "BLKVAULT_NBD_PLUGIN=$NBD_PLUGIN"
      -E "PATH=$PATH")
[ -z "$NBD_PRELOAD" ] || envs+=(-E "LD_PRELOAD=$NBD_PRELOAD")
cmd=("$BLKVAULT" serve --export=vm1)
systemd-socket-activate "${envs[@]}" -l "$T/vm1.sock" "${cmd[@]}" 2>"$T/activate.log" &
pid=$!
on_exit "kill $pid; wait $pid"
for w in $(seq 100); do [ -S "$T/vm1.sock" ] && break; sleep 0.1; done
nbdcopy "nbd+unix:///?socket=$T/vm1.sock" "$T/out" 2>"$T/copy.err" || { cat "$T/activate.log" "$T/copy.err" >&2; die "socket-activated export did not serve"; }
assert_same "$T/img" "$T/out"

# one worker per connection (nbdkit 1.32 aborts when a client hangs up with replies in flight),
# read-only, the socket from systemd: what the export became
args=$(tr '\0' ' ' < /proc/$pid/cmdline)
case "$args" in
    "nbdkit --foreground --readonly --threads=1 --log=stderr $NBD_PLUGIN repo=$repo snapshot="[0-9a-f]*" cache=16M passphrase-file=$T/pass ") ;;
    *) die "the export runs '$args'" ;;
esac

expect_fail 1 "^error: no export 'vm2' in the configuration (an \\[export vm2\\] section)$" \
    env BLKVAULT_CONFIG="$T/etc/blkvault.conf" "$BLKVAULT" serve --export=vm2
expect_fail 2 "^error: expected 'blkvault serve --export=NAME' (see 'blkvault help serve')$" \
    env BLKVAULT_CONFIG="$T/etc/blkvault.conf" "$BLKVAULT" serve --export=vm1 "$repo" latest
sed -i "s|^passphrase-file = .*|passphrase-file = $T/wrong|" "$T/etc/blkvault.conf"
printf 'other words\n' > "$T/wrong"
chmod 0600 "$T/wrong"
expect_fail 3 "^error: cannot open repository '$repo': wrong passphrase or key$" \
    env BLKVAULT_CONFIG="$T/etc/blkvault.conf" "$BLKVAULT" serve --export=vm1
