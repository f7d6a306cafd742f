# SPDX-License-Identifier: MIT
"""A program that makes its io_uring with the io_uring_setup system call
itself (no liburing, so no wrapped entry point) while it holds an
accelerated connection with echoed bytes it has not read: the ring reads
the kernel socket, so the connection must go back to TCP first, with every
byte (the unread ones too) arriving exact and in order, and a later
connection staying on TCP, as with liburing (test_switch.py)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHORTCUT = os.path.join(ROOT, "build", "shortcut")
SRC = os.path.join(ROOT, "tests", "integration", "programs", "uring_raw.c")

SERVER = r"""
import socket, sys, threading
ls = socket.socket()
ls.bind(("127.0.0.1", 0)); ls.listen(16)
print(ls.getsockname()[1], flush=True)
def echo(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"""

EXPECTED = [
    "plain echo of 20000 exact: yes",
    "ring recv of the unread 30000 exact: yes",
    "ring echo of 100000 bytes exact: yes",
    "second connection echoes: yes",
]


def run_pair(exe, env, prefix):
    """the echo server and the program, both under prefix (a list)"""
    srv = subprocess.Popen(prefix + [sys.executable, "-c", SERVER], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline())
        return subprocess.run(prefix + [str(exe), str(port)], capture_output=True, text=True,
                              env=env, timeout=60)
    finally:
        srv.kill()
        srv.wait()


def stats(env):
    r = subprocess.run([SHORTCUT, "stats", "--json"], capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_raw_io_uring_setup_switches_to_tcp(tmp_path):
    exe = tmp_path / "uring_raw"
    r = subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(exe), SRC],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    # kernel TCP first: the program itself is right
    r = run_pair(exe, env, [])
    if r.returncode == 2 and "unavailable" in r.stdout:
        pytest.skip("io_uring not available here")
    assert r.returncode == 0 and r.stdout.splitlines() == EXPECTED, r.stdout + r.stderr
    # then both under shortcut
    env["SHORTCUT_RUNDIR"] = str(tmp_path)
    r = run_pair(exe, env, [SHORTCUT, "run"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == EXPECTED, r.stdout
    st = stats(env)
    assert st["conns_accelerated"] == 2, st             # the first connection
    assert st["conns_switched_to_tcp"] == 2, st
    assert st["fallback"]["unsupported_option"] == 1, st
    assert st["bytes_shm_sent"] >= 100000, st           # the plain echo
