# SPDX-License-Identifier: MIT
"""Two network namespaces of one host joined by a veth pair (containers, as
SMC-D loopback serves them): both ends under `shortcut run`, sharing the run
directory, talk through shared memory; the bytes are exact."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from helpers import HANG, SHORTCUT, stats

SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9555)); s.listen(); print("ready", flush=True)
c, a = s.accept()
tot = 0
while True:
    d = c.recv(65536)
    if not d: break
    tot += len(d); c.sendall(d)
print("server got", tot, flush=True)
"""
CLIENT = r"""
import socket, os, hashlib
c = socket.create_connection(("10.77.0.2", 9555))
data = os.urandom(200 << 10); c.sendall(data); c.shutdown(socket.SHUT_WR)
got = bytearray()
while True:
    d = c.recv(65536)
    if not d: break
    got += d
print("client", hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest(), len(got))
"""


def sh(*args):
    subprocess.run(args, check=True, capture_output=True, timeout=30)


@pytest.fixture
def netns_pair():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 (ip netns)")
    a, b = f"sca{os.getpid()}", f"scb{os.getpid()}"
    va, vb = f"va{os.getpid() % 100000}", f"vb{os.getpid() % 100000}"
    try:
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb)
        sh("ip", "link", "set", va, "netns", a)
        sh("ip", "link", "set", vb, "netns", b)
        sh("ip", "-n", a, "addr", "add", "10.77.0.1/24", "dev", va)
        sh("ip", "-n", b, "addr", "add", "10.77.0.2/24", "dev", vb)
        for ns, dev in ((a, va), (b, vb)):
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        subprocess.run(["ip", "netns", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", b], capture_output=True)
        pytest.skip(f"network namespaces unavailable here: {e}")
    yield a, b
    subprocess.run(["ip", "netns", "del", a], capture_output=True)
    subprocess.run(["ip", "netns", "del", b], capture_output=True)


@pytest.mark.parametrize("accel_client", [True, False])
def test_veth_between_namespaces(netns_pair, accel_client, env):
    a, b = netns_pair
    srv = subprocess.Popen(["ip", "netns", "exec", b, SHORTCUT, "run", sys.executable, "-c", SERVER],
                           stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert srv.stdout.readline().strip() == "ready"
        pre = [SHORTCUT, "run"] if accel_client else []
        cli = subprocess.run(["ip", "netns", "exec", a] + pre + [sys.executable, "-c", CLIENT],
                             capture_output=True, text=True, env=env, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout.split() == ["client", "True", str(200 << 10)]
        out, _ = srv.communicate(timeout=30)
        assert out.strip() == f"server got {200 << 10}"
    finally:
        srv.kill()
    st = stats(env)
    if accel_client:
        # both ends on shared memory, every payload byte through it
        assert st["conns_accelerated"] == 2, st
        assert st["bytes_shm_sent"] == 2 * (200 << 10), st
        assert st["bytes_tcp_sent"] == 0, st
    else:
        # a plain client in the other namespace: the server stays on TCP
        assert st["conns_accelerated"] == 0, st
        assert st["fallback"]["peer_not_accelerated"] == 1, st


SHORT_SERVER = r"""
import socket, sys
n, size = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9556)); s.listen(64); print("ready", flush=True)
for _ in range(n):
    c, _ = s.accept()
    c.sendall(c.recv(100).upper().ljust(size, b"."))
    c.close()                           # the server closes first, as HTTP/1.0's
"""
SHORT_CLIENT = r"""
import socket, sys
n, size = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    c = socket.create_connection(("10.77.0.2", 9556))
    msg = b"request %d" % i
    c.sendall(msg)
    got = bytearray()
    while True:                         # to the server's end, then close
        d = c.recv(65536)
        if not d:
            break
        got += d
    assert bytes(got) == msg.upper().ljust(size, b"."), (i, len(got))
    c.close()
print("ok", flush=True)
"""


@pytest.mark.parametrize("size", [0, 70000])
def test_connections_between_namespaces_keep_ports(netns_pair, env, size):
    """A client opening one connection after another to a server in
    another namespace (over the veth: not loopback, where the kernel may
    not give a new connection a port in TIME_WAIT), the server closing
    first, every connection on shared memory (SHORTCUT_SHORT_TCP=0). Over
    kernel TCP the TIME_WAIT is the server's; on shared memory the client,
    reading the server's end without the kernel, often closed first and
    kept it: with few ephemeral ports (64 here) its connect failed
    (EADDRNOTAVAIL; docs/limits.md has sockbench's). Its close is the
    passive one now: its kernel socket waits for the server's FIN
    (linger.c), so the ports last. Every connection succeeds, the stats
    say each went on shared memory, and how the client's closes ended: a
    close that could not wait for the server within a second keeps its
    port, and those are counted against the ports (the rest on TCP as
    `limits`, never EADDRNOTAVAIL)."""
    a, b = netns_pair
    n = 1000 if size == 0 else 800
    env = dict(env, SHORTCUT_SHORT_TCP="0")
    sh("ip", "netns", "exec", a, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40063")
    srv = subprocess.Popen(["ip", "netns", "exec", b, SHORTCUT, "run", sys.executable, "-c",
                            SHORT_SERVER, str(n), str(size)], stdout=subprocess.PIPE, text=True,
                           env=env)
    try:
        assert srv.stdout.readline().strip() == "ready"
        cli = subprocess.run(["ip", "netns", "exec", a, SHORTCUT, "run", sys.executable, "-c",
                              SHORT_CLIENT, str(n), str(size)], capture_output=True, text=True,
                             env=env, timeout=300)
        assert cli.returncode == 0 and cli.stdout.strip() == "ok", cli.stderr[-2000:]
        assert srv.wait(timeout=60) == 0
    finally:
        srv.kill()
        srv.wait()
    st = stats(env)
    shm = st["conns_accelerated"] // 2
    tcp = st["fallback"]["limits"]
    assert shm + tcp == n and st["conns_fallback"] == 2 * tcp, json.dumps(st)
    closes = st["client_closes"]
    assert closes["passive"] + closes["first"] == shm, st
    # passive: the path taken (a server a second late at every close
    # would make them all first, and `limits` the rest)
    assert closes["passive"] >= 1 and tcp <= n - 16, st


# a server that reads its client's "hello" and end, then closes (late: only
# once told, on its stdin), says so, and waits to be told to exit
CLOSING_SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {port})); s.listen(4); print("ready", flush=True)
c, _ = s.accept()
assert c.recv(100) == b"hello" and c.recv(100) == b""   # the client's end
{late}c.close()
print("closed", flush=True)
sys.stdin.readline()
"""
FIRST_CLOSE_SERVER = CLOSING_SERVER.format(port=9557, late="")
FIRST_CLOSE_CLIENT = r"""
import socket, sys
c = socket.create_connection(("10.77.0.2", 9557))
c.sendall(b"hello")
c.close()                               # first, before the server
print("closed", flush=True)
sys.stdin.readline()                    # alive (its close is not exit's)
"""


def tcp_states(ns, port):
    """`ss -tan` in namespace ns: the states of the connections of port
    (either end; not a listener)."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tanH"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    return [l.split()[0] for l in out.splitlines() if l.split()[0] != "LISTEN" and
            any(f.endswith(f":{port}") for f in l.split()[3:5])]


SLOW_CLOSE_SERVER = CLOSING_SERVER.format(port=9558, late="sys.stdin.readline()\n")
FORKING_CLIENT = r"""
import os, socket, sys
c = socket.create_connection(("10.77.0.2", 9557))
c.sendall(b"hello")
c.close()
r, w = os.pipe()
pid = os.fork()                         # a child that holds on: not our socket
if pid == 0:
    os.close(w)
    os.read(r, 1)                       # until the parent goes
    os._exit(0)
os.close(r)
print("closed", flush=True)
sys.stdin.readline()
os.close(w)
os.waitpid(pid, 0)
"""


def wait_states(ns, port, want):
    """Wait (on the sockets' own states, HANG at most) until port's
    connections in namespace ns are in the states want (a list)."""
    deadline = time.monotonic() + HANG
    while tcp_states(ns, port) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tcp_states(ns, port) == want


class Pair:
    """A server in namespace b, then a client in a, both under `shortcut
    run`, each reading a line on stdin to go on (go); both killed at the
    end of the with (a failed test leaves nothing running)."""

    def __init__(self, netns, env, server, client):
        (self.a, self.b), self.env, self.client_src = netns, env, client
        self.cli = None
        self.srv = self._start(self.b, server)

    def _start(self, ns, src):
        return subprocess.Popen(["ip", "netns", "exec", ns, SHORTCUT, "run", sys.executable,
                                 "-c", src], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=self.env)

    def start_client(self):
        self.cli = self._start(self.a, self.client_src)

    @staticmethod
    def line(p):
        return p.stdout.readline().strip()

    @staticmethod
    def go(p):
        p.stdin.write("\n")
        p.stdin.flush()

    def end(self):
        """Both told to go on, and exited 0."""
        for p in (self.cli, self.srv):
            self.go(p)
            assert p.wait(timeout=HANG) == 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in (self.cli, self.srv):
            if p:
                p.kill()
                p.wait()


@pytest.mark.parametrize("forks", [False, True], ids=["client", "forking_client"])
def test_client_closing_first_leaves_time_wait_to_the_server(netns_pair, env, forks):
    """A client that closes a connection on shared memory before its
    server: the TIME_WAIT (the side whose FIN leaves first keeps it, with
    its port) goes to the server, as it does over kernel TCP in the usual
    case where the server closes first -- a client on shared memory reads
    the answer without the kernel and closes first, and kept a port for a
    minute for each connection, which a busy client to another namespace
    (no TIME_WAIT reuse there) ran out of. Its kernel socket waits for the
    server's FIN (linger.c); the client process stays alive, so its own
    close, not its exit, ends it; the stats count it passive. A client
    that forks right after its close: the child does not keep the kernel
    socket its parent's close waits with (the parent's FIN would wait for
    the child's exit)."""
    a, b = netns_pair
    with Pair(netns_pair, env, FIRST_CLOSE_SERVER,
              FORKING_CLIENT if forks else FIRST_CLOSE_CLIENT) as t:
        assert t.line(t.srv) == "ready"
        t.start_client()
        assert t.line(t.cli) == "closed"
        assert t.line(t.srv) == "closed"
        # the client's kernel socket goes once the server's FIN is there
        # (the control thread looks every 50 ms): wait for that
        wait_states(a, 9557, [])
        assert tcp_states(b, 9557) == ["TIME-WAIT"]
        t.end()
    st = stats(env)
    assert st["conns_accelerated"] == 2, st
    assert st["client_closes"] == {"passive": 1, "first": 0}, st


def test_client_close_stops_waiting_for_a_late_server(netns_pair, env):
    """A server that does not close within a second of its client's close:
    the client's kernel socket stops waiting for its FIN and closes first
    (FIN-WAIT-2 in the client's namespace until the server closes, then
    the client's TIME_WAIT, as over kernel TCP when the client closes
    first); the stats count that close `first`."""
    a, b = netns_pair
    with Pair(netns_pair, env, SLOW_CLOSE_SERVER,
              FIRST_CLOSE_CLIENT.replace("9557", "9558")) as t:
        assert t.line(t.srv) == "ready"
        t.start_client()
        assert t.line(t.cli) == "closed"
        wait_states(a, 9558, ["FIN-WAIT-2"])        # the wait gave up
        t.go(t.srv)
        assert t.line(t.srv) == "closed"
        wait_states(a, 9558, ["TIME-WAIT"])
        t.end()
    st = stats(env)
    assert st["conns_accelerated"] == 2, st
    assert st["client_closes"] == {"passive": 0, "first": 1}, st
