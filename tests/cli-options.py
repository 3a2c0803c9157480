#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cli-options.py SOURCE_ROOT: every long option of every command, from the code: the getopt
tables (`static const struct option options[]`) of src/cli/cmd-*.c with SECRET_OPTIONS and
COMMON_OPTIONS expanded from cli.h. Prints "COMMAND OPTION" lines (OPTION without its dashes);
a table belongs to the cmd_NAME function it is in, else to the file's command. With --shared
it prints "MACRO OPTION" for the options the macros add instead."""
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
for path in sorted((root / "src/cli").glob("cmd-*.c")):
    text = path.read_text()
    for m in re.finditer(r"static const struct option options\[\] = \{(.*?)\n\s*\};", text, re.S):
        funcs = re.findall(r"^(?:static )?int (\w+)\(", text[: m.start()], re.M)
        func = funcs[-1] if funcs else ""
        cmd = func[4:] if func.startswith("cmd_") else path.stem[4:]
        body = m.group(1)
        opts = re.findall(r'\{ "([a-z][a-z0-9-]*)",', body)
        for name, extra in macros.items():
            if name in body:
                opts += extra
        for o in opts:
            pairs.add((cmd, o))
for cmd, o in sorted(pairs):
    print(cmd, o)
