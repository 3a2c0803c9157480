#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault files against libguestfs (issue 25), in one run and as a non-root user: a GPT image
# whose ext4 partition holds a copy of this host's /etc and a 100 MiB file is backed up into an
# encrypted repository; then `files ls p1:/etc` and `files get` of the 100 MiB file, beside
# `virt-ls` and `virt-cat` on `blkvault serve --uri-for=libguestfs`'s export of the same
# snapshot (one appliance boot per command, TCG here). Each libguestfs command runs under a
# timeout (BENCH_GUESTFS_TIMEOUT, default 600 s): what happened is in the table either way.
# Goals: files ls under 2 s, get at least 200 MB/s.
#
#   bench/files.sh      (as a user without root; as root it runs itself again as nobody)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need mkfs.ext4 sfdisk openssl python3 nbdkit setpriv /usr/bin/time
if [ "$(id -u)" = 0 ]; then
    # the work directory and the binary must be nobody's to read; the page cache is dropped
    # here, once, before the image is made (nobody cannot)
    bench_build
    [ "${BENCH_BUILD:-1}" = 0 ] || ninja -C "$BUILD_DIR" nbd-plugin/nbdkit-blkvault-plugin.so >/dev/null || die "no plugin"
    w=$BENCH_WORK/files-nobody
    rm -rf "$w"
    mkdir -p "$w"
    chown nobody: "$w"
    exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$w" BENCH_WORK="$w" \
        BENCH_BUILD=0 BLKVAULT="$BLKVAULT" BENCH_OUT="$w/results" bash "$0" "$@"
fi
bench_build
W=$BENCH_WORK/files
rm -rf "$W"
mkdir -p "$W/tree/etc" "$W/tree/data" "$W/home" "$W/tmp"
export HOME=$W/home TMPDIR=$W/tmp LIBGUESTFS_BACKEND=direct LIBGUESTFS_CACHEDIR=$W/tmp
TIMEOUT=${BENCH_GUESTFS_TIMEOUT:-600}
randfile() { head -c "$(( $2 * 1048576 ))" /dev/zero | openssl enc -aes-128-ctr -pass "pass:$3" -nosalt -pbkdf2 > "$1" 2>/dev/null; }
log "$(load_note)"

# what this user may read of /etc (what it may not is left out, as cp says)
cp -r /etc/. "$W/tree/etc/" 2>/dev/null || true
randfile "$W/tree/data/big.bin" 100 files-bench
img=$W/disk.img
truncate -s 512M "$img"
printf 'label: gpt\nstart=2048,type=L\n' | sfdisk -q "$img"
mkfs.ext4 -q -F -L bench -E offset=1048576 -d "$W/tree" "$img" 500M
key=$W/key
head -c 32 /dev/urandom >"$key"
repo=$W/repo
bv init "$repo" --key-file="$key" >/dev/null
bv backup "$repo" "$img" --name=disk --key-file="$key" -q >/dev/null
etc_entries=$(find "$W/tree/etc" -mindepth 1 -maxdepth 1 | wc -l)

# timed LABEL CMD...: wall seconds of CMD into $secs, user + system CPU seconds into $cpu (with
# its children: the appliance's qemu for libguestfs), its exit status into $rc. On a loaded
# machine (2 cores shared) wall time waits for a core: CPU says what the command costs.
timed() {
    local label=$1 user sys; shift
    rc=0
    /usr/bin/time -f '%e %U %S' -o "$W/time" "$@" || rc=$?
    read -r secs user sys < <(tail -n1 "$W/time")
    cpu=$(python3 -c "print('%.2f' % ($user + $sys))")
    log "$label: ${secs} s wall, ${cpu} s CPU (exit $rc)"
}
mbps() { python3 -c "print('%.0f' % (104857600 / 1e6 / max($1, 1e-3)))"; }
rows=()

timed "files ls p1:/etc" "$BLKVAULT" files "$repo" disk ls p1:/etc --key-file="$key" >"$W/ls.out"
[ "$rc" = 0 ] && [ "$(wc -l <"$W/ls.out")" -ge "$etc_entries" ] || die "files ls p1:/etc: exit $rc, $(wc -l <"$W/ls.out") lines for $etc_entries entries"
rows+=("| blkvault files ls p1:/etc | $secs | $cpu | $(wc -l <"$W/ls.out") entries | $rc |")
timed "files ls p1:/etc (again)" "$BLKVAULT" files "$repo" disk ls p1:/etc --key-file="$key" >/dev/null
rows+=("| blkvault files ls p1:/etc (again) | $secs | $cpu | | $rc |")
mkdir -p "$W/out"
timed "files get (100 MiB)" "$BLKVAULT" files "$repo" disk get p1:/data/big.bin "$W/out" --key-file="$key"
cmp "$W/out/big.bin" "$W/tree/data/big.bin" || die "files get: the copy differs"
rows+=("| blkvault files get p1:/data/big.bin DEST | $secs | $cpu | $(mbps "$secs") MB/s ($(mbps "$cpu") per CPU second) | $rc |")
timed "files cat (100 MiB)" bash -c '"$1" files "$2" disk cat p1:/data/big.bin --key-file="$3" >/dev/null' _ \
    "$BLKVAULT" "$repo" "$key"
rows+=("| blkvault files cat p1:/data/big.bin >/dev/null | $secs | $cpu | $(mbps "$secs") MB/s ($(mbps "$cpu") per CPU second) | $rc |")

# libguestfs on the same snapshot over blkvault serve's socket
sock=$W/nbd.sock
bv serve "$repo" disk --socket="$sock" --uri-for=libguestfs --key-file="$key" >"$W/serve.out" 2>"$W/serve.err" &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ -s "$W/serve.out" ] && break; sleep 0.1; done
uri=$(head -n1 "$W/serve.out")
[ -n "$uri" ] || { cat "$W/serve.err" >&2; die "blkvault serve printed no URI"; }
log "serving $uri"
if command -v virt-ls >/dev/null && command -v virt-cat >/dev/null; then
    timed "virt-ls /etc" timeout "$TIMEOUT" virt-ls --format=raw -a "$uri" -m /dev/sda1 /etc >"$W/virt-ls.out" 2>"$W/virt-ls.err"
    what="$(wc -l <"$W/virt-ls.out") entries"
    [ "$rc" = 124 ] && what="killed after ${TIMEOUT} s"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && what="failed: $(tail -n1 "$W/virt-ls.err")"
    rows+=("| virt-ls -a URI -m /dev/sda1 /etc | $secs | $cpu | $what | $rc |")
    timed "virt-cat (100 MiB)" timeout "$TIMEOUT" virt-cat --format=raw -a "$uri" -m /dev/sda1 /data/big.bin >"$W/virt-cat.out" 2>"$W/virt-cat.err"
    what="$(mbps "$secs") MB/s"
    [ "$rc" = 0 ] && ! cmp -s "$W/virt-cat.out" "$W/tree/data/big.bin" && what="$what, but the bytes differ"
    [ "$rc" = 124 ] && what="killed after ${TIMEOUT} s"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && what="failed: $(tail -n1 "$W/virt-cat.err")"
    rows+=("| virt-cat -a URI -m /dev/sda1 /data/big.bin | $secs | $cpu | $what | $rc |")
else
    rows+=("| virt-ls, virt-cat | | | not installed (libguestfs-tools) | |")
fi

out=$BENCH_OUT/files.md
mkdir -p "$BENCH_OUT"
{
    echo "# blkvault files against virt-ls/virt-cat: a 512 MiB GPT image, ext4 with /etc ($etc_entries entries) and a 100 MiB file"
    echo
    echo "as $(id -un) (uid $(id -u)); $(load_note); libguestfs backend direct (TCG), timeout ${TIMEOUT} s"
    echo
    echo "| command | wall s | CPU s | result | exit |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Goals: files ls under 2 s, get at least 200 MB/s (wall; on a loaded machine see CPU)."
} | tee "$out"
