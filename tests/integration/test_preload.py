# SPDX-License-Identifier: MIT
"""`shortcut run` (LD_PRELOAD): unmodified Python socket programs, run once on
plain kernel TCP and once accelerated, must behave the same; between two
accelerated processes the bytes go through shared memory (stats say so), and a
peer that is not accelerated sees exactly the bytes the program wrote.

The socket code lives in peers/*.py (stdlib only) so the identical script runs
both ways. A server peer prints its port on its first stdout line; every peer
prints one JSON object on its last line.

Run one:  python3 -m pytest -q tests/integration/test_preload.py -k banner
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time

import pytest

from helpers import LIB, PEERS, SHORTCUT, clean_env, kill_group, stats

BANNER = b"220 hello\r\n"

PORT_TIMEOUT = 15     # server prints its port
CLIENT_TIMEOUT = 30   # the client runs to completion
SERVER_TIMEOUT = 15   # the server exits after the client did
# "must not wait for a claim": the claim wait is made as long as allowed, so
# that a wrongful one shows as the client's timeout, and the time bound that
# checks it leaves a busy machine room (it is no race against the default 10 s)
NO_CLAIM_WAIT = {"SHORTCUT_CLAIM_MS": "600000"}
NO_CLAIM_BOUND = 25   # < CLIENT_TIMEOUT


# --- helpers -------------------------------------------------------------

class Out:
    """A finished peer: exit code, stdout, stderr and its last JSON line."""

    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err
        self.json = None
        for line in reversed(out.decode("utf-8", "replace").splitlines()):
            if line.startswith("{"):
                try:
                    self.json = json.loads(line)
                except ValueError:
                    pass
                break

    def __repr__(self):
        return "rc=%r stdout=%r stderr=%r" % (self.rc, self.out[-2000:], self.err[-2000:])


def command(args, accel):
    args = [str(x) for x in args]
    if args[0].endswith(".py"):
        args = [sys.executable, os.path.join(PEERS, args[0])] + args[1:]
    return [SHORTCUT, "run"] + args if accel else args


def run_pair(server_args, client_args, accel_server=True, accel_client=True,
             rundir=None, env=None, server_env=None, client_env=None,
             client_input=None, work=None):
    """Start the server, read its port, run the client against it (every
    argument containing {port} is formatted, else `--port PORT` is appended),
    wait for both. Returns (server, client, port). Never hangs: each wait has
    a timeout and a timed-out peer is killed and reported."""
    work = work or os.path.dirname(os.path.abspath(rundir))   # not in the rundir itself
    os.makedirs(rundir, exist_ok=True)
    tag = "%d" % time.monotonic_ns()
    s_out = os.path.join(work, "server.%s.out" % tag)
    s_err = os.path.join(work, "server.%s.err" % tag)
    senv = clean_env(rundir, {**(env or {}), **(server_env or {})}, unbuffered=True)
    cenv = clean_env(rundir, {**(env or {}), **(client_env or {})}, unbuffered=True)
    with open(s_out, "wb") as fo, open(s_err, "wb") as fe:
        srv = subprocess.Popen(command(server_args, accel_server), stdout=fo, stderr=fe,
                               stdin=subprocess.DEVNULL, env=senv, start_new_session=True)
    cli = None
    try:
        deadline = time.monotonic() + PORT_TIMEOUT
        port = None
        while port is None:
            with open(s_out, "rb") as f:
                first = f.readline()
            if first.endswith(b"\n"):
                port = int(first)
            elif srv.poll() is not None or time.monotonic() > deadline:
                kill_group(srv)
                raise AssertionError("server printed no port: %r" % Out(
                    srv.returncode, open(s_out, "rb").read(), open(s_err, "rb").read()))
            else:
                time.sleep(0.005)
        cargs = [str(a) for a in client_args]
        if any("{port}" in a for a in cargs):
            cargs = [a.replace("{port}", str(port)) for a in cargs]
        else:
            cargs += ["--port", str(port)]
        cli = subprocess.Popen(command(cargs, accel_client), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               stdin=subprocess.PIPE if client_input is not None
                               else subprocess.DEVNULL,
                               env=cenv, start_new_session=True)
        try:
            cout, cerr = cli.communicate(client_input, timeout=CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_group(cli)
            cout, cerr = cli.communicate()
            kill_group(srv)
            raise AssertionError("client timed out after %ds: %r; server: %r" % (
                CLIENT_TIMEOUT, Out(None, cout, cerr),
                Out(srv.returncode, open(s_out, "rb").read(), open(s_err, "rb").read())))
        client = Out(cli.returncode, cout, cerr)
        try:
            srv.wait(SERVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_group(srv)
            raise AssertionError("server did not exit within %ds: %r; client: %r" % (
                SERVER_TIMEOUT, Out(None, open(s_out, "rb").read(), open(s_err, "rb").read()),
                client))
        server = Out(srv.returncode, open(s_out, "rb").read(), open(s_err, "rb").read())
        return server, client, port
    finally:
        if cli is not None and cli.poll() is None:
            kill_group(cli)
        if srv.poll() is None:
            kill_group(srv)


def fb(st, reason):
    return st.get("fallback", {}).get(reason, 0)


def ok(server, client):
    assert client.rc == 0, "client: %r\nserver: %r" % (client, server)
    assert server.rc == 0, "server: %r\nclient: %r" % (server, client)
    assert client.json is not None and server.json is not None, (server, client)


def v4(a):
    """[host, port] with an IPv4-mapped IPv6 host written as IPv4."""
    h = a[0][7:] if a[0].startswith("::ffff:") else a[0]
    return (h, a[1])


def check_echo(server, client, nconns=1):
    """Everything the client sent reached the server once, in order."""
    ok(server, client)
    assert client.json["ok"] is True
    cs = client.json["conns"]
    ss = server.json["conns"]
    assert len(cs) == nconns and len(ss) == nconns, (server, client)
    by_peer = {v4(c["peer"]): c for c in ss}
    for c in cs:
        # server's getpeername == client's getsockname
        assert v4(c["sock"]) in by_peer, (c, ss)
        s = by_peer[v4(c["sock"])]
        assert s["received"] == c["sent"]
        assert s["sha_received"] == c["sha_sent"]
        assert v4(s["sock"]) == v4(c["peer"])


def payload(client):
    return sum(c["sent"] for c in client.json["conns"])


def assert_accelerated(st, conns):
    """`conns` connections, every one of them through shared memory."""
    assert st["conns_accelerated"] == 2 * conns, st
    assert st["conns_fallback"] == 0, st
    assert st["bytes_tcp_sent"] == 0 and st["bytes_tcp_received"] == 0, st
    assert st["proto_errors"] == 0, st


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture(scope="module", autouse=True)
def preload_built(tmp_path_factory):
    assert os.path.exists(LIB), "%s is missing: run make" % LIB
    r = subprocess.run([SHORTCUT, "run", "true"], capture_output=True, timeout=20,
                       env=clean_env(tmp_path_factory.mktemp("rundir"), unbuffered=True))
    assert r.returncode == 0, "`shortcut run true` failed: %r" % (r,)


@pytest.fixture
def plaindir(tmp_path):
    d = tmp_path / "plain"
    d.mkdir()
    return str(d)


def strip_addrs(j):
    """A peer's JSON without addresses (ports differ between two runs)."""
    if isinstance(j, dict):
        return {k: strip_addrs(v) for k, v in j.items() if k not in ("peer", "sock")}
    if isinstance(j, list):
        return [strip_addrs(x) for x in j]
    return j


# --- 1. echo, client speaks first --------------------------------------------

ECHO = ["echo_client.py", "--count", "200", "--max-size", "20000", "--seed", "11"]


def test_echo_client_first(rundir, plaindir):
    ps, pc, _ = run_pair(["echo_server.py"], ECHO, False, False, rundir=plaindir)
    check_echo(ps, pc)
    server, client, _ = run_pair(["echo_server.py"], ECHO, rundir=rundir)
    check_echo(server, client)
    assert strip_addrs(client.json) == strip_addrs(pc.json)
    assert strip_addrs(server.json) == strip_addrs(ps.json)
    n = payload(client)
    st = stats(rundir)
    assert st["processes"] == 2, st
    assert_accelerated(st, 1)
    assert st["bytes_shm_sent"] == 2 * n, (n, st)
    assert st["bytes_shm_received"] == 2 * n, (n, st)
    assert st["conns_aborted"] == 0, st


def test_bulk_half_close_digest(rundir, plaindir):
    size = 6 * 1024 * 1024 + 12345
    cargs = ["echo_client.py", "--bulk", size, "--seed", "5"]
    ps, pc, _ = run_pair(["echo_server.py", "--mode", "digest"], cargs, False, False,
                         rundir=plaindir)
    check_echo(ps, pc)
    server, client, _ = run_pair(["echo_server.py", "--mode", "digest"], cargs, rundir=rundir)
    check_echo(server, client)
    assert client.json["conns"][0]["sent"] == size
    assert strip_addrs(server.json) == strip_addrs(ps.json)
    st = stats(rundir)
    assert_accelerated(st, 1)
    answer = len(b"%d %s\n" % (size, b"0" * 64))
    assert st["bytes_shm_sent"] == size + answer, st
    assert st["bytes_shm_received"] == size + answer, st


# --- 2. server speaks first ----------------------------------------------------

def test_banner_server_first(rundir, plaindir):
    cargs = ["echo_client.py", "--banner", "--count", "50", "--seed", "3"]
    ps, pc, _ = run_pair(["echo_server.py", "--mode", "banner"], cargs, False, False,
                         rundir=plaindir)
    check_echo(ps, pc)
    server, client, _ = run_pair(["echo_server.py", "--mode", "banner"], cargs, rundir=rundir)
    check_echo(server, client)
    st = stats(rundir)
    assert_accelerated(st, 1)
    assert st["bytes_shm_sent"] == 2 * payload(client) + len(BANNER), st


# --- 3. a peer that is not accelerated sees a plain TCP stream ------------------

@pytest.mark.parametrize("proto", ["client_first", "server_first"])
def test_plain_server_sees_only_client_bytes(rundir, tmp_path, proto):
    rec, sent = tmp_path / "received", tmp_path / "sent"
    sargs = ["echo_server.py", "--record", rec]
    cargs = ["echo_client.py", "--count", "60", "--seed", "21", "--sent-file", sent]
    if proto == "server_first":
        sargs += ["--mode", "banner"]
        cargs += ["--banner"]
    t0 = time.monotonic()
    server, client, _ = run_pair(sargs, cargs, accel_server=False, rundir=rundir,
                                 client_env=NO_CLAIM_WAIT)
    took = time.monotonic() - t0
    check_echo(server, client)
    assert rec.read_bytes() == sent.read_bytes()
    assert len(sent.read_bytes()) == payload(client) > 0
    st = stats(rundir)
    assert st["conns_accelerated"] == 0, st
    assert st["conns_fallback"] >= 1 and fb(st, "no_listener") >= 1, st
    assert st["bytes_shm_sent"] == 0, st
    assert took < NO_CLAIM_BOUND, \
        "a client with no accelerated listener to find must not wait (%.1fs)" % took


@pytest.mark.parametrize("proto", ["client_first", "server_first"])
def test_plain_client_sees_only_server_bytes(rundir, tmp_path, proto):
    rec, sent = tmp_path / "received", tmp_path / "sent"
    sargs = ["echo_server.py", "--record", rec]
    cargs = ["echo_client.py", "--count", "60", "--seed", "22", "--sent-file", sent]
    if proto == "server_first":
        sargs += ["--mode", "banner"]
        cargs += ["--banner"]
    t0 = time.monotonic()
    server, client, _ = run_pair(sargs, cargs, accel_client=False, rundir=rundir)
    took = time.monotonic() - t0
    # the plain client checked every byte it got back and that nothing followed
    check_echo(server, client)
    assert rec.read_bytes() == sent.read_bytes()
    st = stats(rundir)
    assert st["conns_accelerated"] == 0, st
    assert st["conns_fallback"] >= 1 and fb(st, "peer_not_accelerated") >= 1, st
    assert st["bytes_shm_sent"] == 0, st
    assert took < 8, "a server accepting a plain client must not wait (%.1fs)" % took


def nc_ok():
    nc = shutil.which("nc")
    if not nc:
        return None
    h = subprocess.run([nc, "-h"], capture_output=True, timeout=10)
    return nc if b"-N" in h.stdout + h.stderr else None


needs_nc = pytest.mark.skipif(nc_ok() is None,
                              reason="OpenBSD nc (with -N) not installed (apt-get install netcat-openbsd)")


def nc_input():
    return random.Random(7).randbytes(300000)


@needs_nc
def test_nc_accelerated_client_plain_server(rundir, tmp_path):
    rec = tmp_path / "received"
    data = nc_input()
    server, client, _ = run_pair(["echo_server.py", "--record", rec],
                                 [nc_ok(), "-N", "127.0.0.1", "{port}"],
                                 accel_server=False, rundir=rundir, client_input=data)
    assert client.rc == 0 and server.rc == 0, (server, client)
    assert rec.read_bytes() == data
    assert client.out == data
    st = stats(rundir)
    assert st["conns_accelerated"] == 0 and fb(st, "no_listener") >= 1, st


@needs_nc
def test_nc_plain_client_accelerated_server(rundir, tmp_path):
    rec = tmp_path / "received"
    data = nc_input()
    server, client, _ = run_pair(["echo_server.py", "--mode", "banner", "--record", rec],
                                 [nc_ok(), "-N", "127.0.0.1", "{port}"],
                                 accel_client=False, rundir=rundir, client_input=data)
    assert client.rc == 0 and server.rc == 0, (server, client)
    assert rec.read_bytes() == data
    assert client.out == BANNER + data
    st = stats(rundir)
    assert st["conns_accelerated"] == 0 and fb(st, "peer_not_accelerated") >= 1, st


@needs_nc
def test_nc_both_accelerated(rundir, tmp_path):
    """nc waits with poll() on stdin and the socket at once."""
    rec = tmp_path / "received"
    data = nc_input()
    server, client, _ = run_pair(["echo_server.py", "--mode", "banner", "--record", rec],
                                 [nc_ok(), "-N", "127.0.0.1", "{port}"],
                                 rundir=rundir, client_input=data)
    assert client.rc == 0 and server.rc == 0, (server, client)
    assert rec.read_bytes() == data
    assert client.out == BANNER + data
    assert_accelerated(stats(rundir), 1)


# --- 4. addresses: IPv6, wildcard listeners -----------------------------------

@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
def test_ipv6_loopback(rundir):
    server, client, port = run_pair(["echo_server.py", "--host", "::1"],
                                    ["echo_client.py", "--host", "::1", "--count", "50"],
                                    rundir=rundir)
    check_echo(server, client)
    c = client.json["conns"][0]
    assert c["peer"] == ["::1", port] and c["sock"][0] == "::1"
    assert_accelerated(stats(rundir), 1)


def test_wildcard_listener_via_127_0_0_1(rundir):
    server, client, port = run_pair(["echo_server.py", "--host", "0.0.0.0"],
                                    ["echo_client.py", "--count", "50"], rundir=rundir)
    check_echo(server, client)
    assert server.json["conns"][0]["sock"] == ["127.0.0.1", port]
    assert_accelerated(stats(rundir), 1)


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
def test_dual_stack_listener_via_127_0_0_1(rundir, plaindir):
    """A server on [::] (dual stack) reached at 127.0.0.1: the server sees
    ::ffff:127.0.0.1 as in the plain run."""
    ps, pc, _ = run_pair(["echo_server.py", "--host", "::"],
                         ["echo_client.py", "--count", "30"], False, False, rundir=plaindir)
    check_echo(ps, pc)
    server, client, port = run_pair(["echo_server.py", "--host", "::"],
                                    ["echo_client.py", "--count", "30"], rundir=rundir)
    check_echo(server, client)
    assert server.json["conns"][0]["peer"][0] == ps.json["conns"][0]["peer"][0]
    assert server.json["conns"][0]["sock"][0] == ps.json["conns"][0]["sock"][0]
    assert_accelerated(stats(rundir), 1)


# --- 5, 6. late accept, explicit bind -----------------------------------------

def test_late_accept(rundir):
    """The client connects and sends at once; accept() comes 1.5 s later."""
    server, client, _ = run_pair(["echo_server.py", "--accept-delay", "1.5"],
                                 ["echo_client.py", "--count", "30"], rundir=rundir)
    check_echo(server, client)
    assert_accelerated(stats(rundir), 1)


def test_claim_timeout_falls_back(rundir):
    """The client gives up waiting for a claim after 300 ms; accept() comes
    after that (once the client's bytes wait on TCP, not at a fixed time a
    slow client start could outlast). Both must end up on plain TCP with
    every byte right."""
    server, client, _ = run_pair(["echo_server.py", "--accept-after", "data"],
                                 ["echo_client.py", "--count", "30"], rundir=rundir,
                                 client_env={"SHORTCUT_CLAIM_MS": "300"})
    check_echo(server, client)
    st = stats(rundir)
    assert st["conns_accelerated"] == 0, st
    assert fb(st, "claim_timeout") >= 1, st


def test_client_closed_before_claim(rundir):
    """An accelerated client connects and closes at once (a port probe, wrk's
    test connection) before the server looks at the connection: the server
    learns from the board that nothing is coming (`peer_closed_first`), not
    by waiting for an offer (`claim_timeout`); the next client is
    accelerated as usual."""
    probe = ("import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1]))); "
             "s.close()")
    client = ["sh", "-c", '%s -c "%s" {port} && %s %s --count 5 --port {port}'
              % (sys.executable, probe, sys.executable, os.path.join(PEERS, "echo_client.py"))]
    # the server looks once both connections wait (the second comes after
    # the probe process ended), not at a fixed time a slow interpreter start
    # could outlast
    server, client, _ = run_pair(["echo_server.py", "--clients", "2", "--accept-after", "all"],
                                 client, rundir=rundir)
    assert client.rc == 0 and server.rc == 0, (server, client)
    st = stats(rundir)
    assert fb(st, "peer_closed_first") == 1, st
    assert fb(st, "claim_timeout") == 0, st
    assert st["conns_accelerated"] == 2, st


def test_client_bind_before_connect(rundir):
    server, client, _ = run_pair(["echo_server.py"],
                                 ["echo_client.py", "--bind", "127.0.0.1:0", "--count", "30"],
                                 rundir=rundir)
    check_echo(server, client)
    assert client.json["conns"][0]["sock"][0] == "127.0.0.1"
    assert_accelerated(stats(rundir), 1)


# --- 7. kill switch -------------------------------------------------------------

@pytest.mark.parametrize("side", ["client", "server"])
def test_disable(rundir, side):
    env = {"SHORTCUT_DISABLE": "1"}
    t0 = time.monotonic()
    server, client, _ = run_pair(["echo_server.py"], ["echo_client.py", "--count", "30"],
                                 rundir=rundir,
                                 client_env={**NO_CLAIM_WAIT,
                                             **(env if side == "client" else {})},
                                 server_env=env if side == "server" else None)
    took = time.monotonic() - t0
    check_echo(server, client)
    st = stats(rundir)
    assert st["conns_accelerated"] == 0, st
    assert fb(st, "disabled") >= 1, st
    other = "peer_not_accelerated" if side == "client" else "no_listener"
    assert fb(st, other) >= 1, st
    assert st["bytes_shm_sent"] == 0, st
    assert took < NO_CLAIM_BOUND, "%.1fs: a fallback must not wait for a claim" % took


# --- 8. nonblocking sockets, timeouts, event loops ------------------------------

def test_client_settimeout(rundir, plaindir):
    """settimeout(): O_NONBLOCK via ioctl(FIONBIO), connect() in progress,
    every call waits in poll()."""
    cargs = ["echo_client.py", "--timeout", "5", "--count", "100", "--max-size", "300000"]
    ps, pc, _ = run_pair(["echo_server.py"], cargs, False, False, rundir=plaindir)
    check_echo(ps, pc)
    server, client, _ = run_pair(["echo_server.py"], cargs, rundir=rundir)
    check_echo(server, client)
    assert strip_addrs(client.json) == strip_addrs(pc.json)
    assert_accelerated(stats(rundir), 1)


@pytest.mark.parametrize("loop", ["select", "poll", "selectors"])
def test_event_loop_server(rundir, loop):
    """One thread serves four clients at once with select(), poll() or
    selectors (epoll), nonblocking, waiting for writability too."""
    server, client, _ = run_pair(["echo_server.py", "--loop", loop, "--clients", "4"],
                                 ["echo_client.py", "--conns", "4", "--count", "40",
                                  "--max-size", "100000"],
                                 rundir=rundir)
    check_echo(server, client, nconns=4)
    assert_accelerated(stats(rundir), 4)


# --- 9-11. socket semantics, call for call against kernel TCP ------------------

def probe(scenario, rundir, plaindir):
    ps, pc, _ = run_pair(["probe_server.py", scenario], ["probe_client.py", scenario],
                         False, False, rundir=plaindir)
    ok(ps, pc)
    server, client, _ = run_pair(["probe_server.py", scenario], ["probe_client.py", scenario],
                                 rundir=rundir)
    ok(server, client)
    return ps.json["events"], pc.json["events"], server.json["events"], client.json["events"]


def test_eof_then_write_to_closed_peer(rundir, plaindir):
    ps, pc, s, c = probe("eof", rundir, plaindir)
    assert pc[:3] == ["data:bye", "eof", "eof"], pc   # the oracle itself
    assert (s, c) == (ps, pc), "accelerated %r vs kernel TCP %r" % ((s, c), (ps, pc))
    assert stats(rundir)["conns_accelerated"] == 2


def test_close_with_unread_data_resets(rundir, plaindir):
    ps, pc, s, c = probe("reset", rundir, plaindir)
    assert pc[0] == "ConnectionResetError", pc       # the oracle itself
    assert (s, c) == (ps, pc), "accelerated %r vs kernel TCP %r" % ((s, c), (ps, pc))
    assert stats(rundir)["conns_accelerated"] == 2


def test_fionread(rundir, plaindir):
    ps, pc, s, c = probe("fionread", rundir, plaindir)
    assert "fionread:1000" in ps and "fionread:1000" in pc
    assert (s, c) == (ps, pc), "accelerated %r vs kernel TCP %r" % ((s, c), (ps, pc))
    assert stats(rundir)["conns_accelerated"] == 2


def test_first_bytes_arrive_while_client_is_idle(rundir, plaindir):
    """Regression: bytes a client sent right after connect() stayed on its
    side until its next socket call (the server's recv waited 1 s)."""
    ps, pc, s, c = probe("idle", rundir, plaindir)
    assert ps == ["data:g", "eof"] and pc == ["data:h", "eof"], (ps, pc)  # the oracle
    assert (s, c) == (ps, pc), "accelerated %r vs kernel TCP %r" % ((s, c), (ps, pc))
    assert stats(rundir)["conns_accelerated"] == 2


def test_send_then_close_at_once(rundir, plaindir):
    """Regression: a client that sent and closed at once lost its bytes."""
    ps, pc, s, c = probe("sendclose", rundir, plaindir)
    assert ps == ["got:5120:True", "eof"], ps                      # the oracle
    assert (s, c) == (ps, pc), "accelerated %r vs kernel TCP %r" % ((s, c), (ps, pc))
    assert stats(rundir)["conns_accelerated"] == 2


PEEK_EXPECTED = ["data:hello", "data:hello", "data:he", "data:hel", "data:lo", "fionread:2",
                 "data:lo", "BlockingIOError", "data:world", "data:12345", "eof", "eof", "eof"]


def test_msg_peek_waitall_dontwait(rundir, plaindir):
    ps, pc, s, c = probe("peek", rundir, plaindir)
    assert pc == PEEK_EXPECTED                          # the oracle itself
    assert (s, c) == (ps, pc), "accelerated %r vs kernel TCP %r" % ((s, c), (ps, pc))
    assert stats(rundir)["conns_accelerated"] == 2


# --- 12. many connections -------------------------------------------------------

def test_fifty_concurrent_connections(rundir):
    server, client, _ = run_pair(["echo_server.py", "--loop", "threads", "--clients", "50"],
                                 ["echo_client.py", "--conns", "50", "--count", "20",
                                  "--max-size", "8192", "--seed", "100"],
                                 rundir=rundir)
    check_echo(server, client, nconns=50)
    st = stats(rundir)
    assert_accelerated(st, 50)
    assert st["bytes_shm_sent"] == 2 * payload(client), st


# --- 13. the program's view -----------------------------------------------------

def test_addresses_as_in_plain_run(rundir, plaindir):
    ps, pc, pport = run_pair(["echo_server.py"], ["echo_client.py", "--count", "5"],
                             False, False, rundir=plaindir)
    server, client, port = run_pair(["echo_server.py"], ["echo_client.py", "--count", "5"],
                                    rundir=rundir)
    for s, c, p in ((ps, pc, pport), (server, client, port)):
        check_echo(s, c)
        sc, cc = s.json["conns"][0], c.json["conns"][0]
        assert sc["peer"] == cc["sock"] and sc["sock"] == cc["peer"] == ["127.0.0.1", p]
    assert server.json["conns"][0]["peer"][0] == ps.json["conns"][0]["peer"][0]
    assert_accelerated(stats(rundir), 1)


# --- the tools around it --------------------------------------------------------

def test_stats_table_and_reset(rundir):
    server, client, _ = run_pair(["echo_server.py"], ["echo_client.py", "--count", "5"],
                                 rundir=rundir)
    check_echo(server, client)
    assert stats(rundir)["conns_accelerated"] == 2
    r = subprocess.run([SHORTCUT, "stats"], capture_output=True, text=True,
                       env=clean_env(rundir, unbuffered=True), timeout=20)
    assert r.returncode == 0 and r.stdout.strip(), r
    r = subprocess.run([SHORTCUT, "stats", "--reset"], capture_output=True, text=True,
                       env=clean_env(rundir, unbuffered=True), timeout=20)
    assert r.returncode == 0, r
    st = stats(rundir)
    assert st["conns_accelerated"] == 0 and st["bytes_shm_sent"] == 0, st


def test_quiet_unless_logging(rundir, tmp_path):
    """An accelerated program's stderr is its own; SHORTCUT_LOG=1 adds the
    library's decisions."""
    server, client, _ = run_pair(["echo_server.py"], ["echo_client.py", "--count", "5"],
                                 rundir=rundir)
    check_echo(server, client)
    assert server.err == b"" and client.err == b"", (server.err, client.err)
    logdir = str(tmp_path / "logrun")
    server, client, _ = run_pair(["echo_server.py"], ["echo_client.py", "--count", "5"],
                                 rundir=logdir, env={"SHORTCUT_LOG": "1"})
    check_echo(server, client)
    assert client.err != b"" and server.err != b"", (server.err, client.err)
