#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Unmodified programs side by side: kernel TCP loopback, a Unix-domain socket
(where the program has one) and `shortcut run`.

Each workload runs REPS times; within a repetition its transports run one
after the other in fresh processes (the order rotates from one repetition to
the next), so every transport sees the same phases of a noisy machine. Every
accelerated run is checked through `shortcut stats --json` (its own
SHORTCUT_RUNDIR) to have put its connections on shared memory; a run that
fails, or was not accelerated, makes its cell "failed" with the reason in a
note, and the benchmark goes on (exit status 1 at the end).

Two sets of workloads (--set):
  programs  sockbench rr/stream, sockperf, nginx, redis, iperf3, memcached
            (issue 5's targets);
  floor     "never slower than kernel TCP" (issues 12 and 24): a client
            under shortcut against a server without the library (conn and
            rr: what a connection that stays on TCP costs); sockbench conn
            with one client (a blocking and an epoll server) and with 8
            client threads (an epoll and a thread-per-connection server),
            spinning on and off; a server forking per connection; pgbench
            -S -C against PostgreSQL, 10,000 connections set up by one
            process and epoll_wait(0) among them, CPU per request at fixed
            request rates, 4 busy request/response pairs on 2 CPUs; every
            row has a target, and a verdict on the median of the
            repetitions' ratios (pass, miss, or fell back to TCP).

Prints a Markdown table (medians, ratios to TCP and to Unix with their
spread, targets) on stdout; with --json FILE, also stores every sample in
FILE under "programs" or "floor" (keeping what else FILE holds: run.sh puts
the core figures of `shortcut perf` there first), which bench/plot.py draws.

  bench/interposed.py BUILD_DIR REPS [--quick] [--set programs|floor]
                      [--json FILE] [--only GROUP,...]

Transports ("variants"): tcp, sockmap (kernel TCP with eBPF sockmap
redirection between the run's sockets: bench/sockmap/; root and cgroup v2
only, else skipped with the reason), unix, shortcut (SHORTCUT_SPIN_US unset: the
library default), shortcut_nospin (SHORTCUT_SPIN_US=0 in the environment of
both accelerated ends), shortcut_all (SHORTCUT_SHORT_TCP=0: short connections
accelerated too), ref (a physical reference from `shortcut perf`), preload
(floor rows: kernel TCP with an LD_PRELOAD library that interposes nothing,
bench/empty_preload.c: what loading any library that way costs).
SHORTCUT_* and LD_PRELOAD are removed from the inherited environment.
"""
import argparse
import glob
import json
import os
import pwd
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("reps", type=int)
ap.add_argument("--quick", action="store_true", help="shorter runs (about a third of the time)")
ap.add_argument("--json", help="store the samples in this JSON file (key 'programs')")
ap.add_argument("--set", choices=("programs", "floor"), default="programs",
                help="programs: the unmodified programs (default); floor: the rows of issue 12, "
                "never slower than kernel TCP")
ap.add_argument("--only", help="comma-separated workload groups to run: " +
                "rr,stream,sockperf_pp,sockperf_tp,nginx,redis,iperf3,memcached (programs); "
                "conn,conn8,setup,pgbench,rate,pairs (floor)")
args = ap.parse_args()

BUILD = os.path.abspath(args.build)
SHORTCUT = os.path.join(BUILD, "shortcut")
SOCKBENCH = os.path.join(BUILD, "bench", "sockbench")
GOBENCH = os.path.join(BUILD, "bench", "gobench")      # bench/go, built by run.sh
ECHO = os.path.join(BUILD, "bench", "echo")
SOCKMAP = os.path.join(BUILD, "bench", "sockmap")
SOCKMAP_OBJ = os.path.join(BUILD, "bench", "sockmap.bpf.o")
EMPTY_PRELOAD = os.path.join(BUILD, "bench", "empty_preload.so")
QUICK = args.quick
DUR = 1 if QUICK else 2          # seconds of each measured run (wrk, h2load, iperf3, memaslap)
SB_DUR = 0.5 if QUICK else 2     # sockbench runs
SOCKPERF_T = 1 if QUICK else 2   # sockperf -t (whole seconds; it measures from 0.4 s on)
REDIS_N = 30000 if QUICK else 100000    # redis-benchmark -n, per test
MEMSLAP_E = 500 if QUICK else 2000      # memslap -e, per thread
NOFILE = 16384                   # wanted soft fd limit (wrk/nginx -c1000)


def which(b):
    return shutil.which(b) or shutil.which(b, path="/usr/local/sbin:/usr/sbin:/sbin")


def raise_nofile():
    """preexec: raise the soft fd limit as far as the hard one allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def nofile_available():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# /dev/shm where it is a tmpfs (where shortcut's default run directory is)
MEMDIR = "/dev/shm" if any(l.split()[1:3] == ["/dev/shm", "tmpfs"]
                           for l in open("/proc/mounts")) else None


class Failed(Exception):
    pass


def tail(text, n=300):
    """the last lines of a program's output, one line, without colours"""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " / ".join(ln.strip() for ln in text.strip().splitlines() if ln.strip())[-n:]


def tcp_out_segs():
    """TCP segments this host has sent (/proc/net/snmp OutSegs)"""
    with open("/proc/net/snmp") as f:
        rows = [ln.split() for ln in f if ln.startswith("Tcp:")]
    return int(rows[1][rows[0].index("OutSegs")])


def cgroup2_root():
    """where the cgroup v2 hierarchy is mounted, or None"""
    with open("/proc/mounts") as f:
        for ln in f:
            x = ln.split()
            if len(x) > 2 and x[2] == "cgroup2":
                return x[1]
    return None


def sockmap_missing():
    """why the sockmap column cannot run here, or None"""
    if os.geteuid() != 0:
        return "sockmap needs root (BPF programs, a cgroup of its own)"
    if not (os.access(SOCKMAP, os.X_OK) and os.path.exists(SOCKMAP_OBJ)):
        return "sockmap not built (clang and libbpf-dev: bench/sockmap/build.sh)"
    if not cgroup2_root():
        return "sockmap needs a cgroup v2 hierarchy"
    return None


class Sockmap:
    """eBPF sockmap redirection for one run (bench/sockmap/): a cgroup of
    its own, the loader holding the programs attached to it; the run's
    programs are started inside it, so nothing else on the host is
    touched.  close() gives the programs' own counts."""
    seq = 0

    def __init__(self):
        Sockmap.seq += 1
        self.cg = os.path.join(cgroup2_root(), f"sc-bench-sockmap-{os.getpid()}-{Sockmap.seq}")
        os.makedirs(self.cg, exist_ok=True)
        self.home = None
        with open("/proc/self/cgroup") as f:
            for ln in f:
                if ln.startswith("0::"):
                    self.home = os.path.join(cgroup2_root(), ln.strip()[3:].lstrip("/"))
        self.p = subprocess.Popen([SOCKMAP, self.cg, SOCKMAP_OBJ], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            err = self.p.stderr.read().strip()
            self.p.wait()
            os.rmdir(self.cg)
            raise Failed(f"sockmap: {err or 'no ready line'}")
        self.counts = None

    def _move(self, cg):
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    class _Inside:
        def __init__(self, sm):
            self.sm = sm

        def __enter__(self):
            self.sm._move(self.sm.cg)       # (children are born in it)

        def __exit__(self, *a):
            self.sm._move(self.sm.home)

    def inside(self):
        return Sockmap._Inside(self)

    def close(self):
        if self.counts is None:
            out, err = self.p.communicate(timeout=30)
            try:
                self.counts = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                self.counts = {"inserted": 0, "redirected": 0, "missed": 0, "error": err.strip()}
            for _ in range(50):     # (the run's processes are reaped: empty soon)
                try:
                    os.rmdir(self.cg)
                    break
                except OSError:
                    time.sleep(0.1)
        return self.counts


class Ctx:
    """One run of one transport: its run directory, scratch directory,
    environment and server processes."""

    def __init__(self, variant, owner=None):
        self.variant = variant
        self.accel = variant in ("shortcut", "shortcut_nospin", "shortcut_all")
        # in memory, as the default run directory is (a disk's file
        # creation would be part of every process's set-up)
        self.rundir = tempfile.mkdtemp(prefix="sc-bench-", dir=MEMDIR)
        self.tmp = tempfile.mkdtemp(prefix="sc-bw-")
        # owner: a user who owns both directories and runs every program
        # (PostgreSQL refuses root); None: ours
        self.user = {}
        if owner:
            pw = pwd.getpwnam(owner)
            for d in (self.rundir, self.tmp):
                os.chown(d, pw.pw_uid, pw.pw_gid)
            self.user = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=self.tmp)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("SHORTCUT_") and k != "LD_PRELOAD"}
        self.env["SHORTCUT_RUNDIR"] = self.rundir
        if variant == "shortcut_nospin":
            self.env["SHORTCUT_SPIN_US"] = "0"
        if variant == "shortcut_all":
            self.env["SHORTCUT_SHORT_TCP"] = "0"
        if variant == "preload":
            self.env["LD_PRELOAD"] = EMPTY_PRELOAD
        self.pre = [SHORTCUT, "run"] if self.accel else []
        self.procs = []
        self.st = None
        self.sm = None
        if variant == "sockmap":
            self.sm = Sockmap()
        self.segs0 = tcp_out_segs()
        self.segs = None        # TCP segments sent during the run (the whole host's)

    def popen(self, cmd, **kw):
        """the program started in this run's cgroup (sockmap: its
        sockets are the ones redirected), or plainly"""
        if not self.sm:
            return subprocess.Popen(self.pre + cmd, env=self.env, preexec_fn=raise_nofile,
                                    start_new_session=True, **self.user, **kw)
        with self.sm.inside():
            return subprocess.Popen(self.pre + cmd, env=self.env, preexec_fn=raise_nofile,
                                    start_new_session=True, **self.user, **kw)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def server(self, cmd, log=None):
        out = open(self.path(log), "w") if log else subprocess.DEVNULL
        p = self.popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def run(self, cmd, timeout=120):
        p = self.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise Failed(f"{' '.join(cmd[:3])}...: no result after {timeout} s")
        return p.returncode, out, err

    def wait_tcp(self, port, timeout=10.0):
        """wait for a listener on 127.0.0.1:port, without connecting to it
        (a probe connection would count as a fallback in the run's stats,
        and iperf3 would take it for its client)"""
        want = ":%04X" % port

        def probe():
            for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
                try:
                    with open(fn) as f:
                        for ln in f.readlines()[1:]:
                            x = ln.split()
                            if x[1].endswith(want) and x[3] == "0A":
                                return
                except FileNotFoundError:
                    pass
            raise OSError("not listening")
        self._wait(probe, timeout, f"port {port}")

    def wait_unix(self, path, timeout=10.0):
        def probe():
            s = socket.socket(socket.AF_UNIX)
            try:
                s.settimeout(0.2)
                s.connect(path)
            finally:
                s.close()
        self._wait(probe, timeout, path)

    def _wait(self, probe, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise Failed(f"server exited ({p.returncode}) before listening on {what}")
            try:
                probe()
                return
            except OSError:
                time.sleep(0.05)
        raise Failed(f"nothing listening on {what} after {timeout} s")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []

    def stats(self):
        # as the run directory's owner (shortcut refuses another user's)
        r = subprocess.run([SHORTCUT, "stats", "--json"], capture_output=True, text=True,
                           env=self.env, timeout=30, **self.user)
        return json.loads(r.stdout)

    def finish(self, min_accel, every=False, short=False):
        """Stop the servers; for an accelerated run, check that at least
        min_accel connection ends were on shared memory (every: and that
        none stayed on TCP).  short: the connections are short ones, which
        the default (SHORTCUT_SHORT_TCP) puts on TCP once learnt: min_accel
        ends on shared memory or on TCP for that reason alone (the client's
        `short_connections`, the server's `peer_not_accelerated`)."""
        self.stop()
        self.segs = tcp_out_segs() - self.segs0
        st = None
        if self.sm:
            n = self.sm.close()
            if n["inserted"] < min(min_accel, 2) or not n["redirected"]:
                raise Failed(f"sockmap did not redirect: {n['inserted']} sockets in its map "
                             f"(expected >= {min(min_accel, 2)}), {n['redirected']} sends redirected, "
                             f"{n['missed']} not")
        if self.accel:
            st = self.st = self.stats()
            fb = {k: v for k, v in st["fallback"].items() if v}
            if short and self.variant != "shortcut_all":
                n = fb.get("short_connections", 0)
                if (set(fb) - {"short_connections", "peer_not_accelerated"} or
                        fb.get("peer_not_accelerated", 0) != n or
                        st["conns_accelerated"] + 2 * n < min_accel):
                    raise Failed(f"{st['conns_accelerated']} connection ends on shared memory, "
                                 f"{st['conns_fallback']} on TCP {fb} (expected >= {min_accel} "
                                 "in all, on TCP only as short connections)")
            elif st["conns_accelerated"] < min_accel or (every and st["conns_fallback"]):
                raise Failed(f"not accelerated: {st['conns_accelerated']} connection ends on shared "
                             f"memory (expected >= {min_accel}), {st['conns_fallback']} on TCP {fb}")
        shutil.rmtree(self.rundir, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return st

    def cleanup(self):
        self.stop()
        if self.sm:
            self.sm.close()
        shutil.rmtree(self.rundir, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- workloads: each takes a Ctx and returns {row id: value} --------------

def sockbench(mode, size, key):
    def fn(c):
        if c.variant == "ref":
            c.cleanup()
            return physical_ref(mode)
        cmd = [SOCKBENCH, mode, "--seconds", str(SB_DUR), "--size", str(size)]
        if c.variant == "unix":
            cmd.append("--unix")
        rc, out, err = c.run(cmd, timeout=60)
        if rc:
            raise Failed(f"sockbench exited {rc}: {tail(err, 300)}")
        v = json.loads(out)[key]
        row = f"{mode}_nospin" if c.variant == "shortcut_nospin" else mode
        c.finish(min_accel=2)
        return {row: v}
    return fn


def physical_ref(mode):
    """The machine's floor for a round trip / a copy, measured next to the
    program runs: bare shared-memory ping-pong (round trips/s), memcpy (GB/s)."""
    if mode == "rr":
        cmd = [SHORTCUT, "perf", "pingpong", "--size", "64", "--transports", "shm"]
        key = "msgs_per_s"
    else:
        cmd = [SHORTCUT, "perf", "stream", "--size", "65536", "--transports", "memcpy"]
        key = "gbytes_per_s"
    r = subprocess.run(cmd + ["--reps", "1", "--seconds", "0.3", "--json"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode:
        raise Failed("shortcut perf: " + tail(r.stderr))
    return {mode: json.loads(r.stdout)["results"][0][key]}


def sockperf(mode):
    def fn(c):
        port = free_port()
        c.server(["sockperf", "server", "--tcp", "-i", "127.0.0.1", "-p", str(port)])
        c.wait_tcp(port)
        # --dontwarmup skips the dummy messages (sockperf still waits 2 s
        # before the test and leaves its first 400 ms out of the figures);
        # --mps max would size sockperf's sequence numbers for a slower
        # peer ("_seqN > m_maxSequenceNo" at shortcut's rate)
        extra = ["-m", "14"] if mode == "pp" else ["-m", "64000"]
        rc, out, err = c.run(["sockperf", mode, "--tcp", "-i", "127.0.0.1", "-p", str(port),
                              "-t", str(SOCKPERF_T), "--mps", "10000000", "--dontwarmup"] + extra,
                             timeout=60)
        o = out + err
        pat = (r"Summary: Latency is ([0-9.]+) usec" if mode == "pp"
               else r"Summary: BandWidth is ([0-9.]+) MBps")
        m = re.search(pat, o)
        if rc or not m:
            raise Failed(f"sockperf {mode} exited {rc}: {tail(o, 300)}")
        # the connection from sockperf's own probe is counted too
        c.finish(min_accel=2)
        row = f"sockperf_{mode}_nospin" if c.variant == "shortcut_nospin" else f"sockperf_{mode}"
        return {row: float(m.group(1))}
    return fn


# Go (issue 26): Go <-> Go, Go client <-> C server, C client <-> Go server
GO_PAIRS = [  # row, client, server, mode, size
    ("go_rr", GOBENCH, GOBENCH, "rr", 100),
    ("go_stream", GOBENCH, GOBENCH, "stream", 65536),
    ("go_c_rr", GOBENCH, ECHO, "rr", 100),
    ("c_go_rr", ECHO, GOBENCH, "rr", 100),
]


def go_pairs(c):
    """each pair of GO_PAIRS: the server (a goroutine or thread per
    connection, echoing), then its client for SB_DUR seconds"""
    out = {}
    for row, client, server, mode, size in GO_PAIRS:
        if c.variant == "unix":
            net, addr = "unix", c.path(row + ".sock")
        else:
            net, addr = "tcp", f"127.0.0.1:{free_port()}"
        c.server([server, "server", net, addr], log=row + ".log")
        if net == "unix":
            c.wait_unix(addr)
        else:
            c.wait_tcp(int(addr.rsplit(":", 1)[1]))
        rc, o, err = c.run([client, mode, net, addr, str(SB_DUR), str(size)], timeout=60)
        if rc:
            raise Failed(f"{row}: {os.path.basename(client)} exited {rc}: {tail(err, 300)}")
        out[row] = json.loads(o)["gbytes_per_s" if mode == "stream" else "ops_per_s"]
        c.stop()
    c.finish(min_accel=2 * len(GO_PAIRS), every=True)
    return out


def go_missing():
    return None if os.access(GOBENCH, os.X_OK) and os.access(ECHO, os.X_OK) else \
        "bench/go or bench/echo.c not built (run.sh builds them where go and cc are)"


WRK_CONNS = (100, 1000)
H2LOAD_CONNS = 100


def nginx(c):
    """nginx (2 workers, keepalive, sendfile) on a small static file, on
    127.0.0.1 and on a Unix socket; wrk (TCP only) at 100 and 1000
    connections; h2load --h1 at 100 connections, over TCP or the Unix socket."""
    ng = which("nginx")
    port = free_port()
    html = c.path("html")
    os.makedirs(html)
    with open(os.path.join(html, "index.html"), "w") as f:
        f.write("hello\n" * 100)
    # a root nginx would run its workers as nobody: keep the clients' user
    user = "user %s;\n" % pwd.getpwuid(os.getuid()).pw_name if os.getuid() == 0 else ""
    sock = c.path("nginx.sock")
    conf = c.path("nginx.conf")
    t = c.tmp
    with open(conf, "w") as f:
        f.write(f"""{user}worker_processes 2;
worker_rlimit_nofile {nofile_available()};
pid {t}/nginx.pid;
error_log {t}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off; sendfile on; keepalive_requests 1000000; keepalive_timeout 65;
  client_body_temp_path {t}; proxy_temp_path {t}; fastcgi_temp_path {t};
  uwsgi_temp_path {t}; scgi_temp_path {t};
  server {{ listen 127.0.0.1:{port} backlog=4096; listen unix:{sock} backlog=4096; root {html}; }}
}}
""")
    c.server([ng, "-c", conf, "-g", "daemon off;"])
    c.wait_tcp(port)
    c.wait_unix(sock)
    url = f"http://127.0.0.1:{port}/index.html"
    res, conns = {}, 0
    if c.variant != "unix":
        for n in WRK_CONNS:
            rc, out, err = c.run(["wrk", "-t2", f"-c{n}", f"-d{DUR}s", url], timeout=60)
            line = [ln for ln in out.splitlines() if ln.startswith("Requests/sec")]
            se = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+)", out)
            if rc or not line or "Non-2xx" in out or (se and any(int(x) for x in se.groups())):
                raise Failed(f"wrk -c{n} exited {rc}: {tail((out + err), 400)}")
            res[f"nginx_wrk{n}"] = float(line[0].split()[1])
            conns += n
    h2 = ["h2load", "--h1", "-t2", f"-c{H2LOAD_CONNS}", f"-D{DUR}"]
    if which("h2load"):
        if c.variant == "unix":
            h2 += [f"--base-uri=unix:{sock}", "http://localhost/index.html"]
        else:
            h2 += [url]
        rc, out, err = c.run(h2, timeout=60)
        m = re.search(r"finished in [0-9.]+m?s, ([0-9.]+) req/s", out)
        f = re.search(r"(\d+) succeeded, (\d+) failed, (\d+) errored", out)
        if rc or not m or not f or int(f.group(2)) or int(f.group(3)) or int(f.group(1)) == 0:
            raise Failed(f"h2load exited {rc}: {tail((out + err), 400)}")
        res["nginx_h2load"] = float(m.group(1))
        conns += H2LOAD_CONNS
    c.finish(min_accel=2 * conns)
    return res


REDIS_CLIENTS = 200


def redis(c):
    """redis-benchmark -t set,get -c 200 -d 1024 against a fresh redis-server,
    on TCP or its Unix socket."""
    port = free_port()
    sock = c.path("redis.sock")
    cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
           "--maxclients", "4000"]
    if c.variant == "unix":
        cmd += ["--unixsocket", sock, "--unixsocketperm", "700"]
    c.server(cmd, log="redis.log")
    if c.variant == "unix":
        c.wait_unix(sock)
        where = ["-s", sock]
    else:
        c.wait_tcp(port)
        where = ["-p", str(port)]
    rc, out, err = c.run(["redis-benchmark"] + where + ["-t", "set,get", "-n", str(REDIS_N),
                                                        "-c", str(REDIS_CLIENTS), "-d", "1024",
                                                        "-q", "--csv"], timeout=120)
    res = {}
    for t in ("SET", "GET"):
        line = [ln for ln in out.splitlines() if ln.startswith(f'"{t}"')]
        if rc or not line:
            raise Failed(f"redis-benchmark exited {rc}: {tail((out + err), 400)}")
        res[f"redis_{t.lower()}"] = float(line[0].split(",")[1].strip('"'))
    c.finish(min_accel=2 * REDIS_CLIENTS)
    return res


def iperf3(c):
    port = free_port()
    # bound to 127.0.0.1: by default iperf3 listens on a dual-stack IPv6
    # socket, whose accepted ends (v4-mapped) sockmap's IPv4 map never holds
    c.server(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)])
    c.wait_tcp(port)
    rc, out, err = c.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(DUR), "-J"],
                         timeout=60)
    try:
        v = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9
    except (ValueError, KeyError):
        raise Failed(f"iperf3 exited {rc}: {tail((out + err), 400)}")
    c.finish(min_accel=4)   # control and data connection, both ends
    return {"iperf3": v}


MEMASLAP_CONNS = 64
MEMSLAP_THREADS = 50


def memcached(c):
    """memcached -t 2 on TCP (-p) or a Unix socket (-s); memaslap (TCP only:
    it resolves servers with getaddrinfo) with 64 connections, 1 KiB values,
    90% get / 10% set, 1% of gets verified; memslap (libmemcached, which also
    takes a socket path) get with 50 threads, each on its own connection."""
    port = free_port()
    sock = c.path("memcached.sock")
    cmd = ["memcached", "-t", "2", "-U", "0", "-m", "1024", "-c", "4096"]
    if os.getuid() == 0:
        cmd += ["-u", pwd.getpwuid(0).pw_name]
    if c.variant == "unix":
        c.server(cmd + ["-s", sock], log="memcached.log")
        c.wait_unix(sock)
        server = sock
    else:
        c.server(cmd + ["-p", str(port), "-l", "127.0.0.1"], log="memcached.log")
        c.wait_tcp(port)
        server = f"127.0.0.1:{port}"
    res, conns = {}, 0
    aslap = which("memcaslap") or which("memaslap")
    if c.variant != "unix" and aslap:
        rc, out, err = c.run([aslap, "-s", server, "-T", "2", "-c", str(MEMASLAP_CONNS),
                              "-t", f"{DUR}s", "-X", "1024", "-v", "0.01"], timeout=60)
        o = out + err
        m = re.search(r"Run time: [0-9.]+s Ops: \d+ TPS: (\d+)", o)
        vf = re.search(r"verify_failed: (\d+)", o)
        if rc or not m or not vf or int(vf.group(1)):
            raise Failed(f"memaslap exited {rc}: {tail(o, 400)}")
        res["memcached_memaslap"] = float(m.group(1))
        conns += MEMASLAP_CONNS
    slap = which("memcslap") or which("memslap")
    if slap:
        per = MEMSLAP_E
        rc, out, err = c.run([slap, "-s", server, "-t", "get", "-c", str(MEMSLAP_THREADS),
                              "-e", str(per)], timeout=120)
        o = out + err
        m = re.search(r"Time to get\s+(\d+) keys by\s+(\d+) threads:\s+([0-9.]+) seconds", o)
        if rc or not m or int(m.group(1)) != per * MEMSLAP_THREADS:
            raise Failed(f"memslap exited {rc}: {tail(o, 400)}")
        res["memcached_memslap_get"] = int(m.group(1)) / float(m.group(3))
        conns += MEMSLAP_THREADS
    c.finish(min_accel=2 * conns)
    return res


# ---- never slower than kernel TCP (issue 12): --set floor -----------------

FLOOR_CLIENTS = 8                # conn8: client threads
FORK_CLIENTS = 4                 # conn_fork: client threads
SETUP_CONNS = 10000              # setup: connections kept open by one process
SETUP_CALLS = 50000 if QUICK else 100000    # epoll_wait(0) calls timed
RATES = (1000, 10000, 50000)     # rate: requests/s
RATE_DUR = 0.5 if QUICK else 1   # rate: measured seconds per rate (after a tenth more of warm-up)
PAIRS = 4                        # pairs: busy request/response pairs
PG_DUR = 1 if QUICK else 2       # pgbench -T
_addr = [0]


def next_addr():
    """a loopback address of its own for each connection-heavy run
    (127.0.0.2 ... 127.0.0.251): one run's TIME_WAIT sockets never share a
    4-tuple with the next run's connections"""
    _addr[0] += 1
    return f"127.0.0.{2 + _addr[0] % 250}"


def sockbench_floor(mode, extra, rows):
    """sockbench MODE EXTRA...; rows: {row id: JSON key} (the first row's
    value also gives the connections to check, for conn: 2 ends each)"""
    def fn(c):
        cmd = [SOCKBENCH, mode] + extra
        if c.variant == "unix":
            cmd.append("--unix")
        elif mode in ("conn", "setup"):
            cmd += ["--addr", next_addr()]
        rc, out, err = c.run(cmd, timeout=120)
        if rc:
            raise Failed(f"sockbench exited {rc}: {tail(err, 300)}")
        v = json.loads(out)
        if mode == "conn":    # every connection on shared memory (or short: TCP)
            c.finish(min_accel=2 * v["ops"], every=True, short=True)
        elif mode == "setup":
            if v["epoll_wait0_ready"] or v["registered"] != SETUP_CONNS + 1:
                raise Failed(f"epoll_wait(0): {v['epoll_wait0_ready']} events, "
                             f"{v['registered']} registered (expected none, {SETUP_CONNS + 1})")
            c.finish(min_accel=2 * SETUP_CONNS, every=True)
        else:
            c.finish(min_accel=2 * PAIRS, every=True)
        sfx = SFX.get(c.variant, "")
        return {row + sfx: v[key] for row, key in rows.items()}
    return fn


def plain_peer(c):
    """issue 24's first row: the server without the library (sockbench
    --plain-server execs it with LD_PRELOAD removed), the client under
    `shortcut run` or not; conn (a connection each) and rr (one). Every
    connection of a shortcut run must have stayed on TCP as no_listener,
    none on shared memory."""
    res = {}
    # "1": both processes on one CPU (taskset), where the figure is the
    # CPU a connection or a message costs; on two, the scheduler's
    # placement of the two moves it by +-10% from run to run
    one = ["taskset", "-c", str(os.cpu_count() - 1)]
    for mode, pin, extra in (("conn", [], ["--size", "64", "--addr", next_addr()]),
                             ("rr", [], ["--size", "100"]),
                             ("conn", one, ["--size", "64", "--addr", next_addr()]),
                             ("rr", one, ["--size", "100"])):
        rc, out, err = c.run(pin + [SOCKBENCH, mode, "--plain-server"] + SB + extra, timeout=120)
        if rc:
            raise Failed(f"sockbench {mode} --plain-server exited {rc}: {tail(err, 300)}")
        v = json.loads(out)
        res[f"plain_{mode}{'1' if pin else ''}"] = v["ops_per_s"]
        if c.accel:
            st = c.stats()
            fb = {k: n for k, n in st["fallback"].items() if n}
            want = v["ops"] if mode == "conn" else 1
            got = fb.get("no_listener", 0) - res.get("_nl", 0)
            res["_nl"] = fb.get("no_listener", 0)
            if st["conns_accelerated"] or set(fb) - {"no_listener"} or got < want:
                raise Failed(f"{mode}: {st['conns_accelerated']} connection ends on shared memory, "
                             f"on TCP {fb} (expected every one of {want} on TCP as no_listener)")
    res.pop("_nl", None)
    c.finish(min_accel=0)
    return res


def rate(c):
    """sockbench rate at each of RATES: CPU µs per request (client + server),
    with the achieved rate and median latency beside it"""
    res = {}
    sfx = "_nospin" if c.variant == "shortcut_nospin" else ""
    for r in RATES:
        cmd = [SOCKBENCH, "rate", "--rate", str(r), "--seconds", str(RATE_DUR), "--size", "100"]
        if c.variant == "unix":
            cmd.append("--unix")
        rc, out, err = c.run(cmd, timeout=60)
        if rc:
            raise Failed(f"sockbench rate {r} exited {rc}: {tail(err, 300)}")
        v = json.loads(out)
        row = f"rate{r // 1000}k{sfx}"
        res[row] = v["cpu_us_per_req"]
        res[row + ":achieved"] = v["achieved_per_s"]
        res[row + ":p50"] = v["latency_p50_us"]
    c.finish(min_accel=2 * len(RATES), every=True)
    return res


PG = {}   # the cluster every pgbench run starts a server on: bindir, data, owner


def pg_bindir():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(re.sub(r"\D", "", d) or 0))
    for d in reversed(dirs):
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "postgres", "pgbench")):
            return d
    return None


def pg_missing():
    if not pg_bindir():
        return "not installed: PostgreSQL server and pgbench (Debian package postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "no user postgres (PostgreSQL refuses root; the Debian package creates it)"
    return None


def pg_server(c):
    """postgres on the shared cluster, on 127.0.0.1 and a Unix socket in
    c.tmp, until it is ready; returns (pgbench command prefix, its host)"""
    b, data = PG["bindir"], PG["data"]
    port = free_port()
    c.server([os.path.join(b, "postgres"), "-D", data, "-k", c.tmp, "-p", str(port),
              "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
              "-c", "full_page_writes=off", "-c", "max_connections=50", "-c", "ssl=off"],
             log="postgres.log")
    c.wait_tcp(port, timeout=30)

    def ready():
        with open(c.path("postgres.log")) as f:
            if "ready to accept connections" not in f.read():
                raise OSError("not ready")
    c._wait(ready, 30, "postgres ready")
    host = c.tmp if c.variant == "unix" else "127.0.0.1"
    return [os.path.join(b, "pgbench"), "-h", host, "-p", str(port), "-U", "postgres"]


def pg_cluster():
    """initdb and pgbench -i -s 1, once, on kernel TCP (not measured); as
    the user postgres when we are root. A failure fails every pgbench run."""
    if "error" in PG:
        raise Failed(PG["error"])
    if PG:
        return
    PG.update(owner=pgbench.owner, bindir=pg_bindir(), dir=tempfile.mkdtemp(prefix="sc-pg-"))
    PG["data"] = os.path.join(PG["dir"], "data")
    kw = {}
    if PG["owner"]:
        pw = pwd.getpwnam(PG["owner"])
        os.chown(PG["dir"], pw.pw_uid, pw.pw_gid)
        kw = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=PG["dir"])
    c = Ctx("tcp", PG["owner"])
    try:
        r = subprocess.run([os.path.join(PG["bindir"], "initdb"), "-D", PG["data"], "--auth=trust",
                            "-U", "postgres", "--no-sync", "-E", "UTF8"],
                           capture_output=True, text=True, timeout=120, **kw)
        if r.returncode:
            raise Failed(f"initdb exited {r.returncode}: {tail(r.stdout + r.stderr)}")
        pgb = pg_server(c)
        rc, out, err = c.run(pgb + ["-i", "-s", "1", "-q", "postgres"], timeout=120)
        if rc:
            raise Failed(f"pgbench -i exited {rc}: {tail(out + err)}")
    except (Failed, OSError, subprocess.SubprocessError) as e:
        PG["error"] = f"setting up the cluster: {e}"
        raise
    finally:
        c.cleanup()


def pgbench(c):
    """pgbench -S -C -c 4 -j 2 (a connection per transaction) against a
    postgres started for this run; tps"""
    pg_cluster()
    pgb = pg_server(c)
    rc, out, err = c.run(pgb + ["-S", "-C", "-c", "4", "-j", "2", "-T", str(PG_DUR), "postgres"],
                         timeout=60 + PG_DUR)
    o = out + err
    failed = re.search(r"number of failed transactions: (\d+)", o)
    done = re.search(r"number of transactions actually processed: (\d+)", o)
    tps = re.search(r"tps = ([0-9.]+)", o)
    if rc or not (failed and done and tps) or failed.group(1) != "0" or not int(done.group(1)):
        raise Failed(f"pgbench exited {rc}: {tail(o, 400)}")
    # one connection per transaction (both ends), and pgbench's first
    c.finish(min_accel=2 * int(done.group(1)), every=True, short=True)
    return {"pgbench" + SFX.get(c.variant, ""): float(tps.group(1))}


pgbench.owner = "postgres" if os.geteuid() == 0 else None    # run_all makes its Ctx with it


def pg_remove():
    if PG.get("dir"):
        shutil.rmtree(PG["dir"], ignore_errors=True)


# ---- what runs and how it is reported ------------------------------------

# a shortcut variant's row ids: the base row's with this suffix
SFX = {"shortcut_nospin": "_nospin", "shortcut_all": "_all"}

# name, variants, function, programs needed
GROUPS = [
    ("rr", ["tcp", "sockmap", "unix", "shortcut", "shortcut_nospin", "ref"], sockbench("rr", 100, "ops_per_s"), ()),
    ("stream", ["tcp", "sockmap", "unix", "shortcut", "ref"], sockbench("stream", 65536, "gbytes_per_s"), ()),
    ("sockperf_pp", ["tcp", "sockmap", "shortcut", "shortcut_nospin"], sockperf("pp"), ("sockperf",)),
    ("sockperf_tp", ["tcp", "sockmap", "shortcut"], sockperf("tp"), ("sockperf",)),
    ("nginx", ["tcp", "sockmap", "unix", "shortcut"], nginx, ("nginx", "wrk")),
    ("redis", ["tcp", "sockmap", "unix", "shortcut"], redis, ("redis-server", "redis-benchmark")),
    ("iperf3", ["tcp", "sockmap", "shortcut"], iperf3, ("iperf3",)),
    ("memcached", ["tcp", "sockmap", "unix", "shortcut"], memcached, ("memcached",)),
    # no sockmap column: Go's io.Copy between two TCP connections splices,
    # and splice(2) does not see the bytes sockmap redirects (they wait in
    # the socket's psock queue): every sockmap run hung (bench/README.md)
    ("go", ["tcp", "unix", "shortcut"], go_pairs, go_missing),
]

# id, group, title, unit, lower is better, Unix note (why there is none),
# shortcut variant, target (op, ratio to kernel TCP), reference label
NA_SOCKPERF = "a"
NA_WRK = "b"
NA_IPERF = "c"
NA_MEMASLAP = "d"
FOOTNOTES = {
    NA_SOCKPERF: "sockperf 3.7 (Debian 12) has no Unix-domain socket mode "
                 "(it opens AF_INET sockets only; Unix sockets came in a later sockperf).",
    NA_WRK: "wrk connects only to TCP addresses; the h2load row drives the same nginx "
            "over its Unix socket (`listen unix:PATH`, `h2load --base-uri=unix:PATH`).",
    NA_IPERF: "iperf3 has no Unix-domain socket mode.",
    NA_MEMASLAP: "memaslap resolves its servers with getaddrinfo (TCP/UDP only); the memslap "
                 "row drives the same memcached over its Unix socket (`memcached -s PATH`).",
}
ROWS = [
    ("rr", "rr", "request/response 100 B, ipc-bench style, sockbench (messages/s)",
     "msg/s", False, None, "shortcut", (">=", 10.0), "bare shared-memory ping-pong"),
    ("rr_nospin", "rr", "request/response 100 B, no spin (SHORTCUT_SPIN_US=0) (messages/s)",
     "msg/s", False, None, "shortcut_nospin", (">=", 1.5), None),
    ("stream", "stream", "stream 64 KiB writes, sockbench (GB/s)",
     "GB/s", False, None, "shortcut", None, "memcpy"),
    ("sockperf_pp", "sockperf_pp", "sockperf `pp --tcp -m 14` (latency µs; lower is better)",
     "µs", True, NA_SOCKPERF, "shortcut", ("<=", 0.2), None),
    ("sockperf_pp_nospin", "sockperf_pp", "sockperf `pp --tcp -m 14`, no spin (latency µs; lower is better)",
     "µs", True, NA_SOCKPERF, "shortcut_nospin", ("<=", 0.6), None),
    ("sockperf_tp", "sockperf_tp", "sockperf `tp --tcp -m 64000` (MB/s)",
     "MB/s", False, NA_SOCKPERF, "shortcut", (">=", 3.0), None),
    ("nginx_wrk100", "nginx", "nginx 2 workers + `wrk -t2 -c100`, small file, keepalive (requests/s)",
     "req/s", False, NA_WRK, "shortcut", (">=", 1.5), None),
    ("nginx_wrk1000", "nginx", "nginx 2 workers + `wrk -t2 -c1000`, small file, keepalive (requests/s)",
     "req/s", False, NA_WRK, "shortcut", (">=", 1.5), None),
    ("nginx_h2load", "nginx", "nginx 2 workers + `h2load --h1 -t2 -c100`, small file, keepalive (requests/s)",
     "req/s", False, None, "shortcut", None, None),
    ("redis_set", "redis", "redis-benchmark SET `-c 200 -d 1024` (requests/s)",
     "req/s", False, None, "shortcut", (">=", 1.5), None),
    ("redis_get", "redis", "redis-benchmark GET `-c 200 -d 1024` (requests/s)",
     "req/s", False, None, "shortcut", (">=", 1.5), None),
    ("iperf3", "iperf3", f"iperf3 `-t {DUR}` (Gbit/s)",
     "Gbit/s", False, NA_IPERF, "shortcut", (">=", 3.0), None),
    ("memcached_memaslap", "memcached",
     "memcached `-t 2` + memaslap, 64 conns, 1 KiB values, 90% get, 1% verified (ops/s)",
     "ops/s", False, NA_MEMASLAP, "shortcut", None, None),
    ("memcached_memslap_get", "memcached", "memcached `-t 2` + memslap get, 50 threads (gets/s)",
     "gets/s", False, None, "shortcut", None, None),
    ("go_rr", "go", "Go <-> Go request/response 100 B, `net` + `io.Copy` echo server, bench/go (messages/s)",
     "msg/s", False, None, "shortcut", None, None),
    ("go_stream", "go", "Go <-> Go stream 64 KiB writes, echoed, bench/go (GB/s one way)",
     "GB/s", False, None, "shortcut", None, None),
    ("go_c_rr", "go", "Go client <-> C server (thread per connection), request/response 100 B (messages/s)",
     "msg/s", False, None, "shortcut", None, None),
    ("c_go_rr", "go", "C client <-> Go server (`io.Copy`), request/response 100 B (messages/s)",
     "msg/s", False, None, "shortcut", None, None),
]


# (issues 12 and 24) name, variants, function, programs needed (or a
# function returning why the group cannot run)
SB = ["--seconds", str(SB_DUR)]
CONN = SB + ["--size", "64"]
CONN_V = ["tcp", "sockmap", "unix", "preload", "shortcut", "shortcut_nospin"]
FLOOR_GROUPS = [
    ("conn", CONN_V + ["shortcut_all"], sockbench_floor("conn", CONN, {"conn": "ops_per_s"}), ()),
    ("conn_epoll", CONN_V, sockbench_floor("conn", CONN + ["--server", "epoll"],
                                           {"conn_epoll": "ops_per_s"}), ()),
    ("conn8", CONN_V + ["shortcut_all"],
     sockbench_floor("conn", CONN + ["--clients", str(FLOOR_CLIENTS)], {"conn8": "ops_per_s"}), ()),
    ("conn8_threads", CONN_V,
     sockbench_floor("conn", CONN + ["--clients", str(FLOOR_CLIENTS), "--server", "threads"],
                     {"conn8_threads": "ops_per_s"}), ()),
    ("conn_fork", ["tcp", "sockmap", "unix", "preload", "shortcut"],
     sockbench_floor("conn", CONN + ["--clients", str(FORK_CLIENTS), "--server", "fork"],
                     {"conn_fork": "ops_per_s"}), ()),
    ("plain", ["tcp", "preload", "shortcut"], plain_peer, ()),
    ("setup", ["tcp", "sockmap", "unix", "shortcut"],
     sockbench_floor("setup", ["--conns", str(SETUP_CONNS), "--calls", str(SETUP_CALLS)],
                     {"setup": "setup_s", "epoll_wait0": "epoll_wait0_ns"}), ()),
    ("pgbench", ["tcp", "sockmap", "unix", "preload", "shortcut", "shortcut_all"], pgbench,
     pg_missing),
    ("rate", ["tcp", "sockmap", "unix", "shortcut", "shortcut_nospin"], rate, ()),
    ("pairs", ["tcp", "sockmap", "unix", "shortcut"],
     sockbench_floor("rr", SB + ["--size", "100", "--pairs", str(PAIRS)], {"pairs": "ops_per_s"}), ()),
]
NCPU = os.cpu_count()
# as ROWS; a target (op, ratio, "every") must hold in every repetition, not
# only on the medians
SPIN = (("", "shortcut", ""), ("_nospin", "shortcut_nospin", ", no spin (SHORTCUT_SPIN_US=0)"))
FLOOR_ROWS = [
    ("plain_conn", "plain", "a connection that stays on TCP: the client under `shortcut run`, the "
     "server without the library (`no_listener`), connect + 64 B request/response + close, "
     "`conn --plain-server` (conn/s)", "conn/s", False, None, "shortcut", (">=", 0.98), None),
    ("plain_rr", "plain", "the same, request/response 100 B on one connection, "
     "`rr --plain-server` (msg/s)", "msg/s", False, None, "shortcut", (">=", 0.98), None),
    ("plain_conn1", "plain", "the same connect + 64 B request/response + close, both processes on one "
     "CPU (`taskset`: what a connection costs in CPU, without the scheduler's placement of two), "
     "`conn --plain-server` (conn/s)", "conn/s", False, None, "shortcut", (">=", 0.98), None),
    ("plain_rr1", "plain", "the same request/response 100 B, both processes on one CPU, "
     "`rr --plain-server` (msg/s)", "msg/s", False, None, "shortcut", (">=", 0.98), None),
] + [
    (f"{g}{sfx}", g, f"connect + 64 B request/response + close, {who}{what}, `conn{args}` (conn/s)",
     "conn/s", False, None, sv, (">=", t), None)
    for g, who, args, t in (
        ("conn", "one client, a blocking server (one connection at a time)", "", 1.3),
        ("conn_epoll", "one client, a one-thread epoll server", " --server epoll", 1.3),
        ("conn8", f"{FLOOR_CLIENTS} client threads, a one-thread epoll server",
         f" --clients {FLOOR_CLIENTS}", 1.0),
        ("conn8_threads", f"{FLOOR_CLIENTS} client threads, a thread-per-connection server",
         f" --clients {FLOOR_CLIENTS} --server threads", 1.0))
    for sfx, sv, what in SPIN
] + [
    ("conn_fork", "conn_fork", f"the same, {FORK_CLIENTS} client threads, a server that forks a process "
     f"per connection, `conn --clients {FORK_CLIENTS} --server fork` (conn/s)",
     "conn/s", False, None, "shortcut", (">=", 1.0), None),
    ("pgbench", "pgbench", "PostgreSQL, `pgbench -S -C -c 4 -j 2` (a connection per transaction; tps)",
     "tps", False, None, "shortcut", (">=", 1.0), None),
] + [
    (f"{g}_all", g, f"{what}, every connection on shared memory (SHORTCUT_SHORT_TCP=0; "
     "by default short ones stay on TCP)", unit, False, None, "shortcut_all", None, None)
    for g, what, unit in (("conn", "`conn`, one client", "conn/s"),
                          ("conn8", f"`conn --clients {FLOOR_CLIENTS}`", "conn/s"),
                          ("pgbench", "`pgbench -S -C`", "tps"))
] + [
    ("setup", "setup", f"set up {SETUP_CONNS:,} connections from one process: connect + 1-byte round "
     "trip each, all kept open, epoll server, `setup` (wall time s; lower is better)",
     "s", True, None, "shortcut", ("<=", 1.0), None),
    ("epoll_wait0", "setup", f"`epoll_wait(timeout 0)`, nothing ready, {SETUP_CONNS + 1:,} registered "
     "(that server, after the set-up; ns per call)",
     "ns", True, None, "shortcut", ("<=", 1.5), None),
] + [
    (f"rate{r // 1000}k{sfx}", "rate", f"request/response 100 B at {r:,} req/s, open loop, `rate`{what}: "
     "CPU of client + server per request (µs; lower is better)",
     "µs/req", True, None, sv, ("<=", 1.0), None)
    for sfx, sv, what in (("", "shortcut", ""), ("_nospin", "shortcut_nospin", ", no spin"))
    for r in RATES
] + [
    ("pairs", "pairs", f"{PAIRS} busy request/response pairs (100 B, {2 * PAIRS} processes) on "
     f"{NCPU} CPUs, `rr --pairs {PAIRS}` (total msg/s)",
     "msg/s", False, None, "shortcut", (">=", 1.0), None),
]


SEGS = {}       # (group, variant) -> TCP segments the host sent in each run
REDIRECTS = {}  # group -> the sockmap programs' counts, all its runs together


def print_proof():
    """what shows the sockmap runs really bypassed TCP (and shortcut's)"""
    if not SEGS and not REDIRECTS:
        return
    print()
    print("TCP segments the host sent per run (medians; /proc/net/snmp OutSegs, the whole "
          "host's, so a few are not the run's), and the sockmap programs' own counts "
          "(all runs together):")
    for g in dict.fromkeys(k[0] for k in SEGS):
        segs = ", ".join(f"{v} {statistics.median(x):,.0f}" for (gg, v), x in SEGS.items() if gg == g)
        r = REDIRECTS.get(g)
        red = (f"; sockmap: {r['inserted']:,} sockets in its map, {r['redirected']:,} sends "
               f"redirected, {r['missed']:,} not" if r else "")
        print(f"- {g}: {segs}{red}")


def run_all(groups):
    only = set(args.only.split(",")) if args.only else None
    samples = {}    # row id -> variant -> [values], aligned by repetition (None: failed)
    errors = {}     # (group, variant) -> first error
    skipped = {}    # group -> reason
    fallbacks = {}  # (group, variant) -> {reason: connection ends that stayed on TCP}
    nfail = {}      # (group, variant) -> failed runs
    for name, variants, fn, bins in groups:
        if only and name not in only:
            continue
        missing = [b for b in bins if not which(b)] if isinstance(bins, tuple) else bins()
        if missing:
            skipped[name] = ("not installed: " + ", ".join(missing)
                             if isinstance(missing, list) else missing)
            print(f"skipping {name}: {skipped[name]}", file=sys.stderr)
            continue
        if "sockmap" in variants and SOCKMAP_MISSING:
            variants = [v for v in variants if v != "sockmap"]
        if "preload" in variants and not os.path.exists(EMPTY_PRELOAD):
            print(f"preload column skipped: {EMPTY_PRELOAD} missing (make "
                  f"{os.path.relpath(EMPTY_PRELOAD)})", file=sys.stderr)
            variants = [v for v in variants if v != "preload"]
        t0 = time.time()
        print(f"running: {name} ({', '.join(variants)}) x {args.reps}", file=sys.stderr, flush=True)
        for rep in range(args.reps):
            k = rep % len(variants)
            for v in variants[k:] + variants[:k]:
                c = Ctx(v, getattr(fn, "owner", None))
                try:
                    res = fn(c)
                except (Failed, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
                    c.cleanup()
                    errors.setdefault((name, v), f"{type(e).__name__}: {e}")
                    nfail[(name, v)] = nfail.get((name, v), 0) + 1
                    print(f"  {name} {v} rep {rep + 1}: FAILED: {e}", file=sys.stderr, flush=True)
                    continue
                if c.segs is not None:
                    SEGS.setdefault((name, v), []).append(c.segs)
                if c.sm and c.sm.counts:
                    agg = REDIRECTS.setdefault(name, {})
                    for k in ("inserted", "redirected", "missed"):
                        agg[k] = agg.get(k, 0) + c.sm.counts.get(k, 0)
                if c.st and c.st["conns_fallback"]:
                    fb = fallbacks.setdefault((name, v), {})
                    for why, n in c.st["fallback"].items():
                        if n:
                            fb[why] = fb.get(why, 0) + n
                    fb["accelerated"] = fb.get("accelerated", 0) + c.st["conns_accelerated"]
                for row, val in res.items():
                    samples.setdefault(row, {}).setdefault(v, [None] * args.reps)[rep] = val
        print(f"  {name}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for key, n in nfail.items():
        errors[key] = f"{n} of {args.reps} runs failed; first: {errors[key]}"
    return samples, errors, skipped, fallbacks, nfail


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def paired(a, b):
    """per-repetition ratios a/b where both ran"""
    return sorted(x / y for x, y in zip(a or [], b or []) if x is not None and y)


def fmt(v):
    if v is None:
        return ""
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def fr(r):
    return f"{r:.3g}x" if r is not None else ""


def build_rows(rowspec, samples, errors, skipped, fallbacks, nfail):
    out = []
    for rid, group, title, unit, lower, na, sv, target, refname in rowspec:
        base = rid[:-len(SFX[sv])] if sv in SFX else rid
        s = samples.get(base, {})
        if sv in SFX:
            s = dict(s)
            s[sv] = samples.get(rid, {}).get(sv)
        tcp, unix, shm = s.get("tcp"), s.get("unix"), s.get(sv)
        smap = s.get("sockmap")
        pre = s.get("preload")
        ref = s.get("ref")
        mt, mu, ms = med(tcp or []), med(unix or []), med(shm or [])
        mm = med(smap or [])
        rt = paired(shm, tcp)
        rm = paired(shm, smap)
        rmt = paired(smap, tcp)
        rpt = paired(pre, tcp)
        ru = paired(shm, unix)
        rut = paired(unix, tcp)
        row = {
            "id": rid, "group": group, "title": title, "unit": unit, "lower_is_better": lower,
            "samples": {"tcp": tcp, "sockmap": smap, "unix": unix, "preload": pre, "shortcut": shm,
                        "reference": ref},
            "median": {"tcp": mt, "sockmap": mm, "unix": mu, "preload": med(pre or []),
                       "shortcut": ms, "reference": med(ref or [])},
            # an empty preloaded library against kernel TCP: the same
            # pairing as shortcut's verdict
            "preload_ratio_to_tcp": statistics.median(rpt) if rpt else None,
            "preload_ratio_to_tcp_spread": [rpt[0], rpt[-1]] if rpt else None,
            "ratio_to_sockmap": ms / mm if ms is not None and mm else None,
            "ratio_to_sockmap_spread": [rm[0], rm[-1]] if rm else None,
            "sockmap_ratio_to_tcp": mm / mt if mm is not None and mt else None,
            "sockmap_ratio_to_tcp_spread": [rmt[0], rmt[-1]] if rmt else None,
            "sockmap_skipped": SOCKMAP_MISSING,
            "ratio_to_tcp": ms / mt if ms is not None and mt else None,
            "ratio_to_tcp_spread": [rt[0], rt[-1]] if rt else None,
            "ratio_to_unix": ms / mu if ms is not None and mu else None,
            "ratio_to_unix_spread": [ru[0], ru[-1]] if ru else None,
            "unix_ratio_to_tcp": mu / mt if mu is not None and mt else None,
            "unix_ratio_to_tcp_spread": [rut[0], rut[-1]] if rut else None,
            "unix_note": FOOTNOTES[na] if na else None,
            "reference_name": refname,
            "target": {"op": target[0], "ratio_to_tcp": target[1],
                       "every_run": len(target) > 2} if target else None,
            "errors": {v: e for (g, v), e in errors.items()
                       if g == group and v in ("tcp", "sockmap", "unix", "preload", sv, "ref")},
            "skipped": skipped.get(group),
            "fallbacks": fallbacks.get((group, sv)),
            "shortcut_variant": sv,
            "failed_runs": {v: nfail.get((group, v), 0)
                            for v in ("tcp", "sockmap", "unix", "preload", sv)},
            # figures measured beside the row's (rate: achieved rate, latency)
            "aux": {k.split(":")[1]: {v: med(x) for v, x in samples[k].items()}
                    for k in samples if k.startswith(rid + ":")},
        }
        if sv in SFX:                     # TCP and Unix: the same runs as the base row
            for k in list(row["aux"]):
                for v in ("tcp", "sockmap", "unix"):
                    row["aux"][k][v] = med(samples.get(f"{base}:{k}", {}).get(v) or [])
        # the verdict: the median of the pairwise ratios (issue 24), or with
        # every_run the worst repetition's
        row["ratio_to_tcp_pairwise"] = statistics.median(rt) if rt else None
        if target and row["ratio_to_tcp_pairwise"] is not None:
            r = row["ratio_to_tcp_pairwise"]
            if target[2:] and rt:
                r = rt[0] if target[0] == ">=" else rt[-1]
            row["target_met"] = r >= target[1] if target[0] == ">=" else r <= target[1]
        else:
            row["target_met"] = None
        out.append((row, na))
    return out


def cell(row, key):
    v = row["shortcut_variant"] if key == "shortcut" else key
    if row["median"][key] is None and v in row["errors"]:
        return "failed"
    if key == "sockmap" and row["sockmap_skipped"]:
        return "skipped"
    return fmt(row["median"][key])


def vs(row, key):
    """a ratio with its spread, as 2.1x (1.9–2.3)"""
    r, s = row[key], row[key + "_spread"]
    return f"{fr(r)} ({s[0]:.3g}–{s[1]:.3g})" if r is not None and s else fr(r)


def print_table(rows, fallbacks):
    print("| workload (unmodified programs) | kernel TCP | sockmap | Unix socket | shortcut run "
          "| shortcut vs TCP (spread) | shortcut vs sockmap (spread) | shortcut vs Unix (spread) "
          "| sockmap vs TCP | Unix vs TCP | target | physical reference |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for row, na in rows:
        if row["skipped"] and row["median"]["tcp"] is None:
            print(f"| {row['title']} | ({row['skipped']}) | | | | | | | | | | |")
            continue
        if na:
            unix = f"n/a ({na})"
        else:
            unix = cell(row, "unix")
        rt, rs = row["ratio_to_tcp_pairwise"], row["ratio_to_tcp_spread"]
        vs_tcp = f"{fr(rt)} ({rs[0]:.3g}–{rs[1]:.3g})" if rt is not None and rs else fr(rt)
        ru, us = row["ratio_to_unix"], row["ratio_to_unix_spread"]
        vs_unix = f"{fr(ru)} ({us[0]:.3g}–{us[1]:.3g})" if ru is not None and us else ""
        tg = ""
        if row["target"]:
            op = "≥" if row["target"]["op"] == ">=" else "≤"
            verdict = {True: "pass", False: "**miss**", None: "no result"}[row["target_met"]]
            tv = row["target"]["ratio_to_tcp"]
            tg = f"{op}{tv:g}x: {verdict}"
            if rt is not None and abs(rt / tv - 1) < 0.05:   # "0.2x: miss" needs more digits
                tg += f" ({rt:.4g}x)"
        ref = ""
        if (row["reference_name"] and row["median"]["reference"] is not None
                and row["median"]["shortcut"] is not None):
            r = row["median"]["reference"]
            ref = (f"{row['reference_name']} {fmt(r)} {row['unit']} "
                   f"(shortcut = {row['median']['shortcut'] / r:.2g} of it)")
        print(f"| {row['title']} | {cell(row, 'tcp')} | {cell(row, 'sockmap')} | {unix} "
              f"| {cell(row, 'shortcut')} | {vs_tcp} | {vs(row, 'ratio_to_sockmap')} | {vs_unix} "
              f"| {fr(row['sockmap_ratio_to_tcp'])} | {fr(row['unix_ratio_to_tcp'])} | {tg} | {ref} |")
        for v, e in row["errors"].items():
            n = f"{row['title']}, {v}: {e}"
            if n not in notes:
                notes.append(n)
    print()
    mode = "--quick: " if QUICK else ""
    print(f"{mode}Each workload ran {args.reps} times per transport, the transports alternating "
          f"(fresh processes each run, order rotated every repetition); runs of {SB_DUR} s (sockbench), "
          f"{DUR} s (wrk, h2load, iperf3, memaslap), sockperf -t {SOCKPERF_T}, redis-benchmark -n {REDIS_N}, "
          f"memslap -e {MEMSLAP_E}; "
          "medians. Ratios are shortcut's median over the other transport's; the spread is the "
          "lowest–highest ratio of one repetition's runs. For latency rows a ratio below 1 is "
          "faster; everywhere else above 1 is faster. Targets are issue 5's, as ratios to kernel TCP. "
          "Every shortcut run was checked through `shortcut stats --json` (its own SHORTCUT_RUNDIR) "
          "to have put at least the connections the client opens (both ends) on shared memory; "
          "connection ends that stayed on TCP are listed below. \"no spin\" rows: SHORTCUT_SPIN_US=0 "
          "in the environment of both accelerated programs (TCP and Unix columns are the same runs as "
          "the row above). Physical references are measured within the same repetitions "
          "(`shortcut perf --transports shm|memcpy`, 64 B round trips / 64 KiB copies).")
    print()
    for k, t in FOOTNOTES.items():
        print(f"({k}) {t}")
    fb = [(g, v, d) for (g, v), d in fallbacks.items()]
    if fb:
        print()
        print("Connection ends that stayed on kernel TCP in shortcut runs (all repetitions together):")
        for g, v, d in fb:
            acc = d.get("accelerated", 0)
            why = ", ".join(f"{k} {n}" for k, n in d.items() if k != "accelerated")
            print(f"- {g} ({v}): {why} (and {acc} on shared memory)")
    if notes:
        print()
        print("Failed runs (first error of each transport; the cell's median is over the runs that worked):")
        for n in notes:
            print(f"- {n}")


AUX = {"achieved": ("achieved req/s", fmt), "p50": ("median latency µs", fmt)}


def print_floor_table(rows, elapsed):
    """the table of issues 12 and 24: each row's target and its verdict"""
    print("| workload | kernel TCP | sockmap | Unix socket | shortcut run | shortcut vs TCP: median of "
          "the runs' ratios (lowest–highest) | shortcut vs sockmap | sockmap vs TCP | empty preloaded "
          "library vs TCP (lowest–highest) | target | result "
          "| beside it (TCP / sockmap / Unix / shortcut) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for row, _ in rows:
        if row["skipped"] and row["median"]["tcp"] is None:
            print(f"| {row['title']} | ({row['skipped']}) | | | | | | | | | | |")
            continue
        rt, rs = row["ratio_to_tcp_pairwise"], row["ratio_to_tcp_spread"]
        vs_tcp = f"{fr(rt)} ({rs[0]:.3g}–{rs[1]:.3g})" if rt is not None and rs else fr(rt)
        rp, ps = row["preload_ratio_to_tcp"], row["preload_ratio_to_tcp_spread"]
        pre = f"{fr(rp)} ({ps[0]:.3g}–{ps[1]:.3g})" if rp is not None and ps else ""
        if not pre and "preload" in row["errors"]:
            pre = "failed"
        t = row["target"] or {"op": None, "every_run": False}
        op = "≥" if t["op"] == ">=" else "≤"
        tg = f"{op} {t['ratio_to_tcp']:g}x TCP" + (", every run" if t["every_run"] else "") \
            if t["op"] else "(for comparison)"
        verdict = {True: "pass", False: "**miss**", None: "no result" if t["op"] else ""}[
            row["target_met"]]
        sv = row["shortcut_variant"]
        n = row["failed_runs"].get(sv, 0)
        if n:   # fell back to TCP, or failed: not a shortcut figure
            fb = "fell back to TCP" if "not accelerated" in row["errors"].get(sv, "") else "failed"
            verdict = (f"**not measured**: shortcut {fb} in {n} of {args.reps} runs"
                       if row["median"]["shortcut"] is None else
                       f"**incomplete** ({verdict} on the rest): shortcut {fb} in {n} of {args.reps} runs")
        if row["target_met"] is not None and t["every_run"] and rs:
            verdict += f" (worst run {rs[0] if t['op'] == '>=' else rs[1]:.3g}x)"
        aux = "; ".join(f"{AUX[k][0]} " + " / ".join(AUX[k][1](d.get(v)) or "–"
                                                     for v in ("tcp", "sockmap", "unix", sv))
                        for k, d in row["aux"].items())
        m = re.match(r"rate(\d+)k", row["id"])
        if m:   # a transport that could not keep up was measured at a lower rate
            want = int(m.group(1)) * 1000
            short = [name for v, name in (("tcp", "kernel TCP"), ("sockmap", "sockmap"), ("unix", "Unix"),
                                          (sv, "shortcut"))
                     if (row["aux"].get("achieved", {}).get(v) or want) < 0.95 * want]
            if short:
                aux += f"; **{', '.join(short)} fell behind the rate** (saturated)"
        shm = cell(row, "shortcut")
        if shm == "failed" and "not accelerated" in row["errors"].get(sv, ""):
            shm = "fell back to TCP"
        print(f"| {row['title']} | {cell(row, 'tcp')} | {cell(row, 'sockmap')} | {cell(row, 'unix')} "
              f"| {shm} | {vs_tcp} | {vs(row, 'ratio_to_sockmap')} | {fr(row['sockmap_ratio_to_tcp'])} "
              f"| {pre} | {tg} | {verdict} | {aux} |")
        for v, e in row["errors"].items():
            m = f"{row['title']}, {v}: {e}"
            if m not in notes:
                notes.append(m)
    print()
    mode = "--quick: " if QUICK else ""
    print(f"{mode}Each workload ran {args.reps} times per transport, alternating (fresh processes, order "
          f"rotated every repetition); medians. The ratio is the median of the repetitions' ratios "
          f"(shortcut's run over kernel TCP's run of the same repetition), in brackets the lowest and "
          f"highest; the verdict is on that median (issue 24), or on the worst repetition where the "
          f"target says every run. For rows "
          f"marked lower is better, a ratio below 1 is better. Runs: sockbench `conn`, `rr --pairs` "
          f"{SB_DUR} s; `rate` {RATE_DUR} s per rate after a tenth of warm-up, 1,000, 10,000 and "
          f"50,000 req/s in one run each; pgbench -T {PG_DUR}; `setup` {SETUP_CONNS:,} connections, "
          f"{SETUP_CALLS:,} epoll_wait calls. Every shortcut run was checked through `shortcut stats "
          "--json` (its own SHORTCUT_RUNDIR, shared by both ends) to have put every connection it "
          "made on shared memory, none on TCP -- except that by default a client's short "
          "connections stay on TCP once it has learnt them (`conn`, `pgbench`: then each connection "
          "on shared memory or on TCP as `short_connections`, nothing else; the rows \"every "
          "connection on shared memory\" set SHORTCUT_SHORT_TCP=0); a run that fell back is not "
          f"counted, and its row says so. Defaults (SHORTCUT_SPIN_US=50, 1 MiB rings); \"no spin\": SHORTCUT_SPIN_US=0 in both "
          f"programs (TCP and Unix columns: the runs of the row with spin). Empty preloaded "
          "library: kernel TCP with LD_PRELOAD naming a library that interposes nothing "
          "(bench/empty_preload.c; in both programs, as `shortcut run` puts shortcut's, the "
          "`--plain-server` server without it), paired with kernel TCP's run of the same "
          "repetition: what loading any library that way costs, the floor of an interposer's "
          "figure where its connections stay on TCP. These rows took "
          f"{elapsed:.0f} s.")
    if notes:
        print()
        print("Failed runs (first error of each transport; the cell's median is over the runs that worked):")
        for m in notes:
            print(f"- {m}")


SOCKMAP_MISSING = None


if __name__ == "__main__":
    SOCKMAP_MISSING = sockmap_missing()
    if SOCKMAP_MISSING:
        print(f"sockmap column skipped: {SOCKMAP_MISSING}", file=sys.stderr)
    if not os.access(SOCKBENCH, os.X_OK):
        raise SystemExit(f"{SOCKBENCH} missing: make {os.path.relpath(SOCKBENCH)}")
    floor = args.set == "floor"
    t0 = time.time()
    try:
        samples, errors, skipped, fallbacks, nfail = run_all(FLOOR_GROUPS if floor else GROUPS)
    finally:
        pg_remove()
    rows = build_rows(FLOOR_ROWS if floor else ROWS, samples, errors, skipped, fallbacks, nfail)
    if args.only:
        rows = [(r, na) for r, na in rows if r["group"] in args.only.split(",")]
    elapsed = time.time() - t0
    if floor:
        print_floor_table(rows, elapsed)
    else:
        print_table(rows, fallbacks)
    print_proof()
    if args.json:
        data = {}
        if os.path.exists(args.json):
            with open(args.json) as f:
                data = json.load(f)
        data[args.set] = {"reps": args.reps, "quick": QUICK, "elapsed_s": round(elapsed, 1),
                          "rows": [r for r, _ in rows]}
        if not floor:
            data[args.set].update(seconds_per_run=DUR, footnotes=FOOTNOTES)
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    if errors:
        sys.exit(1)   # the table is complete; failed cells are named in it
