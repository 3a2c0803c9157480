#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault(1) and blkvault.conf(5) render at 80 columns without a warning from man/groff (issue
# 12); blkvault(1) names every exit code of the table in src/cli/cli.h, blkvault.conf(5) every
# key of every section the configuration parser knows (src/lib/target/conf-sections.c).
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd man
page=$SOURCE_ROOT/docs/man/blkvault.1
MANWIDTH=80 man --warnings -l "$page" >"$T/out" 2>"$T/err" || die "man -l failed: $(cat "$T/err")"
[ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings"; }
for code in $(sed -n 's/^ *EXIT_[A-Z_]* = \([0-9]*\),.*/\1/p' "$SOURCE_ROOT/src/cli/cli.h"); do
    grep -q "^\.B $code$" "$page" || die "EXIT STATUS lacks code $code"
done
conf=$SOURCE_ROOT/docs/man/blkvault.conf.5
MANWIDTH=80 man --warnings -l "$conf" >"$T/out" 2>"$T/err" || die "man -l failed: $(cat "$T/err")"
[ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings for blkvault.conf(5)"; }
keys=$(sed -n '/_keys\[\] = {/,/};/p' "$SOURCE_ROOT/src/lib/target/conf-sections.c" | grep -o '"[a-z-]*"' | tr -d '"')
[ "$(echo "$keys" | wc -l)" -gt 30 ] || die "found only $(echo "$keys" | wc -l) configuration keys in conf-sections.c"
for key in $keys; do
    grep -q -- "${key//-/\\\\-}" "$conf" || die "blkvault.conf(5) does not describe the key $key"
done
for section in '\[global\]' '\[target NAME\]' '\[job NAME\]' '\[export NAME\]'; do
    grep -q "^\.SH $section$" "$conf" || die "blkvault.conf(5) has no section $section"
done
echo ok
