# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by the tests of blkvault files (test-files*.sh): the mounted tree as files prints it, and
# a tree copied out by files get compared with the mounted one. Sourced after tests/lib.sh.

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

expected_ls() { # the mounted directory $1 as files ls prints it
    python3 - "$1" <<'PY'
import os, stat, sys, time
d = sys.argv[1]
for name in sorted(os.listdir(d), key=os.fsencode):
    p = os.path.join(d, name)
    st = os.lstat(p)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(st.st_mtime))
    link = " -> " + os.readlink(p) if stat.S_ISLNK(st.st_mode) else ""
    print("%s %5u %5u %12u %s %s%s" % (stat.filemode(st.st_mode), st.st_uid, st.st_gid, st.st_size, when, name, link))
PY
}

# compare_tree SRC DST OWNERS [MIN [UMASK]]: content, type, mode (SRC's with UMASK applied, octal),
# mtime (and owner with OWNERS=yes) of every entry but lost+found; fails on a difference or when
# fewer than MIN entries were compared.
compare_tree() {
    python3 - "$1" "$2" "$3" "${4:-1}" "${5:-0}" <<'PY'
import os, stat, sys, filecmp
src, dst, owners, least, umask = sys.argv[1], sys.argv[2], sys.argv[3] == "yes", int(sys.argv[4]), int(sys.argv[5], 8)
bad = n = 0
for root, dirs, files in os.walk(src):
    for name in dirs + files:
        a = os.path.join(root, name)
        b = os.path.join(dst, os.path.relpath(a, src))
        if name == "lost+found":
            continue
        sa, sb = os.lstat(a), os.lstat(b)
        why = []
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode): why.append("type")
        if not stat.S_ISLNK(sa.st_mode) and sa.st_mode & ~umask != sb.st_mode: why.append("mode %o %o" % (sa.st_mode & ~umask, sb.st_mode))
        if sa.st_mtime_ns != sb.st_mtime_ns: why.append("mtime %d %d" % (sa.st_mtime_ns, sb.st_mtime_ns))
        if owners and (sa.st_uid, sa.st_gid) != (sb.st_uid, sb.st_gid): why.append("owner")
        if stat.S_ISLNK(sa.st_mode) and os.readlink(a) != os.readlink(b): why.append("target")
        if stat.S_ISREG(sa.st_mode) and not filecmp.cmp(a, b, shallow=False): why.append("content")
        n += 1
        if why:
            print("%s: %s" % (b, ", ".join(why))); bad += 1
if n < least:
    print("only %d entries compared" % n)
sys.exit(1 if bad or n < least else 0)
PY
}

# check_damage SNAP DIR SUB ODD: flips a byte in the middle of each pack listed in $T/big-packs
# (those of the file p1:DIR/SUB/big.bin), then checks that cat and get of p1:DIR name the damaged
# file, exit 4, leave no half-written copy and still copy small.bin and ODD beside it, as
# $T/out/all/DIR holds them. Needs files() and $repo.
check_damage() {
    local snap=$1 dir=$2 sub=$3 odd=$4 p size rc
    while read -r p; do
        size=$(stat -c %s "$repo/$p")
        flip_byte "$repo/$p" $((size / 2))
    done <"$T/big-packs"
    rc=0
    files "$snap" cat "p1:$dir/$sub/big.bin" >/dev/null 2>"$T/cat.err" || rc=$?
    assert_eq "$rc" 4 "exit status of cat of a damaged file"
    grep -Eq "^error: cannot read 'p1:$dir/$sub/big.bin': damaged data at offset [0-9]+ of the snapshot: Bad message$" "$T/cat.err" ||
        { cat "$T/cat.err" >&2; die "cat of a damaged file did not name it"; }
    files "$snap" cat "p1:$dir/$sub/small.bin" | cmp - "$T/out/all$dir/$sub/small.bin" || die "an undamaged file beside a damaged one"
    rc=0
    files "$snap" get "p1:$dir" "$T/out/damaged" 2>"$T/get.err" || rc=$?
    assert_eq "$rc" 4 "exit status of get with a damaged file"
    grep -q "^error: cannot read 'p1:$dir/$sub/big.bin': damaged data" "$T/get.err" ||
        { cat "$T/get.err" >&2; die "get did not name the damaged file"; }
    [ ! -e "$T/out/damaged/$sub/big.bin" ] || die "the damaged file was left half-written"
    cmp "$T/out/damaged/$sub/small.bin" "$T/out/all$dir/$sub/small.bin" || die "get skipped the undamaged files"
    cmp "$T/out/damaged/$sub/$odd" "$T/out/all$dir/$sub/$odd" || die "get stopped at the damaged file"
}
