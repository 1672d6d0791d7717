#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The layer rule: a file of src/ includes only headers of its own module or of
# a lower tier of tests/lint/layers.conf, a quoted local include names a file
# of the same folder, and the public headers follow the same order. Prints
# one file:line per problem; exits 1 when there is any.
import os
import re
import sys

sys.dont_write_bytecode = True  # no cache files beside the scripts
import csrc

CONF = "tests/lint/layers.conf"
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]*)[">]', re.M)


def load_conf():
    tier, header, problems = {}, {}, []
    for no, line in enumerate(csrc.read(CONF).splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] == "tier" and len(words) > 1:
            rank = len(set(tier.values()))
            for m in words[1:]:
                tier[m] = rank
        elif words[0] == "header" and len(words) == 3:
            header[words[1]] = (words[2], no)
        else:
            problems.append(f"{CONF}:{no}: expected 'tier MODULE...' or 'header NAME MODULE'")
    for name, (mod, no) in sorted(header.items()):
        if mod not in tier:
            problems.append(f"{CONF}:{no}: header {name} belongs to {mod}, which is in no tier")
    return tier, header, problems


def main():
    tier, header, problems = load_conf()

    def where(path, text, pos):
        return f"{path}:{text.count(chr(10), 0, pos) + 1}"

    def judge(loc, own, target, what):
        """own includes a header of module target."""
        if target == own:
            return
        if tier[target] == tier[own]:
            problems.append(f"{loc}: {what} is of {target}, a peer of {own} in one tier: "
                            f"peers may not include each other")
        elif tier[target] > tier[own]:
            problems.append(f"{loc}: {what} is of {target}, above {own} in the layer "
                            f"order of {CONF}")

    def public(loc, own, name, spelled):
        """A public header include/nvl72/<name>.h included by module own."""
        base = name[:-2] if name.endswith(".h") else name
        if base not in header or not name.endswith(".h"):
            problems.append(f"{loc}: {spelled} is not a header placed in {CONF}")
            return
        judge(loc, own, header[base][0], spelled)

    # Every public header is placed, and every placed one exists.
    present = {f[:-2] for f in os.listdir(os.path.join(csrc.ROOT, "include/nvl72"))
               if f.endswith(".h")}
    for name in sorted(present - header.keys()):
        problems.append(f"include/nvl72/{name}.h:1: not placed in {CONF} "
                        f"(add a 'header {name} MODULE' line)")
    for name in sorted(header.keys() - present):
        problems.append(f"{CONF}:{header[name][1]}: include/nvl72/{name}.h does not exist")

    # Every folder of src/ is a module with a tier.
    for d in sorted(os.listdir(os.path.join(csrc.ROOT, "src"))):
        if os.path.isdir(os.path.join(csrc.ROOT, "src", d)) and d not in tier:
            problems.append(f"{CONF}:1: src/{d}/ is in no tier (add it to a 'tier' line)")

    for path in csrc.c_files("src"):
        own = path.split("/")[1]
        if own not in tier:
            continue
        text = csrc.blank(csrc.read(path))
        folder = os.path.dirname(path)
        for m in INCLUDE.finditer(text):
            loc, quote, name = where(path, text, m.start()), m.group(1), m.group(2)
            spelled = f"{quote}{name}{'>' if quote == '<' else quote}"
            if name.startswith("nvl72/") and "/" not in name[6:]:
                public(loc, own, name[6:], spelled)
            elif quote == "<":
                continue
            elif "/" in name or name.startswith("."):
                problems.append(f"{loc}: {spelled} reaches out of {folder}/: a quoted "
                                f"include names a file of the same folder or \"nvl72/X.h\"")
            elif not os.path.isfile(os.path.join(csrc.ROOT, folder, name)):
                problems.append(f"{loc}: {spelled} is not a file of {folder}/")

    for path in csrc.c_files("include/nvl72"):
        base = os.path.basename(path)[:-2]
        if base not in header:
            continue
        own = header[base][0]
        text = csrc.blank(csrc.read(path))
        for m in INCLUDE.finditer(text):
            loc, quote, name = where(path, text, m.start()), m.group(1), m.group(2)
            spelled = f"{quote}{name}{'>' if quote == '<' else quote}"
            if name.startswith("nvl72/") and "/" not in name[6:]:
                public(loc, own, name[6:], spelled)
            elif quote == '"' and "/" not in name:
                public(loc, own, name, spelled)
            elif quote == '"':
                problems.append(f"{loc}: {spelled}: a public header includes only "
                                f"\"nvl72/X.h\" and system headers")

    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s) in {len(csrc.c_files('src', 'include'))} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
