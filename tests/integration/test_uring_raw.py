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

from helpers import PROGRAMS, SHORTCUT, echo_server, stat, stats

SRC = os.path.join(PROGRAMS, "uring_raw.c")

SERVER = echo_server()

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


# A server that sets up its io_uring once it serves: a connection accepted
# and echoed before (accelerated), one accepted but not used yet, then the
# ring, then one accepted after.  Its ring may be all that uses a
# connection, so the one not used yet is decided at the set-up.
URING_SERVER = r"""
import ctypes, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
ls = socket.socket()
ls.bind(("127.0.0.1", 0)); ls.listen(16)
print(ls.getsockname()[1], flush=True)
a, _ = ls.accept()
a.sendall(a.recv(100))
b, _ = ls.accept()
print("accepted b", flush=True)
assert sys.stdin.readline() == "setup\n"
params = ctypes.create_string_buffer(120)          # struct io_uring_params
fd = libc.syscall(425, 8, params)                   # io_uring_setup
if fd < 0:
    print("unavailable", flush=True)
    sys.exit(2)
print("set up", flush=True)
c, _ = ls.accept()
print("accepted c", flush=True)
assert sys.stdin.readline() == "serve\n"
for s in (a, b, c):
    s.sendall(s.recv(100))
print("served", flush=True)
sys.stdin.readline()
"""

URING_CLIENT = r"""
import socket, sys
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port))
a.sendall(b"a\n")
assert a.recv(100) == b"a\n"
b = socket.create_connection(("127.0.0.1", port))
print("b connected", flush=True)
assert sys.stdin.readline() == "c\n"
c = socket.create_connection(("127.0.0.1", port))
print("c connected", flush=True)
assert sys.stdin.readline() == "talk\n"
ok = True
for s, m in ((a, b"A\n"), (b, b"B\n"), (c, b"C\n")):
    s.sendall(m)
    ok = ok and s.recv(100) == m
print("echoes exact:", ok, flush=True)
sys.stdin.readline()
"""


def test_server_io_uring_counts_its_connections(tmp_path):
    """MariaDB's shape: a server whose io_uring comes once it serves.  Its
    connections after the set-up stay on TCP, and say why, on its side:
    `shortcut stat` shows unsupported_option for the one accepted before
    the set-up but not used yet (decided at the set-up: the ring may be
    all that uses it) and for the one accepted after (was: no record and
    no count; only the clients' no_listener), switched_to_tcp for the
    accelerated one; `shortcut stats` counts both."""
    env = dict(os.environ)
    env["SHORTCUT_RUNDIR"] = str(tmp_path)

    def cmd(p, line):
        p.stdin.write(line + "\n")
        p.stdin.flush()

    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", URING_SERVER], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cli = None
    try:
        port = int(srv.stdout.readline())
        cli = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", URING_CLIENT, str(port)],
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert cli.stdout.readline() == "b connected\n"
        assert srv.stdout.readline() == "accepted b\n"
        cmd(srv, "setup")
        line = srv.stdout.readline()
        if line == "unavailable\n":
            pytest.skip("io_uring not available here")
        assert line == "set up\n"
        cmd(cli, "c")
        assert cli.stdout.readline() == "c connected\n"
        assert srv.stdout.readline() == "accepted c\n"

        mine = [c for c in stat(env)
                if c["local"] == "127.0.0.1:%d" % port]      # the server's side
        assert sorted(c["fallback"] for c in mine) == [
            "switched_to_tcp", "unsupported_option", "unsupported_option"], mine
        assert all(c["mode"] == "tcp" for c in mine), mine
        assert stats(env)["fallback"]["unsupported_option"] == 2

        cmd(srv, "serve")
        cmd(cli, "talk")
        assert cli.stdout.readline() == "echoes exact: True\n"
        assert srv.stdout.readline() == "served\n"
        st = stats(env)
        assert st["conns_accelerated"] == 2, st             # the first, both sides
        assert st["conns_switched_to_tcp"] == 2, st
        assert st["fallback"]["unsupported_option"] == 2, st
        assert st["fallback"]["no_listener"] == 1, st       # the last client
    finally:
        for p in (cli, srv):
            if p:
                p.kill()
                p.wait()


PENDING_SERVER = r"""
import socket, sys
ls = socket.socket()
ls.bind(("127.0.0.1", 0)); ls.listen(16)
print(ls.getsockname()[1], flush=True)
assert sys.stdin.readline() == "accept\n"
c, _ = ls.accept()
c.sendall(c.recv(100))
sys.stdin.readline()
"""

PENDING_CLIENT = r"""
import ctypes, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
params = ctypes.create_string_buffer(120)
if libc.syscall(425, 8, params) < 0:
    print("unavailable", flush=True)
    sys.exit(2)
print("set up", flush=True)
assert sys.stdin.readline() == "talk\n"
c.sendall(b"hello\n")
print("echo exact:", c.recv(100) == b"hello\n", flush=True)
sys.stdin.readline()
"""


def test_client_io_uring_while_connecting(tmp_path):
    """A client sets up its io_uring while its connection waits for the
    server's claim (the server has not accepted yet): the connection is
    decided at the set-up, on TCP with unsupported_option (was: it stayed
    pending until used, then claim_timeout), and its bytes arrive."""
    env = dict(os.environ)
    env["SHORTCUT_RUNDIR"] = str(tmp_path)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", PENDING_SERVER], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cli = None
    try:
        port = int(srv.stdout.readline())
        cli = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", PENDING_CLIENT,
                                str(port)], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        line = cli.stdout.readline()
        if line == "unavailable\n":
            pytest.skip("io_uring not available here")
        assert line == "set up\n"
        r = subprocess.run([SHORTCUT, "stat", "--json"], capture_output=True, text=True,
                           env=env, timeout=30)
        assert r.returncode == 0, r.stderr
        mine = [c for c in json.loads(r.stdout) if c["peer"] == "127.0.0.1:%d" % port]
        assert [(c["mode"], c["fallback"]) for c in mine] == [("tcp", "unsupported_option")], mine
        for p, line in ((srv, "accept"), (cli, "talk")):
            p.stdin.write(line + "\n")
            p.stdin.flush()
        assert cli.stdout.readline() == "echo exact: True\n"
        st = stats(env)
        assert st["conns_accelerated"] == 0, st
        assert st["fallback"]["unsupported_option"] == 1, st
    finally:
        for p in (cli, srv):
            if p:
                p.kill()
                p.wait()
