#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# No key material in a core dump: a backup that dies of a signal mid-way (as a crash would) must
# leave no core holding the passphrase, the key-encryption key, the master secret or any subkey.
# The test computes those secrets itself from the passphrase (tests/keys.py, checked against the
# config's MAC) and searches whatever core the backup left (tests/coredump-lib.sh).
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/coredump-lib.sh"

passphrase=$(openssl rand -hex 24)
export BLKVAULT_PASSPHRASE=$passphrase
repo=$T/repo
bv init "$repo" >/dev/null
python3 "$SOURCE_ROOT/tests/keys.py" "$repo" "$passphrase" >/dev/null

# a backup from a pipe: 16 MiB are read and stored, then it waits for more and is killed
randfile "$T/data" 16 coredump
mkfifo "$T/fifo"
"$BLKVAULT" backup "$repo" - --name=crash -q < "$T/fifo" &
pid=$!
exec 3>"$T/fifo"
cat "$T/data" >&3   # returns once the backup has taken all but a pipe's worth
kill_when blkvault $pid
exec 3>&-
check_cores "$repo" "$passphrase" "a backup killed by SIGSEGV"
