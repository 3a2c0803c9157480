#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cli-options.py SOURCE_ROOT: every long option of every command, from the code: each
command's cli_parse call (CLI_PARSE_OR_RETURN) in src/cli/*.c (cmd-NAME.c, and serve-export.c for
serve --export), with its CliOption table (CLI_FLAG("name", ...), { .name = "name", ... }), the
secret options when it passes .secret (SECRET_OPTIONS in cli.h), and --help with COMMON_OPTIONS,
which cli_parse gives every command.
Prints "COMMAND OPTION" lines (OPTION without its dashes). With --shared it prints "MACRO OPTION"
for the options the macros add instead."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
header = (root / "src/cli/cli.h").read_text()
macros = {}
for name in ("SECRET_OPTIONS", "COMMON_OPTIONS"):
    m = re.search(r"#define %s((?:.*\\\n)*.*)" % name, header)
    macros[name] = re.findall(r'\{ "([a-z][a-z0-9-]*)",', m.group(1))
if "--shared" in sys.argv:
    for name, opts in macros.items():
        for o in opts:
            print(name, o)
    sys.exit(0)

pairs = set()
for path in sorted((root / "src/cli").glob("*.c")):
    text = path.read_text()
    for call in re.finditer(r"(?:CLI_PARSE_OR_RETURN\([^,]*, [^,]*,|cli_parse\(&\(CliCommand\)\{)(.*?);", text, re.S):
        args = call.group(1)
        cmd = re.search(r'\.name = "([a-z]+)"', args).group(1)
        opts = ["help"] + macros["COMMON_OPTIONS"]
        if ".secret =" in args:
            opts += macros["SECRET_OPTIONS"]
        if ".options = options" in args:
            tables = list(re.finditer(r"const CliOption options\[\] = \{(.*?)\};", text[: call.start()], re.S))
            opts += re.findall(r'(?:CLI_[A-Z]+\(|\.name = )"([a-z][a-z0-9-]*)"', tables[-1].group(1))
        for o in opts:
            pairs.add((cmd, o))
for cmd, o in sorted(pairs):
    print(cmd, o)
