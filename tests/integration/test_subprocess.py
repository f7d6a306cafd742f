# SPDX-License-Identifier: MIT
"""Python's subprocess between exchanges on an accelerated connection: its
child (vfork) closes every fd with close_range before the exec (close_fds,
the default), which must leave the parent's connection alone; and a child
given the connection (pass_fds) reads and answers on it, which switches it
back to TCP first.  Same output on kernel TCP and under shortcut run, and
the stats show where the bytes went."""
import os
import subprocess
import sys

from helpers import SHORTCUT, stats

PROG = r"""
import os, socket, subprocess, sys
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4)
port = ls.getsockname()[1]
pid = os.fork()
if pid == 0:
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"h"); assert c.recv(1) == b"H"
    subprocess.run(["true"], check=True)            # close_fds=True
    c.sendall(b"x" * 100)
    got = b""
    while len(got) < 100:
        d = c.recv(100 - len(got))
        if not d: break
        got += d
    print("client: echo", len(got), got == b"x" * 100, flush=True)
    if sys.argv[1] == "pass":
        # a child without the library answers on the connection itself
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        fd = c.fileno()
        subprocess.run([sys.executable, "-c",
                        "import socket,sys; s=socket.socket(fileno=int(sys.argv[1]));"
                        "b=s.recv(5); s.sendall(b.upper()); s.detach()", str(fd)],
                       pass_fds=[fd], env=env, check=True, timeout=20)
        print("client: the child answered", flush=True)
    c.close()
    os._exit(0)
s, _ = ls.accept()
assert s.recv(1) == b"h"; s.sendall(b"H")
got = b""
while len(got) < 100:
    d = s.recv(100 - len(got))
    if not d: break
    got += d
print("server: got", len(got), flush=True)
s.sendall(got)
if sys.argv[1] == "pass":
    s.sendall(b"hello")
    b = b""
    while len(b) < 5:
        d = s.recv(5 - len(b))
        if not d: break
        b += d
    print("server: the child said", b.decode(), flush=True)
print("server: then", s.recv(10), flush=True)
os.waitpid(pid, 0)
"""


def run(mode, tmp_path, under):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["SHORTCUT_RUNDIR"] = str(tmp_path)
    cmd = [sys.executable, "-c", PROG, mode]
    if under:
        cmd = [SHORTCUT, "run"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    st = None
    if under:
        st = stats(env)
    return sorted(r.stdout.splitlines()), st


def test_subprocess_close_fds_leaves_connection(tmp_path):
    want, _ = run("plain", tmp_path / "k", False)
    got, st = run("plain", tmp_path / "s", True)
    assert got == want
    assert st["conns_accelerated"] == 2 and st["conns_switched_to_tcp"] == 0, st
    assert st["bytes_tcp_sent"] == 0, st


def test_subprocess_pass_fds_switches(tmp_path):
    want, _ = run("pass", tmp_path / "k", False)
    got, st = run("pass", tmp_path / "s", True)
    assert got == want
    assert "server: the child said HELLO" in got
    assert st["conns_accelerated"] == 2 and st["conns_switched_to_tcp"] == 2, st
