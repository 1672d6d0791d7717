#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The banned calls of the project's style (docs/internals/checks.md): none of
# them is called anywhere in src/ or include/, outside comments and string
# literals. Prints one file:line per use; exits 1 when there is any.
import re
import sys

sys.dont_write_bytecode = True  # no cache files beside the scripts
import csrc

BANNED = ("strcpy strcat sprintf vsprintf gets strtok atoi atol atof system popen "
          "alloca").split()
# A name of the list followed by "(", not part of a longer name (snprintf,
# strtok_r, fgets, a struct member .system or ->system).
CALL = re.compile(r"(?<![\w.>])(" + "|".join(BANNED) + r")\s*\(")
WHY = {
    "strcpy": "str_copy or memcpy with a checked length",
    "strcat": "a struct buf",
    "sprintf": "snprintf or buf_printf",
    "vsprintf": "vsnprintf or buf_vprintf",
    "gets": "fgets or a bounded read",
    "strtok": "strtok_r or an explicit scan",
    "atoi": "the range-checked parsers of nvl72/parse.h",
    "atol": "the range-checked parsers of nvl72/parse.h",
    "atof": "the range-checked parsers of nvl72/parse.h",
    "system": "the host layer's exec with a deadline, without a shell",
    "popen": "the host layer's exec with a deadline, without a shell",
    "alloca": "a fixed array or the heap",
}


def main():
    problems = []
    files = csrc.c_files("src", "include")
    for path in files:
        text = csrc.blank(csrc.read(path), strings=True)
        for m in CALL.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            name = m.group(1)
            problems.append(f"{path}:{line}: {name}() is banned; use {WHY[name]}")
    for p in problems:
        print(p)
    print(f"banned: {len(problems)} use(s) in {len(files)} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
