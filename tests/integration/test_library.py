# SPDX-License-Identifier: MIT
"""Invariants of the built interposer itself.

The library exports syscall() (it acts on io_uring_setup, execve and close
made through it), so its own system calls must be made with the
instruction (src/core/rawsys.h): one that went through the exported symbol
would take the interposer's locks from inside the library (memaslap hung
that way).  The calls the interposer defines are listed once
(src/interposer/calls.h): the exports and docs/calls.md follow from it,
and libc has every one of them."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from helpers import LIB, ROOT


def objdump(*args):
    if not shutil.which("objdump"):
        pytest.skip("objdump (binutils) missing")
    return subprocess.run(["objdump", *args, LIB], capture_output=True, text=True,
                          check=True).stdout


def test_no_internal_calls_to_exported_syscall():
    calls = [l for l in objdump("-d", "--no-show-raw-insn").splitlines()
             if re.search(r"call.*<syscall(@plt)?>", l)]
    assert not calls, "the library calls its own syscall():\n" + "\n".join(calls[:10])


def calls():
    """(name, file) of every call in calls.h, through the preprocessor."""
    src = '#include "calls.h"\n#define X(f, file) f file\n#define XT(f, file, t) f file\nSC_CALLS(X, XT)\n'
    out = subprocess.run(["cc", "-E", "-P", "-I" + os.path.join(ROOT, "src", "interposer"), "-"],
                         input=src, capture_output=True, text=True, check=True).stdout.split()
    return list(zip(out[0::2], out[1::2]))


def test_exports_are_the_call_list():
    """The exports are exactly calls.h's names, in the base version, and the
    public sc_* API, in the version node SHORTCUT_<major> of the version
    script: a named node on recv would stop the loader from binding a
    program's recv@GLIBC_2.2.5 to it (test_install.py runs that)."""
    names = {n for n, _ in calls()}
    with open(os.path.join(ROOT, "VERSION")) as f:
        node = "SHORTCUT_" + f.read().strip().split(".")[0]
    with open(os.path.join(ROOT, "build", "libshortcut.map")) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    assert re.match(r"\s*%s\s*\{" % node, text), text
    glob = text.split("global:")[1].split("}")[0]
    assert "local:" not in text, "local: * would hide the calls (they are in no node)"
    assert {n.strip() for n in glob.split(";") if n.strip()} == {"sc_*"}, glob
    dyn = objdump("-T")
    version = {}
    for l in dyn.splitlines():
        parts = l.split()
        if len(parts) >= 7 and parts[2] == "DF" and parts[3] != "*UND*":
            version[parts[-1]] = parts[-2]
    exported = set(version)
    for n in ("syscall", "system", "popen", "close_range", "closefrom", "close", "execve"):
        assert n in names and n in exported, n
    assert not names - exported, f"in calls.h but not exported: {sorted(names - exported)}"
    extra = {n for n in exported if not n.startswith("sc_")} - names
    assert not extra, f"exported but not in calls.h: {sorted(extra)}"
    wrong = {n: v for n, v in version.items() if v != (node if n.startswith("sc_") else "Base")}
    assert not wrong, wrong
    assert {"sc_listen", "sc_send", "sc_recv", "sc_devmem_bind_rx"} <= exported
    for n, f in calls():
        assert os.path.exists(os.path.join(ROOT, "src", "interposer", f + ".c")), (n, f)


def test_every_call_resolves_in_libc():
    """The loader finds each real function with dlsym(RTLD_NEXT): libc must
    have it (liburing's, in the program when it uses io_uring, excepted)."""
    libc = ctypes.CDLL(None)
    missing = [n for n, _ in calls() if not n.startswith("io_uring_") and not hasattr(libc, n)]
    assert not missing, missing


def test_docs_table_is_current():
    """docs/calls.md is made from calls.h (make docs/calls.md)."""
    with open(os.path.join(ROOT, "docs", "calls.md")) as f:
        rows = [l for l in f.read().splitlines() if l.startswith("| `")]
    assert rows == ["| `%s` | `%s.c` |" % (n, f) for n, f in calls()], "make docs/calls.md"
