#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# No key material in a core dump of nbdkit serving an encrypted repository: once the plugin is
# configured, nbdkit (which then holds the subkeys; the master secret is wiped once they are
# derived, as its memory shows) dumps
# no core, or none holding keys, when it dies of SIGSEGV during a read. See
# tests/integration/test-coredump.sh for the CLI and tests/coredump-lib.sh for the method.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
. "$SOURCE_ROOT/tests/coredump-lib.sh"
need_cmd nbdcopy

passphrase=$(openssl rand -hex 24)
repo=$T/repo
BLKVAULT_PASSPHRASE=$passphrase bv init "$repo" >/dev/null
randfile "$T/data" 8 nbdcore
BLKVAULT_PASSPHRASE=$passphrase bv backup "$repo" "$T/data" --name=disk -q >/dev/null
python3 "$SOURCE_ROOT/tests/keys.py" "$repo" "$passphrase" >/dev/null

# like start_nbdkit, with ASan's own core dump switch-off undone (coredump-lib.sh)
sock=$T/core.sock
"${NBD_ENV[@]}" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:disable_coredump=0:handle_segv=0 \
    BLKVAULT_PASSPHRASE="$passphrase" nbdkit -f -U "$sock" -r "$NBD_PLUGIN" repo="$repo" snapshot=disk \
    2>"$T/nbdkit.log" &
pid=$!
on_exit "kill $pid"
wait_socket "$sock" $pid || { cat "$T/nbdkit.log" >&2; die "nbdkit did not start"; }
nbdcopy "nbd+unix:///?socket=$sock" "$T/copy"
assert_same "$T/data" "$T/copy"
# serving, the plugin holds the subkeys only: not the key-encryption key nor the master secret
# (the passphrase stays in nbdkit's environment here, where this test put it; serve passes it
# through a pipe instead)
python3 "$SOURCE_ROOT/tests/keys.py" "$repo" "$passphrase" --pid $pid kek master ||
    die "the plugin keeps secrets it no longer needs"
kill_when nbdkit $pid
check_cores "$repo" "$passphrase" "nbdkit serving the repository, killed by SIGSEGV"
