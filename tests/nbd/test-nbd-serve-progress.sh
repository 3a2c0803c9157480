#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# serve's first open on a terminal (issue 12): a line while the key is derived, then one while
# nbdkit starts and opens the repository, cleared before the URI; -q shows neither, and a
# standard error that is not a terminal gets no such line. --passphrase-command serves too.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd python3 nbdcopy sha256sum

onpty() { python3 "$SOURCE_ROOT/tests/onpty.py" "$@"; }
lines() { sed 's/\x1b\[K//g' "$1" | tr '\r' '\n' | sed '/^$/d'; }

echo pass-serve >"$T/pass"
repo=$T/repo
bv init "$repo" --passphrase-file="$T/pass" >/dev/null 2>&1
randfile "$T/img" 2 serve-progress
bv backup "$repo" "$T/img" --name=disk --passphrase-file="$T/pass" >/dev/null 2>&1

# serve until the URI is printed, then SIGTERM (serve exits 0 when told to stop)
onpty "$T/serve.tty" --stop-when "$T/uri" -- "${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" disk \
    --socket="$T/s" --passphrase-file="$T/pass" >"$T/uri" || die "serve failed"
assert_eq "$(cat "$T/uri")" "nbd+unix:///?socket=$T/s" "the URI"
lines "$T/serve.tty" | grep_q -x 'deriving the key from the passphrase (scrypt)...' ||
    { cat -A "$T/serve.tty" >&2; die "serve showed no key derivation line"; }
lines "$T/serve.tty" | grep_q -Ex 'serve: starting nbdkit, which opens the repository \([0-9]+\.[0-9] s\)' ||
    { cat -A "$T/serve.tty" >&2; die "serve showed no line while nbdkit started"; }
lines "$T/serve.tty" | grep_q -Ex "serving snapshot [0-9a-f]{8} of '$repo' read-only; stop with Ctrl-C" ||
    { cat -A "$T/serve.tty" >&2; die "serve did not say it serves"; }

onpty "$T/serve-q.tty" --stop-when "$T/uri-q" -- "${NBD_ENV[@]}" "$BLKVAULT" serve "$repo" disk \
    --socket="$T/s" --passphrase-file="$T/pass" -q >"$T/uri-q" || die "serve -q failed"
if grep -q $'\x1b' "$T/serve-q.tty" || grep_q -E 'deriving|starting nbdkit' "$T/serve-q.tty"; then
    cat -A "$T/serve-q.tty" >&2; die "serve -q showed a status line"
fi

# not a terminal: no status line (the passphrase from --passphrase-command this time, which
# reaches the plugin as it does from a file: the export reads back bit-exact)
start_serve plain "$repo" disk --socket="$T/s" --passphrase-command="cat '$T/pass'" ||
    die "serve on a plain stderr did not start"
nbdcopy "$SERVE_URI" "$T/copy" || die "nbdcopy from the export failed"
stop_serve
assert_eq "$(sha256sum <"$T/copy")" "$(sha256sum <"$T/img")" "the export served with --passphrase-command"
if grep -Eq $'\r|\x1b|deriving|starting nbdkit' "$T/plain.log"; then cat -A "$T/plain.log" >&2; die "status lines on a non-terminal"; fi
echo ok
