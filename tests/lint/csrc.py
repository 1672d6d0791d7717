# SPDX-License-Identifier: Apache-2.0
# What the lint checks share: the project's root, the C files of a tree, and
# a small lexer that blanks comments (and, when asked, the insides of string
# and character literals) while keeping every line where it was, so that a
# match still reports the right file:line.
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def c_files(*tops):
    """Every .c and .h under the given folders of the root, sorted."""
    out = []
    for top in tops:
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(base, f), ROOT))
    return out


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def blank(text, strings=False):
    """text with comments replaced by spaces; with strings=True also the
    contents of "..." and '...' literals. Newlines are kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            if strings:
                out.append(c + " " * max(j - i - 2, 0) + (text[j - 1] if j - i > 1 else ""))
            else:
                out.append(text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)
