# SPDX-License-Identifier: MIT
"""Switching live connections back to TCP at run time: the kill switch
(`shortcut off` / `shortcut on`).  A conversation running across the switch
must lose, duplicate or reorder nothing, and the stats must show that the
connection really was on shared memory before and on TCP after."""
import os
import subprocess
import sys
import time

from helpers import PROGRAMS, SHORTCUT, clean_env, echo_server, stat, stats

SERVER = echo_server()

# Exchanges messages of varying sizes with the echo server until told to
# stop (a line on stdin), checking every byte; prints one line per phase.
CLIENT = r"""
import socket, sys, threading
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
stop = threading.Event()
def waiter():
    for line in sys.stdin:
        if line.strip() == "stop":
            stop.set()
            return
threading.Thread(target=waiter, daemon=True).start()
i = 0
sent = 0
while not stop.is_set() or i < 50:
    n = 1 + (i * 7919) % 70000
    msg = bytes(((i * 31 + k * 7) & 255) for k in range(n)) if n < 2000 else \
          (bytes(range(256)) * (n // 256 + 2))[i % 256:i % 256 + n]
    s.sendall(msg)
    got = bytearray()
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            print("EOF early at", i, flush=True)
            sys.exit(1)
        got += b
    if bytes(got) != msg:
        print("mismatch at", i, flush=True)
        sys.exit(1)
    i += 1
    sent += n
    if i == 50:
        print("started", flush=True)
s.close()
print("exchanged", i, "messages exactly", flush=True)
"""


def start_server(env):
    p = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER], env=env,
                         stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline())
    return p, port


def start_client(env, port):
    c = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, str(port)],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert c.stdout.readline().strip() == "started"
    return c


def finish_client(c):
    out, _ = c.communicate("stop\n", timeout=60)
    assert c.returncode == 0, out
    assert "messages exactly" in out, out


def test_off_switches_live_connections_and_on_restores(tmp_path):
    env = clean_env(tmp_path)
    srv, port = start_server(env)
    try:
        c = start_client(env, port)
        live = stat(env)
        assert [x["mode"] for x in live] == ["shm", "shm"], live
        r = subprocess.run([SHORTCUT, "off"], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "every connection is on TCP" in r.stdout
        live = stat(env)
        assert [(x["mode"], x["fallback"]) for x in live] == \
            [("tcp", "switched_to_tcp")] * 2, live
        before = {x["pid"]: x["bytes_received"] for x in live}
        # the conversation goes on over TCP: wait for its bytes (10 s is a
        # hang guard; a busy machine may take longer than any fixed pause)
        end = time.monotonic() + 10
        while True:
            after = {x["pid"]: x["bytes_received"] for x in stat(env)}
            if all(after[p] > before[p] for p in before) or time.monotonic() > end:
                break
            time.sleep(0.02)
        assert all(after[p] > before[p] for p in before), (before, after)
        st = stats(env)
        assert st["conns_switched_to_tcp"] == 2, st
        # while off, a new connection stays on TCP
        c2 = start_client(env, port)
        finish_client(c2)
        st = stats(env)
        assert st["fallback"]["disabled"] >= 1, st
        assert st["conns_accelerated"] == 2, st
        finish_client(c)
        r = subprocess.run([SHORTCUT, "on"], capture_output=True, text=True, env=env,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        # and once on again, new connections are accelerated
        c3 = start_client(env, port)
        assert [x["mode"] for x in stat(env) if x["mode"] == "shm"] == ["shm", "shm"]
        finish_client(c3)
        st = stats(env)
        assert st["conns_accelerated"] == 4 and st["conns_switched_to_tcp"] == 2, st
    finally:
        srv.kill()
        srv.wait()


def test_off_bad_wait_names_the_option(tmp_path):
    env = clean_env(tmp_path)
    r = subprocess.run([SHORTCUT, "off", "--wait", "soon"], capture_output=True, text=True,
                       env=env, timeout=30)
    assert r.returncode == 2
    assert "--wait" in r.stderr and "seconds" in r.stderr
    assert not os.path.exists(os.path.join(tmp_path, "off"))


URING_SRC = os.path.join(PROGRAMS, "uring_echo.c")


def test_io_uring_switches_to_tcp(tmp_path):
    """A program that sets up an io_uring (liburing) and goes on with the same
    socket through the ring: the connection goes back to TCP first (the ring
    reads the kernel socket), every byte arrives, and a later connection
    stays on TCP (unsupported_option)."""
    if not os.path.exists("/usr/include/liburing.h"):
        import pytest
        pytest.skip("liburing-dev not installed")
    exe = tmp_path / "uring_echo"
    r = subprocess.run(["cc", "-O2", "-o", str(exe), URING_SRC, "-luring"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    env = clean_env(tmp_path)
    srv, port = start_server(env)
    try:
        r = subprocess.run([SHORTCUT, "run", str(exe), str(port)], capture_output=True,
                           text=True, env=env, timeout=60)
        if r.returncode == 2 and "unavailable" in r.stdout:
            import pytest
            pytest.skip("io_uring not available here")
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.splitlines() == [
            "plain echo exact: yes",
            "ring echo of 200000 bytes exact: yes",
            "second connection echoes: yes"], r.stdout
        st = stats(env)
        assert st["conns_accelerated"] == 2, st          # the first connection
        assert st["conns_switched_to_tcp"] == 2, st
        assert st["fallback"]["unsupported_option"] == 1, st
        assert st["bytes_shm_sent"] >= 100000, st        # the plain echo
    finally:
        srv.kill()
        srv.wait()
