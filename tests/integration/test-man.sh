#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault(1), a page per command (blkvault-COMMAND(1)), blkvault.conf(5) and blkvault-json(7)
# render at 80 columns without a warning from man/groff (issue 12); blkvault(1) names every exit
# code of the table in src/cli/cli.h, every environment variable the code reads and every
# command's page; every long option of every command (taken from the code's getopt tables by
# tests/cli-options.py) is described: a command's own options in its page, -q/-v/-h under "Every
# command" and the secret options under SECRETS in blkvault(1); and each command's --help lists
# each of its options. blkvault.conf(5) describes every key of every section the configuration parser knows
# (src/lib/target/conf-sections.c).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd man python3
page=$SOURCE_ROOT/docs/man/blkvault.1
MANWIDTH=80 man --warnings -l "$page" >"$T/out" 2>"$T/err" || die "man -l failed: $(cat "$T/err")"
[ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings"; }
for code in $(sed -n 's/^ *EXIT_[A-Z_]* = \([0-9]*\),.*/\1/p' "$SOURCE_ROOT/src/cli/cli.h"); do
    grep -q "^\.B $code$" "$page" || die "EXIT STATUS lacks code $code"
done

# section NAME / subsection NAME: the roff source of .SH NAME / .SS NAME up to the next heading,
# with \- as -
section() { awk -v h=".SH $1" '$0 == h {on = 1; next} /^\.SH / {on = 0} on' "$page" | sed 's/\\-/-/g'; }
subsection() {
    awk -v h=".SS $1" '$0 == h {on = 1; next} /^\.S[HS] / {on = 0} on' "$page" | sed 's/\\-/-/g'
}
# command_page CMD: blkvault-CMD(1) up to its SEE ALSO, with \- as -
command_page() { awk '/^\.SH SEE ALSO/ {exit} {print}' "$SOURCE_ROOT/docs/man/blkvault-$1.1" | sed 's/\\-/-/g'; }

# a page per command (blkvault --help lists the commands), each rendering cleanly, each named in
# blkvault(1) and installed by docs/meson.build
cmds=$(bv --help | sed -n 's/^  \([a-z]*\)  .*/\1/p')
[ "$(echo "$cmds" | wc -w)" -gt 15 ] || die "found too few commands in blkvault --help: $cmds"
for cmd in $cmds; do
    cpage=$SOURCE_ROOT/docs/man/blkvault-$cmd.1
    [ -f "$cpage" ] || die "no page docs/man/blkvault-$cmd.1 for the command $cmd"
    MANWIDTH=80 man --warnings -l "$cpage" >"$T/out" 2>"$T/err" || die "man -l $cpage failed: $(cat "$T/err")"
    [ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings for blkvault-$cmd(1)"; }
    grep -qF "blkvault\\-$cmd \\- " "$cpage" || die "blkvault-$cmd(1) has no NAME line"
    grep -qxF -e ".BR blkvault\\-$cmd (1)," -e ".BR blkvault\\-$cmd (1)" "$page" || die "blkvault(1) does not name blkvault-$cmd(1)"
    grep -q "'man/blkvault-$cmd.1'" "$SOURCE_ROOT/docs/meson.build" || die "docs/meson.build does not install blkvault-$cmd.1"
done
# the environment variables the command, the library and the plugin read
for v in $(grep -rhoE 'getenv\("BLKVAULT_[A-Z_]+"\)|define BV_CONF_ENV "BLKVAULT_[A-Z_]+"|"BLKVAULT_[A-Z_]*PASSPHRASE"' \
               "$SOURCE_ROOT/src" "$SOURCE_ROOT/nbd-plugin" | grep -oE 'BLKVAULT_[A-Z_]+' | sort -u); do
    section ENVIRONMENT | grep_q -x "\.B $v" || die "ENVIRONMENT lacks $v"
done

python3 "$SOURCE_ROOT/tests/cli-options.py" "$SOURCE_ROOT" --shared >"$T/shared"
python3 "$SOURCE_ROOT/tests/cli-options.py" "$SOURCE_ROOT" >"$T/options"
[ "$(wc -l <"$T/options")" -gt 60 ] || die "cli-options.py found too few options: $(wc -l <"$T/options")"
section SECRETS >"$T/secrets"
subsection "Every command" >"$T/every"
checked=0 last=
while read -r cmd opt; do
    if [ "$cmd" != "$last" ]; then
        bv help "$cmd" >"$T/help" || die "'blkvault help $cmd' failed"
        command_page "$cmd" >"$T/sub"
        last=$cmd
    fi
    grep -qE -- "--$opt([=, ]|\$)" "$T/help" || die "'blkvault help $cmd' does not list --$opt"
    if grep -qx "SECRET_OPTIONS $opt" "$T/shared"; then
        where=SECRETS file=$T/secrets
    elif grep -qx "COMMON_OPTIONS $opt" "$T/shared" || [ "$opt" = help ]; then
        where="Every command" file=$T/every
    else
        where="blkvault-$cmd(1)" file=$T/sub
    fi
    grep -qE -- "--$opt([= \"]|\$)" "$file" || die "the man pages do not describe $cmd's --$opt (under $where)"
    checked=$((checked + 1))
done <"$T/options"

conf=$SOURCE_ROOT/docs/man/blkvault.conf.5
MANWIDTH=80 man --warnings -l "$conf" >"$T/out" 2>"$T/err" || die "man -l failed: $(cat "$T/err")"
[ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings for blkvault.conf(5)"; }
keys=$(sed -n '/_keys\[\] = {/,/};/p' "$SOURCE_ROOT/src/lib/target/conf-sections.c" | grep -o '"[a-z-]*"' | tr -d '"')
[ "$(echo "$keys" | wc -l)" -gt 30 ] || die "found only $(echo "$keys" | wc -l) configuration keys in conf-sections.c"
for key in $keys; do
    grep -q -- "${key//-/\\\\-}" "$conf" || die "blkvault.conf(5) does not describe the key $key"
done
for section in '\[global\]' '\[target NAME\]' '\[job NAME\]' '\[export NAME\]' '\[remote NAME\]'; do
    grep -q "^\.SH $section$" "$conf" || die "blkvault.conf(5) has no section $section"
done
json=$SOURCE_ROOT/docs/man/blkvault-json.7
MANWIDTH=80 man --warnings -l "$json" >"$T/out" 2>"$T/err" || die "man -l failed: $(cat "$T/err")"
[ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings for blkvault-json(7)"; }
grep -q '^\.SH JSON OUTPUT$' "$page" && grep -q 'blkvault-json (7)' "$page" || die "blkvault(1) does not point at blkvault-json(7)"
echo "ok: $checked options of $(cut -d' ' -f1 "$T/options" | sort -u | wc -l) commands"
