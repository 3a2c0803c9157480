#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A source that returns EIO (nbdkit's error filter, read through nbdfuse): the backup fails by
# default and names the offset it could not read; with --skip-unreadable it succeeds, the
# snapshot lists the unreadable ranges (info, info --json, verify), they restore as zeroes and
# every other byte restores bit-exact.
. "$SOURCE_ROOT/tests/lib.sh"
need_root
need_cmd nbdkit nbdfuse fusermount3 python3 openssl
[ -e /dev/fuse ] || skip "no /dev/fuse"

randfile "$T/img" 4 eio
mkdir "$T/mnt"
# every read fails while $T/trigger exists (error-pread-rate), else the image reads normally
touch "$T/trigger"
nbdfuse "$T/mnt/img" --command nbdkit -s --filter=error file "$T/img" \
    error-pread-rate=100% error-pread-file="$T/trigger" 2>"$T/fuse.log" &
fuse=$!
on_exit "fusermount3 -u -q '$T/mnt' 2>/dev/null; kill $fuse 2>/dev/null; wait $fuse 2>/dev/null || :"
for _ in $(seq 100); do [ -f "$T/mnt/img" ] && break; sleep 0.1; done
[ -f "$T/mnt/img" ] || { cat "$T/fuse.log" >&2; die "nbdfuse did not show the export"; }

repo=$T/repo
bv init "$repo" --encryption=none >/dev/null
# 1. by default the first unreadable block fails the backup, named by its offset
expect_fail 1 "^error: backup of '$T/mnt/img' failed: cannot read it at offset 0 (0x0) (nothing was published; --skip-unreadable stores such blocks as zeroes): Input/output error$" \
    bv backup "$repo" "$T/mnt/img" --name=fail
assert_eq "$(bv list "$repo" --json | grep -c '"id"' || :)" 0 "snapshots after the failed backup"

# 2. while $T/trigger exists, every request that touches bytes 1 MiB to 1.5 MiB fails (always
# the same ones: a random rate let retried reads all succeed now and then): with
# --skip-unreadable those blocks become zeroes
fusermount3 -u "$T/mnt"; wait "$fuse" || :
nbdfuse "$T/mnt/img" --command nbdkit -s eval get_size="echo $((4 * 1048576))" \
    pread='if [ -e "'"$T/trigger"'" ] && [ "$4" -lt 1572864 ] && [ $(($4 + $3)) -gt 1048576 ]; then
               echo "EIO unreadable" >&2; exit 1; fi
           dd if="'"$T/img"'" skip="$4" count="$3" iflag=skip_bytes,count_bytes status=none' 2>"$T/fuse.log" &
fuse=$!
on_exit "fusermount3 -u -q '$T/mnt' 2>/dev/null; kill $fuse 2>/dev/null; wait $fuse 2>/dev/null || :"
for _ in $(seq 100); do [ -f "$T/mnt/img" ] && break; sleep 0.1; done
bv backup "$repo" "$T/mnt/img" --name=skip --skip-unreadable >/dev/null 2>"$T/b.err" || { cat "$T/b.err" >&2; die "backup --skip-unreadable failed"; }
grep -q "^warning: .* of '$T/mnt/img' did not read ([0-9]* ranges): stored as zeroes, listed by 'blkvault info'$" "$T/b.err" || { cat "$T/b.err" >&2; die "no warning of the unreadable ranges"; }
bv info "$repo" skip --json > "$T/info.json"
# the expected image: the original with every unreadable range zeroed
python3 - "$T/info.json" "$T/img" "$T/expected" "$T/ranges" <<'EOF'
import json, shutil, sys
info = json.load(open(sys.argv[1]))
ranges = info["unreadable"]
assert ranges, "no unreadable ranges recorded"
shutil.copyfile(sys.argv[2], sys.argv[3])
with open(sys.argv[3], "r+b") as f, open(sys.argv[4], "w") as out:
    end = 0
    for r in ranges:
        assert r["offset"] >= end and r["offset"] % 4096 == 0 and r["length"] > 0, r
        f.seek(r["offset"]); f.write(bytes(r["length"]))
        end = r["offset"] + r["length"]
        out.write("bytes %d-%d\n" % (r["offset"], end - 1))
EOF
n=$(wc -l < "$T/ranges")
bv info "$repo" skip > "$T/info.txt"
assert_eq "$(grep -c "^unreadable   bytes [0-9]*-[0-9]* (.*) did not read at backup: restored as zeroes$" "$T/info.txt")" "$n" "ranges listed by info"
head -1 "$T/ranges" | while read -r _ r; do grep -q "^unreadable   bytes $r " "$T/info.txt" || die "info does not list $r"; done
bv verify "$repo" skip --read-data >/dev/null 2>"$T/v.err" || { cat "$T/v.err" >&2; die "verify of the snapshot"; }
assert_eq "$(grep -c "^note: snapshot [0-9a-f]\{8\}: bytes [0-9]*-[0-9]* (.*) did not read at backup: restored as zeroes$" "$T/v.err")" "$n" "ranges listed by verify"
bv restore "$repo" skip "$T/out" >/dev/null
assert_same "$T/expected" "$T/out"
# and once the source reads again, a backup is whole
rm "$T/trigger"
bv backup "$repo" "$T/mnt/img" --name=whole --force-read >/dev/null 2>"$T/b.err"
grep -q "did not read" "$T/b.err" && die "a whole read still reports unreadable ranges"
bv restore "$repo" whole "$T/out2" >/dev/null
assert_same "$T/img" "$T/out2"
# the same name again, unchanged file but no --force-read: blocks that did not read are never
# reused unread (that snapshot would restore zeroes and list nothing): read, and whole
bv backup "$repo" "$T/mnt/img" --name=skip --json >"$T/again.json" 2>"$T/b.err" || { cat "$T/b.err" >&2; die "backup again"; }
grep -q '"reused_from"' "$T/again.json" && { cat "$T/again.json" >&2; die "reused a snapshot with unreadable ranges"; }
bv restore "$repo" skip "$T/out3" >/dev/null
assert_same "$T/img" "$T/out3"
echo "ok: EIO named at offset 0; $n unreadable ranges recorded, restored as zeroes"
