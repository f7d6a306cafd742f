# SPDX-License-Identifier: MIT
"""Short connections stay on TCP (src/interposer/shortconn.c, issue 12).

A connection that carries one request and its answer costs more on shared
memory than on TCP alone (the kernel's handshake is paid either way), so a
client learns per destination port: after 4 connections in a row that closed
having made fewer than 8 data calls (and moved under 64 KiB), the next 8 go
on TCP (`short_connections`), then one probes shared memory again; a short
probe doubles the wait, a long one puts the port back on shared memory.
By default (SHORTCUT_SHORT_TCP=1) a learnt port's connection goes on TCP
only where shared memory loses: a crowded machine, no spinning, or a server
that forks a process per connection (two short connections in a row whose
peer process was new); SHORTCUT_SHORT_TCP=2 puts them on TCP always, 0
never.  The client here opens its connections one after another, so with
=2, or against a forking server, the sequence is exact; every answer is
checked, and the stats say which path each connection took."""
import os
import subprocess
import sys

import pytest

from helpers import SHORTCUT, clean_env, short_tempdir, stats

SERVER = r"""
import os, socket, sys
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(64)
print(ls.getsockname()[1], flush=True)
n, forks = int(sys.argv[1]), sys.argv[2] == "fork"

def serve(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d.upper())
    c.close()

for _ in range(n):
    c, _ = ls.accept()
    if not forks:
        serve(c)
        continue
    pid = os.fork()                     # a process per connection, as PostgreSQL
    if pid == 0:
        serve(c)
        os._exit(0)
    c.close()
    os.waitpid(pid, 0)
"""
# argv: port, then the exchanges of each connection, in order
CLIENT = r"""
import socket, sys
port, size = int(sys.argv[1]), int(sys.argv[3])
for i, k in enumerate(int(x) for x in sys.argv[2].split(",")):
    c = socket.create_connection(("127.0.0.1", port))
    for j in range(k):
        msg = (b"conn %d msg %d " % (i, j)).ljust(size, b"x")
        c.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = c.recv(len(msg) - len(got))
            assert d, "EOF"
            got += d
        assert got == msg.upper(), got
    c.close()
print("ok", flush=True)
"""


def run_pair(exchanges, extra_env=None, server="plain", size=0):
    env = clean_env(short_tempdir("sc-short-"), extra_env)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER, str(len(exchanges)), server],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = srv.stdout.readline().strip()
        assert port, srv.stderr.read()
        cl = subprocess.run([SHORTCUT, "run", sys.executable, "-c", CLIENT, port,
                             ",".join(map(str, exchanges)), str(size)],
                            capture_output=True, text=True, env=dict(env, SHORTCUT_LOG="1"),
                            timeout=120)
        assert cl.returncode == 0 and cl.stdout.strip() == "ok", cl.stderr
        assert srv.wait(timeout=60) == 0, srv.stderr.read()
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return stats(env), cl.stderr


ALWAYS = {"SHORTCUT_SHORT_TCP": "2"}


def test_short_connections_go_tcp():
    # 4 learn (shared memory), 8 TCP, a probe, 16 TCP, a probe, 10 TCP
    stats, log = run_pair([1] * 40, ALWAYS)
    assert stats["conns_accelerated"] == 2 * 6, stats      # both ends
    assert stats["fallback"]["short_connections"] == 34, stats
    assert stats["bytes_shm_sent"] > 0
    assert log.count("close after a short exchange") == 1, log


def test_long_probe_goes_back_to_shared_memory():
    # 4 short: learnt; the 8 after them go on TCP whatever they carry; the
    # probe carries 10 exchanges (20 calls): the port is back on shared
    # memory for the 11 after it
    stats, log = run_pair([1] * 4 + [10] * 20, ALWAYS)
    assert stats["conns_accelerated"] == 2 * (4 + 12), stats
    assert stats["fallback"]["short_connections"] == 8, stats
    assert "back on shared memory" in log, log


def test_long_connections_never_learnt_short():
    # 3 short ones then a long one, again and again: never 4 short in a row
    stats, _ = run_pair([1, 1, 1, 10] * 6, ALWAYS)
    assert stats["conns_accelerated"] == 2 * 24, stats
    assert stats["fallback"]["short_connections"] == 0, stats


def test_one_big_exchange_is_not_short():
    # one exchange of 70 KB each way: few calls, but more than 64 KiB
    stats, _ = run_pair([1] * 12, ALWAYS, size=70000)
    assert stats["conns_accelerated"] == 2 * 12, stats
    assert stats["fallback"]["short_connections"] == 0, stats


def test_forking_server_short_connections_go_tcp():
    # the default: a child per connection is where shared memory loses,
    # whatever the machine's load: the same sequence as always-TCP
    stats, log = run_pair([1] * 40, server="fork")
    assert stats["conns_accelerated"] == 2 * 6, stats
    assert stats["fallback"]["short_connections"] == 34, stats
    assert log.count("close after a short exchange") == 1, log


def test_default_short_connections_to_a_plain_server():
    # the default, a server answering in its own process: on TCP only while
    # the machine is crowded (when the client connects), which this test
    # does not control: at least the learning and the probes on shared
    # memory, and every connection on one path or the other
    stats, _ = run_pair([1] * 40)
    short = stats["fallback"]["short_connections"]
    assert stats["conns_accelerated"] // 2 + short == 40, stats
    assert stats["conns_accelerated"] >= 2 * 6, stats
    assert stats["conns_fallback"] == 2 * short, stats  # the server's view of them


def test_short_tcp_off_accelerates_all():
    stats, log = run_pair([1] * 20, {"SHORTCUT_SHORT_TCP": "0"})
    assert stats["conns_accelerated"] == 2 * 20, stats
    assert stats["fallback"]["short_connections"] == 0, stats
    assert "short exchange" not in log


def test_short_tcp_bad_value_named():
    r = subprocess.run([SHORTCUT, "config"], capture_output=True, text=True,
                       env=dict(os.environ, SHORTCUT_SHORT_TCP="yes"))
    assert r.returncode == 2
    assert "SHORTCUT_SHORT_TCP" in r.stderr and "0 (accelerate every connection)" in r.stderr
