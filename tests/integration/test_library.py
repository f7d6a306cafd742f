# SPDX-License-Identifier: MIT
"""Invariants of the built interposer itself.

The library exports syscall() (it acts on io_uring_setup, execve and close
made through it), so its own system calls must be made with the
instruction (src/rawsys.h): one that went through the exported symbol
would take the interposer's locks from inside the library (memaslap hung
that way).  Every export is one the version script lists."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIB = os.path.join(ROOT, "build", "libshortcut.so")


def objdump(*args):
    if not shutil.which("objdump"):
        pytest.skip("objdump (binutils) missing")
    return subprocess.run(["objdump", *args, LIB], capture_output=True, text=True,
                          check=True).stdout


def test_no_internal_calls_to_exported_syscall():
    calls = [l for l in objdump("-d", "--no-show-raw-insn").splitlines()
             if re.search(r"call.*<syscall(@plt)?>", l)]
    assert not calls, "the library calls its own syscall():\n" + "\n".join(calls[:10])


def test_exports_are_the_version_script():
    with open(os.path.join(ROOT, "src", "libshortcut.map")) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    glob = text.split("global:")[1].split("local:")[0]
    names = {n.strip() for n in glob.replace("\n", " ").split(";") if n.strip()}
    dyn = objdump("-T")
    exported = set()
    for l in dyn.splitlines():
        parts = l.split()
        if len(parts) >= 6 and ".text" in l:
            exported.add(parts[-1])
    for n in ("syscall", "system", "popen", "close_range", "closefrom", "close", "execve"):
        assert n in names and n in exported, n
    plain = {n for n in names if "*" not in n}
    missing = sorted(plain - exported)
    assert not missing, f"listed in libshortcut.map but not defined: {missing}"
