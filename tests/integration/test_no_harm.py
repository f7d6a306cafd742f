# SPDX-License-Identifier: MIT
"""Do no harm (issue 11): a program under `shortcut run` never hangs or stalls
because of the interposer, whatever its peers do.  Each test is a scenario a
user met, named after it, and checks the program's own outcome plus the
fallback reason `shortcut stats` records (a stall shows as `claim_timeout`:
the client waited SHORTCUT_CLAIM_MS for an answer that never came).

Run one:  python3 -m pytest -q tests/integration/test_no_harm.py -k zombie
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import PROGRAMS, SHORTCUT, clean_env, kill_group, stats

HANG = 60       # a hang guard only: every wait below ends on an event


class Procs:
    def __init__(self, rundir):
        self.rundir = rundir
        self.procs = []

    def env(self, extra=None):
        return clean_env(self.rundir, extra, unbuffered=True)

    def start(self, args, accel=True, extra=None, stdin=subprocess.DEVNULL):
        cmd = ([SHORTCUT, "run"] if accel else []) + [str(a) for a in args]
        p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.env(extra),
                             start_new_session=True)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            kill_group(p)


@pytest.fixture
def procs(rundir):
    ps = Procs(rundir)
    yield ps
    ps.close()


def line(p):
    """The next stdout line of p (the hang guard fails the test)."""
    import select
    end = time.monotonic() + HANG
    buf = b""
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        assert left > 0, "no line from %r" % p.args
        r, _, _ = select.select([p.stdout], [], [], left)
        if r:
            b = os.read(p.stdout.fileno(), 1)
            if not b:
                raise AssertionError("%r ended: %r" % (p.args, p.stderr.read()[-2000:]))
            buf += b
    return buf.decode().strip()


def finish(p):
    if p.stdin and p.stdin.closed:
        p.stdin = None
    out, err = p.communicate(timeout=HANG)
    assert p.returncode == 0, (p.args, p.returncode, out[-2000:], err[-2000:])
    return out.decode()


def py(code):
    return [sys.executable, "-c", code]


# A server: listens, prints its port, then per line on stdin accepts one
# connection and echoes it to EOF.
ECHO_SERVER = r"""
import socket, sys
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0)); ls.listen(64)
print(ls.getsockname()[1], flush=True)
for _ in sys.stdin:
    c, _a = ls.accept()
    while True:
        d = c.recv(65536)
        if not d: break
        c.sendall(d)
    c.close()
    print("served", flush=True)
"""

# A client: one connection, one round trip, prints what came back.
ECHO_CLIENT = r"""
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"ping")
got = b""
while len(got) < 4:
    d = s.recv(100)
    if not d: break
    got += d
s.close()
print(got.decode(), flush=True)
"""


def test_listener_killed_zombie_plain_restart(rundir, procs):
    """An accelerated listener killed with SIGKILL and not reaped (a zombie
    answers kill(0)), a plain server started on the same port: an accelerated
    client goes straight to TCP (no_listener), not after SHORTCUT_CLAIM_MS
    (the board entry died with the process)."""
    srv = procs.start(py(ECHO_SERVER), stdin=subprocess.PIPE)
    port = int(line(srv))
    # kill the python process itself (not `shortcut run`): leave it unreaped
    os.kill(srv.pid, signal.SIGKILL)    # shortcut run execs: srv.pid is python
    deadline = time.monotonic() + HANG
    while True:
        with open("/proc/%d/stat" % srv.pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        assert time.monotonic() < deadline
        time.sleep(0.01)
    plain = procs.start(py(ECHO_SERVER) + [port], accel=False, stdin=subprocess.PIPE)
    assert int(line(plain)) == port
    plain.stdin.write(b"go\n")
    plain.stdin.flush()
    cli = procs.start(py(ECHO_CLIENT) + [port], extra={"SHORTCUT_CLAIM_MS": "600000"})
    assert finish(cli).strip() == "ping"
    st = stats(rundir)
    assert st["fallback"]["claim_timeout"] == 0, st
    assert st["fallback"]["no_listener"] >= 1, st


def test_socket_activation_exec_without_library(rundir, procs):
    """An accelerated parent listens, then execs a program without the
    library that accepts on the inherited socket (systemd, inetd-style
    supervisors, `exec` in a wrapper): clients go straight to TCP."""
    child = r"""
import os, socket, sys
ls = socket.socket(fileno=int(sys.argv[1]))
print(ls.getsockname()[1], flush=True)
for _ in range(3):
    c, _a = ls.accept()
    d = c.recv(100)
    c.sendall(d); c.close()
"""
    parent = r"""
import os, socket, sys
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(16)
os.set_inheritable(ls.fileno(), True)
env = dict(os.environ); env.pop("LD_PRELOAD", None)
os.execve(sys.executable, [sys.executable, "-c", sys.argv[1], str(ls.fileno())], env)
"""
    srv = procs.start(py(parent) + [child])
    port = int(line(srv))
    for _ in range(3):
        cli = procs.start(py(ECHO_CLIENT) + [port], extra={"SHORTCUT_CLAIM_MS": "600000"})
        assert finish(cli).strip() == "ping"
    finish(srv)
    st = stats(rundir)
    assert st["fallback"]["claim_timeout"] == 0, st
    assert st["fallback"]["no_listener"] == 3, st


def test_uring_server_speaks_first(rundir, procs, tmp_path):
    """A server that set up io_uring before it listened (MariaDB's InnoDB)
    and greets first; clients read first, in poll() with no timeout.  Its
    listener is never on the board, so nobody waits (was: clients hung for
    ever)."""
    if not os.path.exists("/usr/include/liburing.h"):
        pytest.skip("not installed: liburing-dev (Debian package)")
    exe = str(tmp_path / "uring_greeter")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(PROGRAMS, "uring_greeter.c"),
                    "-luring"], check=True, timeout=HANG)
    n = 20
    srv = procs.start([exe, n])
    port = int(line(srv))
    client = r"""
import select, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    p = select.poll(); p.register(s, select.POLLIN)
    p.poll()
    assert s.recv(100) == b"hello %d\n" % i
    s.sendall(b"ping %d\n" % i)
    r = b""
    while not r.endswith(b"\n"):
        p.poll(); d = s.recv(100); assert d, r; r += d
    assert r == b"PING %d\n" % i, r
    p.poll()
    assert s.recv(100) == b""
    s.close()
print("ok", flush=True)
"""
    cli = procs.start(py(client) + [port, n], extra={"SHORTCUT_CLAIM_MS": "600000"})
    assert finish(cli).strip() == "ok"
    finish(srv)
    st = stats(rundir)
    assert st["fallback"]["claim_timeout"] == 0, st
    assert st["conns_accelerated"] == 0, st


def test_greeting_after_late_decline_wakes_poll(rundir, procs):
    """A client posts its offer and waits in poll() (no timeout) for the
    server's greeting; the server declines only later, at its first use of
    the connection (here: `shortcut off` in between), and greets over TCP.
    poll() must see the greeting (was: it watched only the client's attach
    eventfd, and slept for ever)."""
    server = r"""
import socket, sys
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(16)
print(ls.getsockname()[1], flush=True)
sys.stdin.readline()
c, _a = ls.accept()
c.sendall(b"220 hello\n")
d = c.recv(100)
c.sendall(d.upper()); c.close()
"""
    client = r"""
import select, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("connected", flush=True)
p = select.poll(); p.register(s, select.POLLIN)
p.poll()
g = s.recv(100)
s.sendall(b"quit\n")
r = b""
while True:
    d = s.recv(100)
    if not d: break
    r += d
print(g.decode().strip(), r.decode().strip(), flush=True)
"""
    srv = procs.start(py(server), stdin=subprocess.PIPE)
    port = int(line(srv))
    cli = procs.start(py(client) + [port], extra={"SHORTCUT_CLAIM_MS": "600000"})
    assert line(cli) == "connected"
    subprocess.run([SHORTCUT, "off", "--wait", "0"], env=procs.env(), timeout=HANG,
                   capture_output=True)
    srv.stdin.write(b"go\n")
    srv.stdin.flush()
    assert finish(cli).strip() == "220 hello QUIT"
    finish(srv)
    st = stats(rundir)
    assert st["fallback"]["claim_timeout"] == 0, st


def test_server_killed_client_sees_end(rundir, procs, tmp_path):
    """A long-lived accelerated client, a new server each round, killed with
    SIGKILL at random points (while it sets the connection up, or
    mid-stream): the client always sees EOF or ECONNRESET (was: in about
    half the rounds it waited for ever when the server died between its
    claim and its OPEN)."""
    rounds = 30
    server = r"""
import os, random, signal, socket, sys, threading
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4)
print(ls.getsockname()[1], flush=True)
c, _a = ls.accept()
# die at a random point of the set-up (the first use claims the offer)
# or of the stream
delay = random.choice([0, 0, 0.0002, 0.001, 0.003, 0.01])
threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
while True:
    d = c.recv(65536)
    if not d: break
    c.sendall(d)
"""
    client = r"""
import socket, sys
for line in sys.stdin:
    port = int(line)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(None)
    outcome = "?"
    try:
        while True:
            s.sendall(b"x" * 4096)
            d = s.recv(65536)
            if not d:
                outcome = "eof"; break
    except (ConnectionResetError, BrokenPipeError):
        outcome = "reset"
    s.close()
    print(outcome, flush=True)
"""
    cli = procs.start(py(client), stdin=subprocess.PIPE,
                      extra={"SHORTCUT_CLAIM_MS": "600000"})
    for i in range(rounds):
        srv = procs.start(py(server))
        port = int(line(srv))
        cli.stdin.write(b"%d\n" % port)
        cli.stdin.flush()
        assert line(cli) in ("eof", "reset"), i
        srv.wait(HANG)
    cli.stdin.close()
    finish(cli)
    st = stats(rundir)
    assert st["fallback"]["claim_timeout"] == 0, st


def test_marked_syn_flood_no_stall(rundir, procs):
    """Anyone who can connect can mark a SYN (IP_TOS 0x1c) without making
    an offer: the server must not wait for one (was: up to 200 ms inside the
    program's first call on each such connection, stalling a single-
    threaded server).  The flood's connections are declined at once
    (peer_not_accelerated, never claim_timeout), and an accelerated client
    alongside still gets shared memory."""
    server = r"""
import selectors, socket, sys
sel = selectors.DefaultSelector()
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(128); ls.setblocking(False)
print(ls.getsockname()[1], flush=True)
sel.register(ls, selectors.EVENT_READ)
served = 0
while served < int(sys.argv[1]):
    for k, _ in sel.select():
        if k.fileobj is ls:
            c, _a = ls.accept(); c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
        else:
            d = k.fileobj.recv(65536)
            if d:
                k.fileobj.sendall(d)
            else:
                sel.unregister(k.fileobj); k.fileobj.close(); served += 1
"""
    flood = r"""
import socket, sys
for _ in range(int(sys.argv[2])):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x1c)
    s.connect(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"junk")
    assert s.recv(4) == b"junk"
    s.close()
print("done", flush=True)
"""
    nflood = 20
    srv = procs.start(py(server) + [nflood + 1])
    port = int(line(srv))
    fl = procs.start(py(flood) + [port, nflood], accel=False)   # not ours, no run directory
    assert finish(fl).strip() == "done"
    cli = procs.start(py(ECHO_CLIENT) + [port])
    assert finish(cli).strip() == "ping"
    finish(srv)
    st = stats(rundir)
    assert st["fallback"]["claim_timeout"] == 0, st
    assert st["fallback"]["peer_not_accelerated"] >= nflood, st
    assert st["conns_accelerated"] == 2, st


def test_unusable_rundir_says_so_once(procs, tmp_path):
    """A run directory this user cannot use (another user's) disables
    acceleration: the program runs, and says so once on stderr, naming the
    directory, the cause and the fix (was: silent unless SHORTCUT_LOG=2)."""
    other = tmp_path / "theirs"
    other.mkdir()
    os.chown(other, 65534, 65534)
    procs.rundir = str(other)
    code = r"""
import socket
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4)
for _ in range(3):
    c = socket.create_connection(ls.getsockname()); a, _x = ls.accept()
    c.sendall(b"hi"); assert a.recv(2) == b"hi"; c.close(); a.close()
print("ok", flush=True)
"""
    p = procs.start(py(code))
    out, err = p.communicate(timeout=HANG)
    assert p.returncode == 0 and out.decode().strip() == "ok", (out, err)
    lines = [l for l in err.decode().splitlines() if "shortcut" in l]
    assert len(lines) == 1, err
    assert str(other) in lines[0] and "uid 65534" in lines[0] and "SHORTCUT_RUNDIR" in lines[0]
    r = subprocess.run([SHORTCUT, "stats"], env=procs.env(), capture_output=True, timeout=HANG)
    assert r.returncode != 0 and b"uid 65534" in r.stderr, r


@pytest.mark.parametrize("case", ["world_writable", "group_writable", "symlink",
                                  "default_other_owner"])
def test_unsafe_rundir_refused(procs, tmp_path, case):
    """An existing run directory others could use against us (issue 15: in
    a world-writable SHORTCUT_RUNDIR another user leaked fds into a victim
    and switched it off) is refused: the program runs on TCP and says once
    which setting chose the directory and what is wrong with it; nothing is
    created in it.  A pre-created default directory is not blamed on
    SHORTCUT_RUNDIR when that is not set."""
    if os.geteuid() != 0 and case == "default_other_owner":
        pytest.skip("needs root to give a directory to another user")
    extra = {}
    d = tmp_path / "rd"
    if case == "symlink":
        real = tmp_path / "real"
        real.mkdir(mode=0o700)
        d.symlink_to(real)
        want = "symbolic link"
    elif case == "default_other_owner":
        xdg = tmp_path / "xdg"
        xdg.mkdir(mode=0o700)
        d = xdg / "shortcut"
        d.mkdir(mode=0o700)
        os.chown(d, 65534, 65534)
        extra = {"XDG_RUNTIME_DIR": str(xdg)}
        want = "uid 65534"
    else:
        d.mkdir()
        os.chmod(d, 0o777 if case == "world_writable" else 0o770)
        want = "other users may write"
    procs.rundir = str(d)
    code = r"""
import socket
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4)
for _ in range(3):
    c = socket.create_connection(ls.getsockname()); a, _x = ls.accept()
    c.sendall(b"hi"); assert a.recv(2) == b"hi"; c.close(); a.close()
print("ok", flush=True)
"""
    env = procs.env(extra)
    if case == "default_other_owner":
        del env["SHORTCUT_RUNDIR"]
    p = subprocess.Popen([SHORTCUT, "run"] + py(code), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True)
    procs.procs.append(p)
    out, err = p.communicate(timeout=HANG)
    assert p.returncode == 0 and out.decode().strip() == "ok", (out, err)
    lines = [l for l in err.decode().splitlines() if "shortcut" in l]
    assert len(lines) == 1, err
    assert str(d) in lines[0] and want in lines[0], lines[0]
    if case == "default_other_owner":
        assert "(SHORTCUT_RUNDIR)" not in lines[0] and "SHORTCUT_RUNDIR is not set" in lines[0]
    else:
        assert "(SHORTCUT_RUNDIR)" in lines[0], lines[0]
    assert os.listdir(d) == [], os.listdir(d)
    r = subprocess.run([SHORTCUT, "stats"], env=env, capture_output=True, timeout=HANG)
    assert r.returncode != 0 and want.encode() in r.stderr, r

def test_dead_stats_files_collected(rundir, procs):
    """Every process leaves a stats file; those of dead processes are folded
    into stats-retired (by later processes and by `shortcut stats`) and
    removed, totals kept (one pgbench -C run left 1,612 of them)."""
    pair = r"""
import socket
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4)
c = socket.create_connection(ls.getsockname()); a, _x = ls.accept()
c.sendall(b"x" * 1000); got = 0
while got < 1000: got += len(a.recv(1000))
c.close(); a.close()
"""
    n = 70
    for _ in range(n):
        finish(procs.start(py(pair)))
    files = [f for f in os.listdir(rundir) if f.startswith("stats-") and not f.startswith("stats-retired")]
    assert len(files) < n, files        # later processes collected some
    for _ in range(2):                  # collecting twice counts nothing twice
        st = stats(rundir)
        assert st["conns_accelerated"] == 2 * n, st
        assert st["bytes_shm_sent"] == 1000 * n, st
        assert st["processes"] == n, st
    files = [f for f in os.listdir(rundir) if f.startswith("stats-") and not f.startswith("stats-retired")]
    assert files == [], files
    socks = [f for f in os.listdir(rundir) if f.startswith("p-")]
    assert socks == [], socks
    r = subprocess.run([SHORTCUT, "stats", "--reset"], env=procs.env(), capture_output=True,
                       timeout=HANG)
    assert r.returncode == 0, r
    assert stats(rundir)["conns_accelerated"] == 0
