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

# Secrets are dropped as soon as the repository is open: a backup that is reading its source
# holds neither the passphrase (read from a file here, and gone from the environment when it came
# from there) nor the key-encryption key nor the master secret (only the subkeys it uses);
# tests/keys.py reads its memory directly, whatever the core dump settings.
printf '%s' "$passphrase" > "$T/pass"
unset BLKVAULT_PASSPHRASE
for how in file env; do
    if [ $how = file ]; then
        "$BLKVAULT" backup "$repo" - --name=open-$how --passphrase-file="$T/pass" -q < "$T/fifo" &
    else
        BLKVAULT_PASSPHRASE=$passphrase "$BLKVAULT" backup "$repo" - --name=open-$how -q < "$T/fifo" &
    fi
    pid=$!
    exec 3>"$T/fifo"
    cat "$T/data" >&3   # returns once the backup reads its source: the repository is open
    if grep -qaF "$passphrase" "/proc/$pid/environ"; then
        die "a backup keeps the passphrase in its environment (/proc/$pid/environ)"
    fi
    if [ $how = file ]; then
        python3 "$SOURCE_ROOT/tests/keys.py" "$repo" "$passphrase" --pid $pid passphrase kek master ||
            die "an open repository keeps secrets it no longer needs"
    fi
    exec 3>&-
    wait $pid || die "the backup (passphrase from the $how) failed"
done
echo "ok: after open, no passphrase (file or environment), key-encryption key or master secret in memory"
