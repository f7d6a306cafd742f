#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The source's shape, checked (make check-shape, part of make test):

- the map is true: every file of src/ and cli/ is named in
  docs/hacking.md's source table, and every .c file of a layer in the
  file list at the top of that layer's own header (interposer.h);
- functions are short: none in src/ is over 120 lines, and one over 80
  says why it is one piece in its header comment (the words "one piece");
- atomics say their order: no atomic_load/store/exchange/fetch_*/
  compare_exchange_* without _explicit in src/ (docs/hacking.md).
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LONG, MAX = 80, 120
LISTS = {"src/interposer": "src/interposer/interposer.h"}


def sources(*dirs):
    for d in dirs:
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            if name.endswith((".c", ".h", ".def")):
                yield f"{d}/{name}"


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r"//.*", "", line)


def functions(path):
    """(name, first line, length, header comment) of each function."""
    lines = open(os.path.join(ROOT, path)).read().split("\n")
    depth, start, out = 0, None, []
    in_comment = False
    for i, raw in enumerate(lines):
        line = strip(raw)
        # block comments never hold code that counts
        if in_comment:
            if "*/" not in line:
                continue
            line, in_comment = line.split("*/", 1)[1], False
        line = re.sub(r"/\*.*?\*/", "", line)
        if "/*" in line:
            line, in_comment = line.split("/*", 1)[0], True
        if depth == 0 and line.startswith("{"):
            j = i - 1
            while j >= 0 and "(" not in lines[j]:
                j -= 1
            m = re.search(r"(\w+)\s*\(", lines[j]) if j >= 0 else None
            k = j - 1
            while k >= 0 and lines[k].strip() and not lines[k].rstrip().endswith("*/"):
                k -= 1
            header = []
            if k >= 0 and lines[k].rstrip().endswith("*/"):
                while k >= 0:
                    header.insert(0, lines[k])
                    if "/*" in lines[k]:
                        break
                    k -= 1
            text = re.sub(r"[\s*/]+", " ", " ".join(header)).lower()
            start = (m.group(1) if m else "?", i, text)
        depth += line.count("{") - line.count("}")
        if depth == 0 and start and "}" in line:
            out.append((start[0], start[1] + 1, i - start[1] + 1, start[2]))
            start = None
    return out


def main():
    bad = []
    table = open(os.path.join(ROOT, "docs/hacking.md")).read()
    for f in list(sources("src/core", "src/rundir", "src/interposer", "cli")):
        if f"`{f}`" not in table and not re.search(rf"`{re.escape(f)}`|`{re.escape(os.path.basename(f))}`", table):
            bad.append(f"{f}: not in docs/hacking.md's source table")
    for d, header in LISTS.items():
        text = open(os.path.join(ROOT, header)).read().split("#ifndef")[0]
        for f in sources(d):
            if f.endswith(".c") and not re.search(rf"\b{re.escape(os.path.basename(f))}\b", text):
                bad.append(f"{f}: not in the file list of {header}")
    for f in sources("src/core", "src/rundir", "src/interposer"):
        if not f.endswith(".c"):
            continue
        for name, line, n, header in functions(f):
            if n > MAX:
                bad.append(f"{f}:{line}: {name} is {n} lines (at most {MAX})")
            elif n > LONG and "one piece" not in header:
                bad.append(f"{f}:{line}: {name} is {n} lines: over {LONG}, its header "
                           f"comment should say why it is one piece")
    implicit = re.compile(r"\batomic_(load|store|exchange|fetch_[a-z]+|compare_exchange_[a-z]+)\(")
    for f in sources("src/core", "src/rundir", "src/interposer"):
        for n, line in enumerate(open(os.path.join(ROOT, f)), 1):
            if implicit.search(strip(line)):
                bad.append(f"{f}:{n}: an atomic without its order (atomic_*_explicit)")
    for b in bad:
        print(f"check-shape: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
