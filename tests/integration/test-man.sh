#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# blkvault(1) renders at 80 columns without a warning from man/groff (issue 12), and names every
# exit code of the table in src/cli/cli.h.
. "$SOURCE_ROOT/tests/lib.sh"
need_cmd man
page=$SOURCE_ROOT/docs/man/blkvault.1
MANWIDTH=80 man --warnings -l "$page" >"$T/out" 2>"$T/err" || die "man -l failed: $(cat "$T/err")"
[ ! -s "$T/err" ] || { cat "$T/err"; die "man --warnings printed warnings"; }
for code in $(sed -n 's/^ *EXIT_[A-Z_]* = \([0-9]*\),.*/\1/p' "$SOURCE_ROOT/src/cli/cli.h"); do
    grep -q "^\.B $code$" "$page" || die "EXIT STATUS lacks code $code"
done
echo ok
