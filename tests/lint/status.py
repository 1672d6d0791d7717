#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A shell status read too late (docs/internals/checks.md): in the test
# scripts, `$?` passed as a word of a command after a command substitution
# in an earlier word of that command, as in
#     check "name ($(count))" $? "detail"
# reads the status of the substitution, not of the command before it, so
# the check cannot fail. Prints one file:line per finding; exits 1 when there
# is any. Arithmetic `$((...))` sets no status and is fine.
import pathlib
import sys


def logical_lines(text):
    """(first line number, text) of each line joined across trailing \\."""
    out, buf, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        out.append((start, buf + line))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def late_status(line):
    """Whether a `$?` at nesting depth 0 follows a command substitution
    opened earlier at depth 0 within the same command."""
    depth, subst, quote = 0, False, None
    i = 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if c == "'" and quote is None:
            quote = "'"
        elif c == '"':
            quote = None if quote == '"' else '"'
        elif c == "#" and quote is None and depth == 0 and (i == 0 or line[i - 1] in " \t;"):
            return False  # a comment
        elif line.startswith("$((", i):
            depth += 2
            i += 3
            continue
        elif line.startswith("$(", i):
            if depth == 0:
                subst = True
            depth += 1
            i += 2
            continue
        elif c == "(":
            depth += 1 if depth > 0 else 0
        elif c == ")" and depth > 0:
            depth -= 1
        elif c in ";|&" and quote is None and depth == 0:
            subst = False  # a new command
        elif line.startswith("$?", i) and depth == 0 and subst:
            return True
        i += 1
    return False


def main():
    found = 0
    root = pathlib.Path(__file__).resolve().parents[2]
    for path in sorted(root.glob("tests/**/*.sh")) + sorted(root.glob(".ci/*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root)
        for n, line in logical_lines(path.read_text(encoding="utf-8", errors="replace")):
            if late_status(line):
                print("%s:%d: $? after a command substitution of the same command reads "
                      "the substitution's status; save it first (rc=$?)" % (rel, n))
                found += 1
    print("%d finding(s)" % found)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
