# SPDX-License-Identifier: MIT
"""Two network namespaces of one host joined by a veth pair (containers, as
SMC-D loopback serves them): both ends under `shortcut run`, sharing the run
directory, talk through shared memory; the bytes are exact."""
import os
import shutil
import subprocess
import sys

import pytest

from helpers import SHORTCUT, stats

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
    first. Over kernel TCP the TIME_WAIT is the server's; on shared memory
    the client, reading the server's end without the kernel, often closed
    first and kept it: with few ephemeral ports (64 here) its connect
    could fail (EADDRNOTAVAIL; docs/limits.md has sockbench's). Short ones (a 9-byte
    answer), learnt, go on TCP whatever the machine's load; long ones (70
    KB) go on shared memory no faster than the ports last (16 at once,
    then one per 3.75 s here), the rest on TCP as `limits`. Every one
    succeeds, and the stats say which path each took."""
    a, b = netns_pair
    n = 1000 if size == 0 else 800
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
    tcp = st["fallback"]["short_connections" if size == 0 else "limits"]
    # short: 4 to learn, then a probe after 8, 16, 32, ... on shared
    # memory; long: the 16 the ports allow at once (and one per 3.75 s);
    # the rest on TCP (the server's end of each: a client not offering)
    assert st["conns_accelerated"] // 2 + tcp == n, st
    assert 2 * 4 <= st["conns_accelerated"] <= 2 * (16 + 16), st
    assert st["fallback"]["peer_not_accelerated"] == tcp, st
