#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# [remote NAME] and copy-to in the appliance's configuration (blkvault.conf(5)): a right one is
# accepted (and counted), and each mistake is named as FILE:LINE: MESSAGE by `config check`
# (exit 1): an unknown remote in copy-to (of a job and of a target), a credentials file that its
# group or others can read (a secret only the copy, run as root, reads: not even group blkvault),
# a bad location, a remote without one, S3-only keys on a directory, a bad endpoint, rate and
# region, a bad object-lock, keep-* that keep nothing, an unknown key, a remote defined twice, and
# what this build cannot do yet (keep-* at an s3:// remote) refused rather than skipped.
# `remote copy` of a remote with a mistake, or of none, is refused; of one no target copies to,
# nothing is done.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd systemd-analyze
d=$T/etc
mkdir -p "$d"
chmod 0755 "$d" "$T"
umask 022
creds=$T/s3.credentials
printf '[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n' >"$creds"
chmod 0600 "$creds"
check() { bv config check --config="$d/blkvault.conf"; }

cat >"$d/blkvault.conf" <<CONF
[target usb-a]
uuid = 0b6c1b2a-1234-4321-abcd-0123456789ab
key-file = $creds
copy-to = home

[job vm]
source = /dev/vg0/vm
copy-to = offsite, home

[remote offsite]
location = s3://bv-offsite/site-a/
credentials = $creds
endpoint = https://s3.example.net:9000
region = eu-central-1
limit-upload = 20M
limit-download = 1G
max-age = 3d

[remote home]
location = /srv/offsite/
CONF
assert_eq "$(check)" "configuration ok: 1 target, 1 job, 0 exports, 2 remotes (1 file read)"

bad() { # LINE MESSAGE: the configuration fails at LINE with MESSAGE
    expect_fail 1 "^$d/blkvault.conf:$1: $2\$" check
}
sed -i 's/^copy-to = offsite, home$/copy-to = offsite, nowhere/' "$d/blkvault.conf"
bad 8 "\[job vm\]: unknown remote 'nowhere' in copy-to (no \[remote nowhere\])"
sed -i 's/^copy-to = offsite, nowhere$/copy-to = offsite/; s/^copy-to = home$/copy-to = vault/' "$d/blkvault.conf"
bad 4 "\[target usb-a\]: unknown remote 'vault' in copy-to (no \[remote vault\])"
sed -i 's/^copy-to = vault$/copy-to = home/' "$d/blkvault.conf"
check >/dev/null || die "the configuration is right again"

chmod 0640 "$creds"
bad 12 "'$creds': secret file has mode 0640: readable by others than its owner (chmod 0600 or 0400)"
chmod 0604 "$creds"
bad 12 "'$creds': secret file has mode 0604: readable by others than its owner (chmod 0600 or 0400)"
chmod 0600 "$creds"

set_key() { # KEY VALUE in [remote offsite]: its line replaced, or added after location
    if grep -q "^$1 = " "$d/blkvault.conf"; then
        sed -i "s|^$1 = .*|$1 = $2|" "$d/blkvault.conf"
    else
        sed -i "s|^location = s3://.*|&\n$1 = $2|" "$d/blkvault.conf"
    fi
}
cp "$d/blkvault.conf" "$T/good.conf"
for loc in "ftp://host/x" "s3://ab" "s3://Bad_Bucket/x" "s3://bucket//x" "relative/dir"; do
    cp "$T/good.conf" "$d/blkvault.conf"
    set_key location "$loc"
    bad 11 "invalid location '$loc' (expected s3://BUCKET\[/PREFIX\].*"
done
cp "$T/good.conf" "$d/blkvault.conf"
sed -i '/^location = s3:/d' "$d/blkvault.conf"
bad 10 "\[remote offsite\] has no location (s3://BUCKET\[/PREFIX\] or a directory)"
cp "$T/good.conf" "$d/blkvault.conf"
set_key endpoint "s3.example.net"
bad 13 "invalid endpoint 's3.example.net' (expected http://HOST\[:PORT\] or https://HOST\[:PORT\])"
cp "$T/good.conf" "$d/blkvault.conf"
set_key endpoint "https://s3.example.net/path"
bad 13 "invalid endpoint 'https://s3.example.net/path' .*"
cp "$T/good.conf" "$d/blkvault.conf"
set_key limit-upload 0
bad 15 "invalid rate '0' for limit-upload (bytes per second, with a K, M or G suffix: 20M)"
cp "$T/good.conf" "$d/blkvault.conf"
set_key region "EU_Central"
bad 14 "invalid region 'EU_Central' .*"
cp "$T/good.conf" "$d/blkvault.conf"
echo "region = eu-west-1" >>"$d/blkvault.conf"
bad 21 "\[remote home\]: credentials, endpoint, region and object-lock are for an s3:// location, not the directory '/srv/offsite'"
cp "$T/good.conf" "$d/blkvault.conf"
set_key object-lock 30d
check >/dev/null || die "object-lock at an s3:// remote refused: $(check 2>&1)"
set_key object-lock soon
bad 12 "invalid duration 'soon' for object-lock (expected a number and a unit: s, min, h, d or w, as in 7d)"
cp "$T/good.conf" "$d/blkvault.conf"
set_key keep-daily 7
check >/dev/null || die "keep-* at an s3:// remote refused (prune and gc run on S3): $(check 2>&1)"
cp "$T/good.conf" "$d/blkvault.conf"
printf 'keep-daily = 7\nkeep-within = 2w\n' >>"$d/blkvault.conf"
check >/dev/null || die "keep-* at a directory remote refused: $(check 2>&1)"
cp "$T/good.conf" "$d/blkvault.conf"
set_key keep-daily 0
bad 10 "\[remote offsite\]: its keep-\* rules keep nothing (all 0), .*"
cp "$T/good.conf" "$d/blkvault.conf"
set_key colour blue
bad 12 "unknown key 'colour' in \[remote offsite\]"
cp "$T/good.conf" "$d/blkvault.conf"
printf '[remote home]\nlocation = /srv/x\n' >>"$d/blkvault.conf"
bad 21 "\[remote home\] is defined twice (first at $d/blkvault.conf:19)"

# a remote with a mistake is not copied to; one that is not configured neither
cp "$T/good.conf" "$d/blkvault.conf"
ropts=(--config="$d/blkvault.conf" --run-dir="$T/run" --state-dir="$T/state")
chmod 0640 "$creds"
expect_fail 1 "^error: remote offsite is not copied to: its section has a mistake ($d/blkvault.conf:12: '$creds': secret file has mode 0640: .*)\$" \
    bv remote copy offsite "${ropts[@]}"
chmod 0600 "$creds"
expect_fail 1 "^error: no remote 'elsewhere' in the configuration (no \[remote elsewhere\])\$" \
    bv remote copy elsewhere "${ropts[@]}"
expect_fail 2 "^error: expected 'blkvault remote copy NAME' (see 'blkvault help remote')\$" bv remote sync offsite
# a remote no target copies to: nothing done, exit 0
sed -i '/^copy-to = /d' "$d/blkvault.conf"
assert_eq "$(bv remote copy offsite "${ropts[@]}")" \
    "remote offsite: no target copies to it (copy-to on a target or job); nothing done"
