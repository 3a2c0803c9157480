#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# One damaged chunk in a pack: a client's read of that range fails with EIO, the nbdkit log
# names the image offset, and every other range still reads correctly.
. "$SOURCE_ROOT/tests/lib.sh"
. "$SOURCE_ROOT/tests/nbd/nbd-lib.sh"
need_cmd openssl
PY=$(nbd_python) || skip "python3-libnbd is not installed"

img=$T/disk.img
randfile "$img" 8 nbddamage
repo=$T/repo
plain_repo "$repo" "$img"
# flip one byte of the data stored for image offset 3 MiB + 100
target=$((3 * 1048576 + 100))
damage_stored "$repo" "$img" "$target"

start_nbdkit damaged repo="$repo" snapshot=disk
"$PY" - "$img" "$NBD_URI" "$target" <<'PY'
import errno, nbd, sys
img = open(sys.argv[1], "rb").read()
target = int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(sys.argv[2])
try:
    h.pread(4096, target - 100)
    raise SystemExit("read of the damaged range succeeded")
except nbd.Error as e:
    assert e.errno in (errno.EIO, "EIO"), ("expected EIO", e.errno, e)
# everything before and after the damaged chunk (at most 1 MiB either side) reads correctly
for off in range(0, len(img), 1 << 20):
    if off <= target < off + (1 << 20):
        continue
    assert h.pread(1 << 20, off) == img[off:off + (1 << 20)], off
# the same range fails again (nothing wrong was cached)
try:
    h.pread(1, target)
    raise SystemExit("second read of the damaged range succeeded")
except nbd.Error as e:
    assert e.errno in (errno.EIO, "EIO"), e
h.shutdown()
PY
stop_nbdkit
grep -q "damaged data at image offset [0-9]* (0x[0-9a-f]*) of snapshot 'disk'" "$T/damaged.log" ||
    { cat "$T/damaged.log" >&2; die "the nbdkit log does not name the damaged offset"; }
bad=$(grep -o "damaged data at image offset [0-9]*" "$T/damaged.log" | head -1 | grep -o '[0-9]*$')
[ "$bad" -le "$target" ] && [ $((target - bad)) -lt $((1 << 20)) ] ||
    die "the log names offset $bad, the damage is at $target"

# --- a damaged compression group (the default: zstd, consecutive new chunks grouped) --------
# compressible data: hex text of random bytes. One flipped byte inside a group fails every chunk
# it holds, and only those: the failing 4 KiB blocks are one run of at most a group's 256 KiB
# of chunks, everything else reads correctly.
text=$T/text.img
randfile "$T/noise" 4 nbdgroup
od -An -tx1 -v "$T/noise" | tr -d ' \n' | head -c $((8 * 1048576)) > "$text"
repo2=$T/repo-groups
bv init "$repo2" --encryption=none >/dev/null
bv backup "$repo2" "$text" --name=text >/dev/null
pack=$(find "$repo2/packs" -name '*.pack' -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)
flip_byte "$pack" 1048576

start_nbdkit groups repo="$repo2" snapshot=text
"$PY" - "$text" "$NBD_URI" <<'PY'
import errno, nbd, sys
img = open(sys.argv[1], "rb").read()
h = nbd.NBD()
h.connect_uri(sys.argv[2])
bad = []
for off in range(0, len(img), 4096):
    try:
        assert h.pread(4096, off) == img[off:off + 4096], ("wrong data at", off)
    except nbd.Error as e:
        assert e.errno in (errno.EIO, "EIO"), e
        bad.append(off)
assert bad, "the damaged group read back without an error"
assert bad == list(range(bad[0], bad[-1] + 4096, 4096)), "failing blocks are not one run"
assert len(bad) * 4096 <= 256 * 1024, ("more than a group failed", len(bad))
h.shutdown()
PY
stop_nbdkit
grep -q "damaged data at image offset" "$T/groups.log" || { cat "$T/groups.log" >&2; die "no damage named in the log"; }

# A damaged snapshot record of another snapshot: the export of this one still serves it whole,
# and the plugin's log names the record it skipped (silence would hide the damage).
# text_served_whole NAME REPO LINE: the export of snapshot 'text' of REPO (nbdkit log $T/NAME.log)
# reads back as $text, and the log has LINE
text_served_whole() {
    start_nbdkit "$1" repo="$2" snapshot=text
    nbdcopy "$NBD_URI" - | cmp - "$text" || die "the export of 'text' changed ($1)"
    stop_nbdkit
    grep -qxF "$3" "$T/$1.log" || { cat "$T/$1.log" >&2; die "the plugin did not say: $3"; }
}
repo3=$T/repo-records
bv init "$repo3" --encryption=none >/dev/null
bv backup "$repo3" "$text" --name=text -q
bv backup "$repo3" "$img" --name=other -q
other=$(bv list "$repo3" --json | python3 -c "import json,sys; print([s['id'] for s in json.load(sys.stdin) if s['name'] == 'other'][0])")
rec=$repo3/snapshots/$other.snap
flip_byte "$rec" $(( $(stat -c %s "$rec") - 1 ))
text_served_whole skipped "$repo3" \
    "nbdkit: error: skipping damaged snapshot record snapshots/$other.snap in '$repo3': Bad message (see 'blkvault verify')"
echo "ok: a damaged record of another snapshot is skipped with a warning naming it"

# A damaged index segment (another backup's): the export of a snapshot the other segments
# locate still serves it whole, and the plugin's log names the segment it left out.
repo4=$T/repo-index
bv init "$repo4" --encryption=none >/dev/null
bv backup "$repo4" "$img" --name=other -q
seg=$(cd "$repo4/index" && ls)
assert_eq "$(echo "$seg" | wc -l)" 1 "segments after one backup"
bv backup "$repo4" "$text" --name=text -q
flip_byte "$repo4/index/$seg" 20 # the entry count: the header checksum no longer matches
text_served_whole segment "$repo4" \
    "nbdkit: error: index segment 'index/$seg' in '$repo4' does not read (Bad message): left out; what it locates cannot be read (see 'blkvault verify')"
echo "ok: a damaged index segment of another backup is left out with a warning naming it"
