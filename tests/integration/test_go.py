# SPDX-License-Identifier: MIT
"""Go programs under `shortcut run` (issue 26): every Go toolchain this
machine can get, each end under `shortcut run`, byte-exact results and the
stats showing the connections on shared memory.

Go makes its own system calls; the interposer reaches them by patching the
runtime's system-call funnel of a dynamically linked Go binary (cgo in use:
these programs are built with CGO_ENABLED=1, so they link libc). A static
binary (CGO_ENABLED=0) stays on kernel TCP and must still work.

Toolchains (ids in the test names), each found or skipped with its name:

  go1.19    /usr/lib/go-1.19 (Debian bookworm's golang-1.19-go): left on
            TCP by the interposer (its netpoller's epoll calls are stubs of
            their own), so its rows check that it works there
  go1.21, go1.22, go1.23
            bookworm-backports' golang-1.2x-go, unpacked by
            tests/integration/runtimes/install.sh into
            build/runtimes/toolchains/ (or installed in /usr/lib/go-1.2x)
  local     the machine's own go (PATH, /usr/local/go/bin/go)
  go1.27.3  fetched from the Go module proxy by the go command
            (GOTOOLCHAIN=go1.27.3; install.sh, or the first test here) into
            build/runtimes/go/path, then run from there

Rows, for each toolchain: Go <-> Go echo (io.Copy(conn, conn): splice),
a Go relay (io.Copy both ways between two TCP connections: splice), Go
client -> C server, C client -> Go server, net/http server + client, a
static build (on TCP, working), MPTCP sockets (Go >= 1.21, where the
kernel has MPTCP on). For the machine's own go only: a stripped
(-ldflags=-s -w) and a PIE build (the funnel found by its prologue), a
relay with plain read/write copies, and the stress test: 320 connections,
runtime.GC in a loop, stack growth, a CPU-bound spinner (asynchronous
preemption), os/exec during the traffic, GOMAXPROCS 1 and 2, 3 rounds each
(SC_GO_STRESS_ROUNDS=50 for the issue's 50 runs; SC_GO_STRESS_TOOLCHAIN=id
for another toolchain).

The programs: tests/integration/runtimes/goaccel/ (Go), runtimes/go/
(net/http), runtimes/c/echo_peer.c; built into build/runtimes/go/<id>/ and
build/runtimes/c/ (cached: the go command's own build cache).

Run one:  python3 -m pytest -q tests/integration/test_go.py -k 'echo and local'
          SC_GO_STRESS_ROUNDS=50 python3 -m pytest -q tests/integration/test_go.py -k stress
"""
import functools
import json
import os
import re
import shutil
import struct
import subprocess
import time

import pytest

import test_runtimes as rt
from helpers import BUILD, SHORTCUT, tail
from test_runtimes import Run, check_shm, kv, result_line, stale

SRC = rt.SRC
OUT = os.path.join(BUILD, "runtimes")
GOOUT = os.path.join(OUT, "go")
TOOLCHAINS_DIR = os.path.join(OUT, "toolchains")
INSTALL = "tests/integration/runtimes/install.sh"

TOOLCHAINS = ["go1.19", "go1.21", "go1.22", "go1.23", "local", "go1.27.3"]
PROXY_TOOLCHAIN = "go1.27.3"

CONNS, MSGS, MAX = 8, 16, 1 << 20           # echo rows: ~20 MB each way
HTTP_REQUESTS, HTTP_BIG = 600, 4 << 20
STRESS_CONNS, STRESS_MSGS, STRESS_MAX = 320, 16, 256 << 10
STRESS_ROUNDS = int(os.environ.get("SC_GO_STRESS_ROUNDS", "3"))
STRESS_TOOLCHAIN = os.environ.get("SC_GO_STRESS_TOOLCHAIN", "local")
CLIENT_GUARD = "75s"        # the Go clients' own hang guard: they print each connection's state


# ---- toolchains and builds ----------------------------------------------------------

def _goversion(go, env):
    try:
        r = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, env=env,
                           timeout=300, cwd=GOOUT)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    v = r.stdout.strip()
    return (v, "") if r.returncode == 0 and v.startswith("go") else (None, (r.stderr or r.stdout).strip())


def _base_env():
    os.makedirs(os.path.join(GOOUT, "path"), exist_ok=True)
    e = dict(os.environ, GOPATH=os.path.join(GOOUT, "path"), GOCACHE=os.path.join(GOOUT, "cache"),
             GOFLAGS="-modcacherw", GOTOOLCHAIN="local", GOPROXY="off")
    e.pop("GOROOT", None)
    return e


def _local_go():
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK)
                                  else None)


def _fetch_toolchain(tid, env):
    """GOTOOLCHAIN=tid: the go command fetches it (a go >= 1.21 can);
    an error in words, or None"""
    for g in (_local_go(), os.path.join(TOOLCHAINS_DIR, "usr/lib/go-1.23/bin/go")):
        if g and os.access(g, os.X_OK):
            v, _ = _goversion(g, env)
            if v and re.match(r"go1\.(2[1-9]|[3-9]\d)", v):
                e = dict(env, GOTOOLCHAIN=tid)
                e.pop("GOPROXY")
                try:
                    r = subprocess.run([g, "version"], capture_output=True, text=True, env=e, timeout=120,
                                       cwd=GOOUT)
                except subprocess.TimeoutExpired:
                    return "timed out (the proxy unreachable?)"
                return None if r.returncode == 0 else (r.stderr or r.stdout).strip()[-300:]
    return "no go >= 1.21 to fetch it with"


@functools.lru_cache(maxsize=None)
def toolchain(tid):
    """(go command, environment, version) for a toolchain id, or a skip
    reason (a str)."""
    env = _base_env()
    if tid == "local":
        go = _local_go()
        if go is None:
            return f"toolchain local: no go on PATH nor /usr/local/go/bin/go (Debian package golang-go; {INSTALL})"
    elif tid == PROXY_TOOLCHAIN:
        # the go command keeps a fetched toolchain in its module cache; run
        # from there it is an ordinary go (GOTOOLCHAIN=local, no network)
        go = os.path.join(GOOUT, "path", "pkg", "mod", "golang.org",
                          f"toolchain@v0.0.1-{tid}.linux-amd64", "bin", "go")
        if not os.access(go, os.X_OK):
            err = _fetch_toolchain(tid, env)
            if err:
                return f"toolchain {tid}: not fetched from the Go module proxy ({err}); {INSTALL} fetches it"
    else:
        ver = tid[2:]
        cands = [f"/usr/lib/go-{ver}/bin/go", os.path.join(TOOLCHAINS_DIR, f"usr/lib/go-{ver}/bin/go")]
        go = next((g for g in cands if os.access(g, os.X_OK)), None)
        if go is None:
            where = "bookworm's golang-1.19-go" if ver == "1.19" else f"bookworm-backports' golang-{ver}-go"
            return f"toolchain {tid} not found ({' or '.join(cands)}): {where}; {INSTALL} gets it"
    v, err = _goversion(go, env)
    if v is None:
        return f"toolchain {tid}: {go} env GOVERSION failed: {err[-300:]}"
    if tid != "local" and not (v == tid or v.startswith(tid + ".")):
        return f"toolchain {tid}: {go} is {v}"
    return go, env, v


def need_toolchain(tid):
    t = toolchain(tid)
    if isinstance(t, str):
        pytest.skip(t)
    return t


def dynamic(path):
    """whether an ELF executable asks for a program interpreter (PT_INTERP):
    linked with libc, so LD_PRELOAD reaches it"""
    with open(path, "rb") as f:
        b = f.read(1 << 16)
    phoff, = struct.unpack_from("<Q", b, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", b, 0x36)
    return any(struct.unpack_from("<I", b, phoff + i * phentsize)[0] == 3 for i in range(phnum))


# executables built by a Go the interposer leaves on TCP (1.19, 1.20: their
# netpoller's epoll calls bypass the funnel; src/core/gofunnel.c)
ON_TCP = set()


def _minor(version):
    m = re.match(r"go1\.(\d+)", version)
    return int(m.group(1)) if m else None


@functools.lru_cache(maxsize=None)
def _go_build(tid, prog, variant):
    t = toolchain(tid)
    if isinstance(t, str):
        return LookupError(t)
    go, env, version = t
    env = dict(env, CGO_ENABLED="0" if variant == "static" else "1")
    out = os.path.join(GOOUT, tid)
    os.makedirs(out, exist_ok=True)
    exe = os.path.join(out, f"{prog}-{variant}")
    flags = {"cgo": [], "static": [], "strip": ["-ldflags=-s -w"], "pie": ["-buildmode=pie"]}[variant]
    # the go command's cache makes a build with nothing changed a fraction
    # of a second; the first one per toolchain compiles the standard library
    r = subprocess.run([go, "build", "-o", exe] + flags + ["."], cwd=os.path.join(SRC, prog), env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return ValueError(f"building {prog} ({variant}) with {tid} ({version}) failed:\n"
                          f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    if dynamic(exe) != (variant != "static"):
        return ValueError(f"{exe}: {'static' if variant != 'static' else 'dynamic'}, "
                          f"built with CGO_ENABLED={env['CGO_ENABLED']}")
    if (_minor(version) or 99) < 21:
        ON_TCP.add(exe)
    return exe


def go_build(tid, prog="goaccel", variant="cgo"):
    r = _go_build(tid, prog, variant)
    if isinstance(r, LookupError):
        pytest.skip(str(r))
    if isinstance(r, Exception):
        pytest.fail(str(r))
    return r


@pytest.fixture(scope="module")
def c_peer():
    cc = rt.need_tool("cc", what="Debian package gcc")
    out = os.path.join(OUT, "c")
    os.makedirs(out, exist_ok=True)
    exe, src = os.path.join(out, "echo_peer"), os.path.join(SRC, "c", "echo_peer.c")
    if stale(exe, src):
        rt.build("echo_peer.c", [cc, "-O2", "-g", "-Wall", "-o", exe, src, "-lpthread"], SRC)
    return exe


@pytest.fixture
def sc():
    with Run() as r:
        yield r


# ---- checks ------------------------------------------------------------------------

def go_server(sc, name, args, accel=True):
    # not waiting for the interposer's "accelerated" log line: a Go server
    # the Go entry missed would fail there after a minute; the stats below
    # say what happened to its connections
    return sc.server(name, args, accel=accel, registered=False)


def go_client(sc, name, args, env=None):
    """Run a Go client (goaccel) under shortcut run to its end. Should its
    own hang guard fire ("hang: end" on stdout), `shortcut stat` is read
    while its connections are still there (.stat_at_hang), then its
    standard input is closed and it exits 3. Returns the process, .stdout
    and .stderr set."""
    sc.seq += 1
    out, err = sc.path(f"{name}.{sc.seq}.out"), sc.path(f"{name}.{sc.seq}.err")
    e = dict(sc.env)
    e.update(env or {})
    p = sc._popen([SHORTCUT, "run"] + list(args) + ["--hold"], open(out, "wb"), open(err, "wb"), e,
                  stdin=subprocess.PIPE)
    p.name, p.out, p.err, p.stat_at_hang = name, out, err, None
    sc.procs.append(p)
    deadline = time.monotonic() + rt.CLIENT_S + 60      # a hang guard over the client's own
    while p.poll() is None:
        if p.stat_at_hang is None and "hang: end" in tail(out, 1 << 16):
            p.stat_at_hang = json.dumps(sc.stat(), indent=None)
            p.stdin.close()
        if time.monotonic() > deadline:
            sc.kill(p)
            break
        time.sleep(0.05)
    if not p.stdin.closed:
        p.stdin.close()
    p.stdout, p.stderr = tail(out, 1 << 20), tail(err, 1 << 20)
    return p


def client_ok(sc, c, what):
    res = result_line(c.stdout)
    at_hang = getattr(c, "stat_at_hang", None)
    assert c.returncode == 0 and res and res["ok"] == "true" and res["errors"] == "0", \
        f"{what}: {rt.signame(c.returncode)}\nstdout: {c.stdout[-4000:]}\nstderr: {c.stderr[-3000:]}" \
        + (f"\nshortcut stat when the client's hang guard fired: {at_hang}" if at_hang else "") \
        + sc.server_logs() + f"\nstats: {sc.stats_text()}"
    return res


def server_done(sc, srv, conns, nbytes, what):
    """the server ends by itself after its connections; it read nbytes"""
    try:
        srv.wait(rt.CLIENT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: the server did not end after its {conns} connections" + sc.server_logs()
                    + f"\nstats: {sc.stats_text()}")
    s = kv(tail(srv.out))
    assert srv.returncode == 0 and s.get("conns") == str(conns) and s.get("errors") == "0" and \
        s.get("bytes") == str(nbytes), \
        f"{what}: server {rt.signame(srv.returncode)}, {tail(srv.out)!r}, the client sent {nbytes} bytes" \
        + sc.server_logs()


def accelerated(sc, ends, payload, what, exe=None):
    """every connection end on shared memory; for a Go the interposer
    leaves on TCP (exe in ON_TCP: Go 1.19, 1.20), none, and the program
    worked all the same"""
    sc.wait_idle()
    st = sc.stats()
    if exe in ON_TCP:
        assert st["live_processes"] == 0, st
        assert st["conns_accelerated"] == 0 and st["bytes_shm_sent"] == 0, \
            f"{what}: a Go 1.20 program's epoll calls bypass the funnel, yet on shared memory: {st}"
        return
    check_shm(st, ends, payload, what)


def go_args(extra=()):
    return ["--conns", str(CONNS), "--msgs", str(MSGS), "--max", str(MAX), "--timeout", CLIENT_GUARD] + list(extra)


# ---- the rows ------------------------------------------------------------------------

def echo_pair(sc, exe, what, server_exe=None):
    srv = go_server(sc, "go-echo", [server_exe or exe, "echo", "--conns", str(CONNS)])
    c = go_client(sc, "go-client", [exe, "client", str(srv.port)] + go_args())
    res = client_ok(sc, c, what)
    server_done(sc, srv, CONNS, res["bytes"], what)
    # every byte went out and came back: sent once by each end
    accelerated(sc, 2 * CONNS, 2 * int(res["bytes"]), what, exe)


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_go_echo(sc, tid):
    """Go client (8 connections x 16 messages of 1 B..1 MiB, compared) <->
    Go echo server (io.Copy(conn, conn)), both under shortcut run: on shared
    memory, byte-exact."""
    echo_pair(sc, go_build(tid), f"Go <-> Go echo ({tid})")


@pytest.mark.parametrize("variant", ["strip", "pie"])
def test_go_echo_build(sc, variant):
    """The echo pair built stripped (-ldflags=-s -w: no symbols, the funnel
    found by its prologue) or as PIE, with the machine's own go."""
    echo_pair(sc, go_build("local", variant=variant), f"Go <-> Go echo ({variant} build)")


def relay_trio(sc, exe, how, what):
    srv = go_server(sc, "go-echo", [exe, "echo", "--conns", str(CONNS)])
    rel = go_server(sc, "go-relay", [exe, "relay", str(srv.port), "--conns", str(CONNS), "--copy", how])
    c = go_client(sc, "go-client", [exe, "client", str(rel.port)] + go_args())
    res = client_ok(sc, c, what)
    server_done(sc, rel, CONNS, res["bytes"], what + ": the relay")
    server_done(sc, srv, CONNS, res["bytes"], what + ": the echo server")
    # 16 connections; the payload crosses four connection ends each way
    accelerated(sc, 4 * CONNS, 4 * int(res["bytes"]), what, exe)


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_go_relay(sc, tid):
    """Go client -> Go relay -> Go echo server: the relay io.Copy's both
    ways between two TCP connections (Go splices them) and half-closes each
    way at EOF; every byte compared, all 16 connections on shared memory."""
    relay_trio(sc, go_build(tid), "splice", f"Go relay, io.Copy ({tid})")


def test_go_relay_buf(sc):
    """The relay and echo with plain read/write copies (no splice), the
    machine's own go: tells a splice fault from another."""
    exe = go_build("local")
    srv = go_server(sc, "go-echo", [exe, "echo", "--conns", str(CONNS), "--copy", "buf"])
    rel = go_server(sc, "go-relay", [exe, "relay", str(srv.port), "--conns", str(CONNS), "--copy", "buf"])
    c = go_client(sc, "go-client", [exe, "client", str(rel.port)] + go_args())
    res = client_ok(sc, c, "Go relay, read/write")
    server_done(sc, rel, CONNS, res["bytes"], "the relay (read/write)")
    server_done(sc, srv, CONNS, res["bytes"], "the echo server (read/write)")
    accelerated(sc, 4 * CONNS, 4 * int(res["bytes"]), "Go relay, read/write")


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_go_to_c(sc, c_peer, tid):
    """Go client -> C echo server (a thread per connection, read/write)."""
    exe = go_build(tid)
    what = f"Go -> C ({tid})"
    srv = sc.server("c-echo", [c_peer, "server", str(CONNS)])
    c = go_client(sc, "go-client", [exe, "client", str(srv.port)] + go_args())
    res = client_ok(sc, c, what)
    server_done(sc, srv, CONNS, res["bytes"], what)
    accelerated(sc, 2 * CONNS, 2 * int(res["bytes"]), what, exe)


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_c_to_go(sc, c_peer, tid):
    """C client (a writer and a reader per connection, every byte checked)
    -> Go echo server."""
    exe = go_build(tid)
    what = f"C -> Go ({tid})"
    srv = go_server(sc, "go-echo", [exe, "echo", "--conns", str(CONNS)])
    c = sc.run("c-client", [c_peer, "client", str(srv.port), str(CONNS), str(MSGS), str(MAX), "7"])
    res = client_ok(sc, c, what)
    server_done(sc, srv, CONNS, res["bytes"], what)
    accelerated(sc, 2 * CONNS, 2 * int(res["bytes"]), what, exe)


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_go_http(sc, tid):
    """net/http server + client (keep-alive, 8 connections): 600 requests
    (GET, POST echoed and compared) and a 4 MiB POST checked by SHA-256."""
    exe = go_build(tid, "go")
    what = f"Go net/http ({tid})"
    srv = go_server(sc, "go-http", [exe, "server"])
    c = sc.run("go-http-client", [exe, "client", str(srv.port), str(HTTP_REQUESTS), str(HTTP_BIG)])
    res = client_ok(sc, c, what)
    sc.wait_idle()
    sc.stop(srv)
    # the Transport opens what it needs (up to 8): at least one connection
    accelerated(sc, 2, int(res["bytes"]), what, exe)


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_go_static(sc, c_peer, tid):
    """A static build (CGO_ENABLED=0: no libc, nothing preloaded) under
    shortcut run stays on kernel TCP, says so, and works: Go <-> Go, then an
    accelerated C client against the static Go server (it finds no
    accelerated listener)."""
    exe = go_build(tid, variant="static")
    what = f"static Go ({tid})"
    srv = go_server(sc, "go-echo-static", [exe, "echo", "--conns", str(CONNS + 1)])
    c = go_client(sc, "go-client-static", [exe, "client", str(srv.port)] + go_args())
    res = client_ok(sc, c, what)
    cc = sc.run("c-client", [c_peer, "client", str(srv.port), "1", "4", "65536", "3"])
    cres = client_ok(sc, cc, what + ", C client")
    server_done(sc, srv, CONNS + 1, int(res["bytes"]) + int(cres["bytes"]), what)
    # shortcut run says so, and why (cli/target.c)
    assert "stay on TCP" in tail(srv.err), f"{what}: shortcut run did not say: {tail(srv.err)!r}"
    sc.wait_idle()
    st = sc.stats()
    assert st["live_processes"] == 0, st
    assert st["conns_accelerated"] == 0 and st["bytes_shm_sent"] == 0, \
        f"{what}: a static Go binary cannot be reached, yet stats count shared memory: {st}"
    assert st["fallback"]["no_listener"] >= 1, f"{what}: the C client's fallback: {st}"
    assert st["bytes_tcp_sent"] >= int(cres["bytes"]), st


def mptcp_enabled():
    try:
        return open("/proc/sys/net/mptcp/enabled").read().strip() == "1"
    except OSError:
        return False


@pytest.mark.parametrize("tid", TOOLCHAINS)
def test_go_mptcp(sc, tid):
    """Go <-> Go echo on MPTCP sockets (ListenConfig and Dialer's
    SetMultipathTCP, Go 1.21 on; Go 1.24 and later may listen with MPTCP
    by default): between two local accelerated programs still a TCP
    connection to its users, so on shared memory like one."""
    exe = go_build(tid)
    if not mptcp_enabled():
        pytest.skip("MPTCP off in this kernel (net.mptcp.enabled)")
    _, _, version = need_toolchain(tid)
    m = re.match(r"go1\.(\d+)", version)
    if m and int(m.group(1)) < 21:
        pytest.skip(f"{tid} ({version}): no MPTCP API before Go 1.21")
    what = f"Go <-> Go echo on MPTCP ({tid})"
    srv = go_server(sc, "go-echo-mptcp", [exe, "echo", "--conns", str(CONNS), "--mptcp"])
    c = go_client(sc, "go-client-mptcp", [exe, "client", str(srv.port), "--mptcp"] + go_args())
    res = client_ok(sc, c, what)
    # the kernel's word (MultipathTCP()): MPTCP, not fallen back to TCP
    assert res.get("mptcp") == str(CONNS), f"{what}: {res.get('mptcp')} of {CONNS} connections MPTCP: {res}"
    server_done(sc, srv, CONNS, res["bytes"], what)
    accelerated(sc, 2 * CONNS, 2 * int(res["bytes"]), what)


STRESS_CASES = [(p, r) for r in range(1, STRESS_ROUNDS + 1) for p in (1, 2)]


@pytest.mark.parametrize("gomaxprocs,round_", STRESS_CASES,
                         ids=[f"gomaxprocs{p}-round{r}" for p, r in STRESS_CASES])
def test_go_stress(sc, gomaxprocs, round_):
    """320 connections x 16 messages of 1 B..256 KiB (every byte compared) while
    the client runs the collector in a loop, grows its stacks, spins a
    goroutine only asynchronous preemption stops and runs /bin/true with
    os/exec; server and client with the same GOMAXPROCS. A hang shows each
    connection's state (the client's own guard); the stats must show every
    connection on shared memory."""
    exe = go_build(STRESS_TOOLCHAIN)
    what = f"Go stress ({STRESS_TOOLCHAIN}, GOMAXPROCS={gomaxprocs}, round {round_})"
    sc.env["GOMAXPROCS"] = str(gomaxprocs)
    srv = go_server(sc, "go-echo", [exe, "echo", "--conns", str(STRESS_CONNS)])
    c = go_client(sc, "go-stress", [exe, "stress", str(srv.port), "--conns", str(STRESS_CONNS), "--msgs",
                             str(STRESS_MSGS), "--max", str(STRESS_MAX), "--seed", str(round_ * 10 + gomaxprocs),
                             "--execs", "10", "--timeout", CLIENT_GUARD])
    res = client_ok(sc, c, what)
    assert int(res["execs"]) >= 10 and int(res["gcs"]) >= 1, res
    server_done(sc, srv, STRESS_CONNS, res["bytes"], what)
    accelerated(sc, 2 * STRESS_CONNS, 2 * int(res["bytes"]), what)
