# SPDX-License-Identifier: MIT
"""`shortcut stat`: the live connections of running processes, with their
mode, addresses, peer process or fallback reason, and bytes."""
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from helpers import SHORTCUT, clean_env, free_port, stat, stats

SERVER = r"""
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
conns = [s.accept()[0] for _ in range(2)]
for c in conns:
    c.sendall(b"x" * 1000)
sys.stdin.readline()            # hold the connections until told
"""
CLIENT = r"""
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
got = 0
while got < 1000:
    got += len(c.recv(4096))
print("got", got, c.getsockname()[1], flush=True)
sys.stdin.readline()
"""


def test_stat_lists_live_connections(rundir):
    env = clean_env(rundir)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, env=env)
    port = srv.stdout.readline().strip()
    accel = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, port],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    plain = subprocess.Popen([sys.executable, "-c", CLIENT, port], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        a_port = int(accel.stdout.readline().split()[2])
        p_port = int(plain.stdout.readline().split()[2])
        time.sleep(0.2)
        rows = stat(env)
        # the server's: the connection on shared memory; the plain
        # client's was left to the kernel at accept (nothing of ours made
        # for it), counted by its reason, not listed
        mine = [r for r in rows if r["pid"] == srv.pid]
        assert len(mine) == 1 and mine[0]["mode"] == "shm", rows
        assert mine[0]["peer"] == f"127.0.0.1:{a_port}" and mine[0]["peer_pid"] == accel.pid
        assert mine[0]["bytes_sent"] == 1000
        assert all(r["peer"] != f"127.0.0.1:{p_port}" for r in rows), rows
        cli = [r for r in rows if r["pid"] == accel.pid]
        assert len(cli) == 1 and cli[0]["mode"] == "shm" and cli[0]["peer_pid"] == srv.pid
        assert cli[0]["bytes_received"] == 1000
        table = subprocess.run([SHORTCUT, "stat"], capture_output=True, text=True, env=env).stdout
        assert "PEER PID / REASON" in table and f"{accel.pid}" in table
        st = stats(env)
        assert st["fallback"]["peer_not_accelerated"] == 1, st
        assert st["bytes_shm_sent"] == 1000 and st["bytes_tcp_sent"] == 0, st
    finally:
        for p in (srv, accel, plain):
            p.kill()
            p.wait()
    # killed, closed nothing: still counted (from the records of the dead)
    st = stats(env)
    assert st["bytes_shm_sent"] == 1000 and st["fallback"]["peer_not_accelerated"] == 1, st


def test_stat_lists_a_client_connection_on_tcp(rundir):
    """A client under shortcut whose connection stays on TCP (a server
    without the library: no_listener) lists it with its peer, its reason
    and its bytes."""
    env = clean_env(rundir)
    penv = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    srv = subprocess.Popen([sys.executable, "-c", SERVER.replace("range(2)", "range(1)")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=penv)
    port = srv.stdout.readline().strip()
    cl = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, port],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert int(cl.stdout.readline().split()[1]) == 1000
        rows = [r for r in stat(env) if r["pid"] == cl.pid]
        assert len(rows) == 1 and rows[0]["mode"] == "tcp", rows
        assert rows[0]["peer"] == f"127.0.0.1:{port}", rows
        assert rows[0]["fallback"] == "no_listener" and rows[0]["bytes_received"] == 1000, rows
        table = subprocess.run([SHORTCUT, "stat"], capture_output=True, text=True, env=env).stdout
        assert "no_listener" in table
        st = stats(env)
        assert st["bytes_tcp_received"] == 1000 and st["fallback"]["no_listener"] == 1, st
    finally:
        for p in (srv, cl):
            p.kill()
            p.wait()


def _stats_files(rundir):
    """{name: (pid, identity)} of this version's stats files (their header:
    magic, version, pid, nrecs, the counters, comm, identity)."""
    import struct
    out = {}
    for f in os.listdir(rundir):
        if not f.startswith("stats-") or f.startswith("stats-retired"):
            continue
        with open(os.path.join(rundir, f), "rb") as fh:
            h = fh.read(16 + 296 + 16 + 8)     # (format 10's counters: 296 bytes)
        if len(h) == 336:
            out[f] = (struct.unpack_from("<i", h, 8)[0], struct.unpack_from("<Q", h, 328)[0])
    return out


def test_stat_dead_identity_not_live(rundir):
    """A dead process's stats file whose pid a live process has (pid reuse,
    or another PID namespace's process: every container's first one is pid
    1): liveness is the recorded identity's, so none is listed (issue 15:
    `shortcut stat` showed a dead process's connections as live; issue 22:
    from the host it called live containers dead)."""
    env = clean_env(rundir)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, env=env)
    port = srv.stdout.readline().strip()
    clis = [subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, port],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            for _ in range(2)]        # (the server answers once both are there)
    later = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"],
                             stdin=subprocess.PIPE, env=env)
    try:
        for c in clis:
            c.stdout.readline()
        assert [r for r in stat(env) if r["pid"] == srv.pid]
        for p in [srv] + clis:
            p.kill()
            p.wait()
        # the server's file, as if `later` had the dead server's pid
        name = [f for f, (pid, _) in _stats_files(rundir).items() if pid == srv.pid][0]
        with open(os.path.join(rundir, name), "r+b") as f:
            f.seek(8)                   # magic, version, pid
            f.write(later.pid.to_bytes(4, sys.byteorder))
        rows = stat(env)
        assert not [r for r in rows if r["pid"] == later.pid], rows
    finally:
        for p in [srv, later] + clis:
            p.kill()
            p.wait()


def test_stats_empty_file_of_dead_process_collected(rundir):
    """A process killed between creating its stats file and giving it its
    size (a fork child killed at once) leaves an empty file: collected with
    the dead processes' files (test_soak's fork/exec soak: 6 left in 300
    rounds); a live process's empty file (being written) stays."""
    env = clean_env(rundir)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"],
                            stdin=subprocess.PIPE)
    try:
        for pid in (dead.pid, live.pid):
            open(os.path.join(rundir, "stats-%d-0badf11e" % pid), "w").close()
        stats(env)
        left = sorted(f for f in os.listdir(rundir) if f.startswith("stats-"))
        assert len(left) == 2 and left[0] == "stats-%d-0badf11e" % live.pid, left
        assert left[1].startswith("stats-retired-v"), left
    finally:
        live.kill()
        live.wait()


def test_stats_older_format_collected(rundir):
    """A run directory used by an older version: its stats-retired of
    another size and its dead processes' files of an older format do not
    stop collection (a stats-retired of the old size once made every
    collection give up: a run directory grew to 93,000 files, 1.7 GB of
    /dev/shm); an older format's file of a dead process is removed, a live
    one's and a newer format's stay; this version's counts are kept."""
    import struct
    env = clean_env(rundir)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"],
                            stdin=subprocess.PIPE)
    magic = 0x53435354

    def put(name, version, size):
        with open(os.path.join(rundir, name), "wb") as f:
            f.write(struct.pack("<IIi", magic, version, 0).ljust(size, b"\0"))
    try:
        with open(os.path.join(rundir, "stats-retired"), "wb") as f:
            f.write(b"\0" * 288)                       # version 5's, unversioned
        put("stats-%d-00000001" % dead.pid, 5, 295216)  # older, dead: removed
        put("stats-%d-00000002" % dead.pid, 1, 100)     # older, dead: removed
        put("stats-%d-00000003" % dead.pid, 999, 4096)  # newer: stays
        put("stats-%d-00000004" % live.pid, 5, 295216)  # older, live: stays
        # this version's connections, counted and folded once the processes die
        srv = subprocess.run([SHORTCUT, "run", sys.executable, "-c", ECHO_PAIR],
                             capture_output=True, text=True, env=env, timeout=60)
        assert srv.returncode == 0, srv.stderr
        st = stats(env)
        assert st["conns_accelerated"] == 2 and st["bytes_shm_sent"] == 2000, st
        left = sorted(f for f in os.listdir(rundir) if f.startswith("stats-"))
        assert left == ["stats-%d-00000003" % dead.pid, "stats-%d-00000004" % live.pid,
                        "stats-retired", left[3]], left
        assert left[3].startswith("stats-retired-v"), left
    finally:
        live.kill()
        live.wait()


ECHO_PAIR = r"""
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a = s.accept()[0]
c.sendall(b"q" * 1000); got = b""
while len(got) < 1000:
    got += a.recv(4096)
a.sendall(got); back = b""
while len(back) < 1000:
    back += c.recv(4096)
assert back == b"q" * 1000
"""


def test_stat_json_escapes_names(rundir):
    """A process name is the process's to choose (prctl PR_SET_NAME): quotes,
    backslashes, control characters and other bytes in it still give valid
    JSON (issue 15: `stat --json` printed it raw)."""
    env = clean_env(rundir)
    name = b'a"b\\c\x01\xffd'
    code = ("import ctypes; ctypes.CDLL(None).prctl(15, ctypes.c_char_p(%r), 0, 0, 0)\n" % name
            + SERVER)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", code], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, env=env)
    port = srv.stdout.readline().strip()
    clis = [subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, port],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            for _ in range(2)]
    try:
        for c in clis:
            c.stdout.readline()
        mine = [r for r in stat(env) if r["pid"] == srv.pid]
        assert len(mine) == 2 and mine[0]["command"] == name.decode("latin-1"), mine
        table = subprocess.run([SHORTCUT, "stat"], capture_output=True, env=env).stdout
        assert b'a"b\\c?' in table, table
    finally:
        for p in [srv] + clis:
            p.kill()
            p.wait()


FORKER = r"""
import os, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a = s.accept()[0]   # this process counts
for i in range(20):                     # children that never open a socket
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
for i in range(10):                     # ... or exec a program
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/true", ["true"])
    os.waitpid(pid, 0)
r, w = os.pipe()
r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:                            # a child that connects: a file of its own
    k = socket.create_connection(s.getsockname()); b = s.accept()[0]
    k.sendall(b"y" * 300); got = 0
    while got < 300:
        got += len(b.recv(4096))
    os.write(w, b"%d\n" % os.getpid())
    os.close(w2)
    os.read(r2, 1)                      # held until told (or the parent gone)
    os._exit(0)
print(os.read(r, 32).decode().strip(), flush=True)
sys.stdin.readline()
os.write(w2, b"x")
"""


def test_fork_child_file_made_at_its_first_connection(rundir):
    """A fork child makes no stats file of its own until it has a connection
    (one per fork cost a forking server ~250 us per connection on ext4); one
    that connects does, and its connections are listed under its pid."""
    env = clean_env(rundir)
    p = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", FORKER], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        kid = int(p.stdout.readline())
        files = _stats_files(rundir)
        pids = sorted(pid for pid, _ in files.values())
        assert pids == sorted([p.pid, kid]), files     # (the shortcut command execs python)
        rows = stat(env)
        mine = [r for r in rows if r["pid"] == kid]
        assert len(mine) == 2 and all(r["mode"] == "shm" for r in mine), rows
        assert sorted(r["bytes_sent"] for r in mine) == [0, 300], rows
        assert [r for r in rows if r["pid"] == p.pid], rows
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()


FORKING_SERVER = r"""
import os, signal, socket, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)     # children reaped by the kernel
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
while True:
    c = s.accept()[0]
    if os.fork() == 0:                  # the child answers the connection
        c.sendall(c.recv(100))
        os._exit(0)
    c.close()
"""


def test_forking_server_child_on_tcp_makes_no_file(rundir):
    """A child of a server forking per connection that serves a connection
    staying on TCP (a plain client) makes no stats file and no identity of
    its own: its fallback is counted in its parent's file, and the bytes
    arrive (making both cost such a server ~100 us per connection)."""
    env = clean_env(rundir)
    p = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", FORKING_SERVER],
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        port = int(p.stdout.readline())
        for i in range(6):              # plain clients: no library here
            with socket.create_connection(("127.0.0.1", port)) as c:
                c.sendall(b"ping %d" % i)
                assert c.recv(100) == b"ping %d" % i
        files = _stats_files(rundir)
        assert [pid for pid, _ in files.values()] == [p.pid], files
        st = stats(env)
        assert st["fallback"]["peer_not_accelerated"] == 6, st
        assert st["conns_accelerated"] == 0, st
    finally:
        p.kill()
        p.wait()



@pytest.mark.skipif(shutil.which("strace") is None, reason="strace (Debian package strace) missing")
def test_forking_server_decides_tcp_at_accept(rundir, tmp_path):
    """A connection that stays on TCP (a plain client's: unmarked SYN, no
    offer) is decided in the process that accepted it, not in the child
    a forking server hands it to: the saved SYN is read once, in the
    parent, and no child reads it (each child's look at the board and the
    stats pages was a page fault there). The bytes arrive and every
    fallback is counted."""
    env = clean_env(rundir)
    out = tmp_path / "strace.txt"
    p = subprocess.Popen(["strace", "-f", "-e", "trace=getsockopt,accept4,accept", "-o", str(out),
                          SHORTCUT, "run", sys.executable, "-c", FORKING_SERVER],
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        port = int(p.stdout.readline())
        n = 6
        for i in range(n):              # plain clients: no library here
            with socket.create_connection(("127.0.0.1", port)) as c:
                c.sendall(b"ping %d" % i)
                assert c.recv(100) == b"ping %d" % i
        st = stats(env)
        assert st["fallback"]["peer_not_accelerated"] == n, st
        assert st["conns_accelerated"] == 0, st
    finally:
        p.kill()
        p.wait()
    lines = out.read_text().splitlines()
    acceptors = {ln.split()[0] for ln in lines if " accept" in ln and "<unfinished" not in ln}
    reads = [ln.split()[0] for ln in lines if "TCP_SAVED_SYN" in ln]
    assert len(acceptors) == 1, acceptors
    assert len(reads) == n and set(reads) == acceptors, (reads, acceptors)


PLAIN_CLIENT = r"""
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(b"x" * 300)
print("sent", flush=True)
sys.stdin.readline()            # hold the connection until told
"""


def _plain_client(env, tmp_path, accel, check):
    """PLAIN_CLIENT against a server without the library, under strace
    (and `shortcut run` if accel); check(port) while it holds its
    connection.  The getsockname calls its process made."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    out = tmp_path / ("strace-%s.txt" % accel)
    cli = subprocess.Popen(["strace", "-f", "-e", "trace=connect,getsockname", "-o", str(out)] +
                           ([SHORTCUT, "run"] if accel else []) +
                           [sys.executable, "-c", PLAIN_CLIENT, str(port)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        c, _ = srv.accept()
        assert cli.stdout.readline() == "sent\n"
        got = b""
        while len(got) < 300:
            got += c.recv(4096)
        check(port)
        cli.stdin.write("\n")
        cli.stdin.flush()
        assert cli.wait(timeout=30) == 0
    finally:
        cli.kill()
        cli.wait()
        srv.close()
    lines = out.read_text().splitlines()
    assert any("connect(" in ln and f"htons({port})" in ln for ln in lines), lines
    return len([ln for ln in lines if "getsockname(" in ln])


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace (Debian package strace) missing")
def test_client_of_plain_server_asks_nothing(rundir, tmp_path):
    """A client's connection to a server without the library goes to TCP
    at connect (no_listener) and is listed with its peer, its reason and
    its bytes, but its own address is not asked of the kernel: a
    getsockname per connection is a system call the program does not
    make (issue 24's first row); `shortcut stat` shows it as "-"."""
    env = clean_env(rundir)

    def listed(port):
        rows = [r for r in stat(env) if r["peer"] == f"127.0.0.1:{port}"]
        assert len(rows) == 1, rows
        assert rows[0]["mode"] == "tcp" and rows[0]["fallback"] == "no_listener", rows
        assert rows[0]["local"] == "-" and rows[0]["bytes_sent"] == 300, rows
        st = stats(env)
        assert st["fallback"]["no_listener"] == 1 and st["bytes_tcp_sent"] == 300, st
    plain = _plain_client(env, tmp_path, False, lambda port: None)
    assert _plain_client(env, tmp_path, True, listed) == plain    # (Python's own, if any)


EVERY_CALL = r"""
import ctypes, os, socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
fd = c.fileno()
libc = ctypes.CDLL(None, use_errno=True)        # (the preloaded library's first)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
def mmsg(call, bufs, *extra):
    # sendmmsg or recvmmsg of one message per buffer: their lengths
    v = (mmsghdr * len(bufs))()
    iovs = [iovec(ctypes.cast(b, ctypes.c_void_p), len(b)) for b in bufs]
    for m, io in zip(v, iovs):
        m.hdr.iov, m.hdr.iovlen = ctypes.pointer(io), 1
    k = call(fd, v, len(bufs), *extra)
    assert k > 0, ctypes.get_errno()
    return [v[i].len for i in range(k)]
def sendmmsg(b):
    assert mmsg(libc.sendmmsg, [ctypes.create_string_buffer(b[:4], 4),
                                ctypes.create_string_buffer(b[4:], len(b) - 4)], 0) == [4, len(b) - 4]
    return len(b)
def recvmmsg(n):
    buf = ctypes.create_string_buffer(n)
    k = mmsg(libc.recvmmsg, [buf], 0x10000, None)[0]     # MSG_WAITFORONE
    return buf.raw[:k]
def readv(n):
    a, b = bytearray(1), bytearray(max(n - 1, 1))
    k = os.readv(fd, [a, b])
    return bytes(a + b)[:k]
sends = [c.send, lambda b: c.sendto(b, c.getpeername()), lambda b: c.sendmsg([b[:4], b[4:]]),
         lambda b: os.write(fd, b), lambda b: os.writev(fd, [b[:3], b[3:]]), sendmmsg]
recvs = [c.recv, lambda n: c.recvfrom(n)[0], lambda n: c.recvmsg(n)[0],
         lambda n: os.read(fd, n), readv, recvmmsg]
for i, (send, recv) in enumerate(zip(sends, recvs)):
    m = b"%010d" % i
    assert send(m) == 10
    if i == 0:
        assert c.recv(10, socket.MSG_PEEK)      # a peek: not counted
    got = b""
    while len(got) < 10:
        got += recv(10 - len(got))
    assert got == m, (i, got)
print("done", flush=True)
sys.stdin.readline()
c.close()
"""


def test_client_of_plain_server_counts_every_call(rundir):
    """A connection that stays on TCP (a server without the library) goes
    straight to the kernel at every call, and each call's bytes are
    counted, in its record while it is open and in the totals after:
    send, sendto, sendmsg, write, writev, sendmmsg; recv, recvfrom,
    recvmsg, read, readv, recvmmsg (a peek is not)."""
    env = clean_env(rundir)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    cli = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", EVERY_CALL, str(port)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        c, _ = srv.accept()
        echoed = 0
        while echoed < 60:
            b = c.recv(4096)
            assert b, "the client ended after %d bytes" % echoed
            c.sendall(b)
            echoed += len(b)
        assert cli.stdout.readline() == "done\n"
        rows = [r for r in stat(env) if r["pid"] == cli.pid]
        assert len(rows) == 1 and rows[0]["fallback"] == "no_listener", rows
        assert rows[0]["bytes_sent"] == 60 and rows[0]["bytes_received"] == 60, rows
        st = stats(env)
        assert st["bytes_tcp_sent"] == 60 and st["bytes_tcp_received"] == 60, st
        cli.stdin.write("\n")
        cli.stdin.flush()
        assert cli.wait(timeout=30) == 0
        assert c.recv(10) == b""
    finally:
        cli.kill()
        cli.wait()
        srv.close()
    st = stats(env)
    assert st["bytes_tcp_sent"] == 60 and st["bytes_tcp_received"] == 60, st
    assert st["bytes_shm_sent"] == 0 and st["conns_accelerated"] == 0, st


LISTENER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("up", flush=True)
while True:
    c = s.accept()[0]
    c.sendall(c.recv(100))
    c.close()
"""
DIALER = r"""
import socket, sys
port = int(sys.argv[1])
for line in sys.stdin:                  # one connection per line
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"ping"); assert c.recv(100) == b"ping"
    c.close()
    print("ok", flush=True)
"""


def _board_setup(rundir):
    """a run directory's environment (every connection offered, none learnt
    short), a free port, and the path its offer board will have"""
    env = clean_env(rundir)
    env["SHORTCUT_SHORT_TCP"] = "0"
    port = free_port()
    return env, port, os.path.join(rundir, "tcp-v6-%d" % port)


def test_board_of_dead_listeners_collected(rundir):
    """An offer board whose listeners all died is removed by the run
    directory's collection (each port a server ever listened on kept its
    board, up to 20 MB of /dev/shm each); a new listener on that port makes
    a new one, and a client that still had the old one mapped (a process
    that lives on, connecting again and again) finds the new listener."""
    env, port, board = _board_setup(rundir)
    dialer = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", DIALER, str(port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    servers = []
    try:
        for round_ in range(3):
            srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", LISTENER, str(port)],
                                   stdout=subprocess.PIPE, text=True, env=env)
            servers.append(srv)
            assert srv.stdout.readline() == "up\n"
            ino = os.stat(board).st_ino
            for _ in range(2):
                dialer.stdin.write("go\n")
                dialer.stdin.flush()
                assert dialer.stdout.readline() == "ok\n"
            srv.kill()
            srv.wait()
            st = stats(env)
            # both ends of every connection so far on shared memory
            assert st["conns_accelerated"] == 4 * (round_ + 1), (st["fallback"], st)
            assert not st["conns_fallback"], st
            assert not os.path.exists(board), os.listdir(rundir)   # collected
            if round_:
                assert ino != last_ino
            last_ino = ino
    finally:
        for p in servers + [dialer]:
            p.kill()
            p.wait()


RELISTENER = r"""
import os, socket, sys
port = int(sys.argv[1])
for round_ in range(2):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", port)); l.listen()
    print("up", flush=True)
    c = l.accept()[0]
    c.sendall(c.recv(100))
    c.close()
    if round_ == 0:
        l.close()
        print("closed", flush=True)
        sys.stdin.readline()            # until the board was collected
print("done", flush=True)
sys.stdin.readline()
"""


def test_board_collected_then_same_process_listens_again(rundir):
    """A process closes its listener; a collection removes the board; the
    same process listens on that port again: its entry and its lock go on
    the new board (its lock once stayed on the removed one: clients found
    no listener, and the next collection removed the live listener's
    board)."""
    env, port, board = _board_setup(rundir)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", RELISTENER, str(port)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def dial():
        r = subprocess.run([SHORTCUT, "run", sys.executable, "-c", DIALER, str(port)],
                           input="go\n", capture_output=True, text=True, env=env, timeout=60)
        assert r.stdout == "ok\n", r

    try:
        assert srv.stdout.readline() == "up\n"
        dial()
        assert srv.stdout.readline() == "closed\n"
        stats(env)
        assert not os.path.exists(board)
        srv.stdin.write("\n")
        srv.stdin.flush()
        assert srv.stdout.readline() == "up\n"
        stats(env)                     # the live listener's board stays
        assert os.path.exists(board)
        dial()
        assert srv.stdout.readline() == "done\n"
        st = stats(env)
        assert os.path.exists(board)
        assert st["conns_accelerated"] == 4 and not st["conns_fallback"], (st["fallback"], st)
    finally:
        srv.kill()
        srv.wait()


DEAD_ENTRY = r"""
import os, signal, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
port = s.getsockname()[1]
pid = os.fork()
if pid == 0:                        # the server forks a child per connection
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        c = s.accept()[0]
        if os.fork() == 0:
            c.sendall(c.recv(100)); os._exit(0)
        c.close()
s.close()                           # our entry on the board: dead from now on
for i in range(int(sys.argv[1])):
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"x%d" % i)
        assert c.recv(100) == b"x%d" % i
os.kill(pid, 9); os.waitpid(pid, 0)
print("ok", flush=True)
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace (Debian package strace) missing")
def test_dead_listener_entry_not_tested_at_every_connect(rundir, tmp_path):
    """A listener entry whose lock is not held (here the parent's, which
    closed its copy of the socket its forking server child listens on)
    is believed dead for a second: a client's connects do not each open
    the board and test its lock again (they did: 4 system calls and a
    walk of the file's locks per connect). Every connection still goes
    on shared memory, through the live entry."""
    env = clean_env(rundir)
    env["SHORTCUT_SHORT_TCP"] = "0"
    n = 60
    out = tmp_path / "strace.txt"
    t0 = time.monotonic()
    r = subprocess.run(["strace", "-f", "-e", "trace=fcntl", "-o", str(out), SHORTCUT, "run",
                        sys.executable, "-c", DEAD_ENTRY, str(n)],
                       capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout == "ok\n", r
    lines = out.read_text().splitlines()
    client = lines[0].split()[0]        # (shortcut run execs the program)
    dead = [ln for ln in lines if ln.split()[0] == client and "F_OFD_GETLK" in ln and
            "l_type=F_UNLCK" in ln]
    # the entries churn while the first children take theirs over (a
    # few looks), then one look a second
    assert len(dead) <= 8 + int(elapsed) + 1 < n // 2, (len(dead), elapsed)
    st = stats(env)
    assert st["conns_accelerated"] == 2 * n and not st["conns_fallback"], st
