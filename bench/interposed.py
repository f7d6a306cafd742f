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

Prints a Markdown table (medians, ratios to TCP and to Unix with their
spread, targets) on stdout; with --json FILE, also stores every sample in
FILE under "programs" (keeping what else FILE holds: run.sh puts the core
figures of `shortcut perf` there first), which bench/plot.py draws.

  bench/interposed.py BUILD_DIR REPS [--quick] [--json FILE] [--only GROUP,...]

Transports ("variants"): tcp, unix, shortcut (SHORTCUT_SPIN_US unset: the
library default), shortcut_nospin (SHORTCUT_SPIN_US=0 in the environment of
both accelerated ends), ref (a physical reference from `shortcut perf`).
SHORTCUT_* and LD_PRELOAD are removed from the inherited environment.
"""
import argparse
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
ap.add_argument("--only", help="comma-separated workload groups to run: " +
                "conn,rr,stream,sockperf_pp,sockperf_tp,nginx,redis,iperf3,memcached")
args = ap.parse_args()

BUILD = os.path.abspath(args.build)
SHORTCUT = os.path.join(BUILD, "shortcut")
SOCKBENCH = os.path.join(BUILD, "bench", "sockbench")
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


class Failed(Exception):
    pass


def tail(text, n=300):
    """the last lines of a program's output, one line, without colours"""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " / ".join(ln.strip() for ln in text.strip().splitlines() if ln.strip())[-n:]


class Ctx:
    """One run of one transport: its run directory, scratch directory,
    environment and server processes."""

    def __init__(self, variant):
        self.variant = variant
        self.accel = variant in ("shortcut", "shortcut_nospin")
        self.rundir = tempfile.mkdtemp(prefix="sc-bench-")
        self.tmp = tempfile.mkdtemp(prefix="sc-bw-")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("SHORTCUT_") and k != "LD_PRELOAD"}
        self.env["SHORTCUT_RUNDIR"] = self.rundir
        if variant == "shortcut_nospin":
            self.env["SHORTCUT_SPIN_US"] = "0"
        self.pre = [SHORTCUT, "run"] if self.accel else []
        self.procs = []
        self.st = None

    def path(self, name):
        return os.path.join(self.tmp, name)

    def server(self, cmd, log=None):
        out = open(self.path(log), "w") if log else subprocess.DEVNULL
        p = subprocess.Popen(self.pre + cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, preexec_fn=raise_nofile,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def run(self, cmd, timeout=120):
        p = subprocess.Popen(self.pre + cmd, env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                             preexec_fn=raise_nofile, start_new_session=True)
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
        r = subprocess.run([SHORTCUT, "stats", "--json"], capture_output=True, text=True,
                           env=self.env, timeout=30)
        return json.loads(r.stdout)

    def finish(self, min_accel):
        """Stop the servers; for an accelerated run, check that at least
        min_accel connection ends were on shared memory."""
        self.stop()
        st = None
        if self.accel:
            st = self.st = self.stats()
            if st["conns_accelerated"] < min_accel:
                raise Failed(f"not accelerated: {st['conns_accelerated']} connection ends on shared "
                             f"memory (expected >= {min_accel}), fallbacks {st['fallback']}")
        shutil.rmtree(self.rundir, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return st

    def cleanup(self):
        self.stop()
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
        c.finish(min_accel=200 if mode == "conn" else 2)
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
    c.server(["iperf3", "-s", "-1", "-p", str(port)])
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


# ---- what runs and how it is reported ------------------------------------

# name, variants, function, programs needed
GROUPS = [
    ("conn", ["tcp", "unix", "shortcut"], sockbench("conn", 64, "ops_per_s"), ()),
    ("rr", ["tcp", "unix", "shortcut", "shortcut_nospin", "ref"], sockbench("rr", 100, "ops_per_s"), ()),
    ("stream", ["tcp", "unix", "shortcut", "ref"], sockbench("stream", 65536, "gbytes_per_s"), ()),
    ("sockperf_pp", ["tcp", "shortcut", "shortcut_nospin"], sockperf("pp"), ("sockperf",)),
    ("sockperf_tp", ["tcp", "shortcut"], sockperf("tp"), ("sockperf",)),
    ("nginx", ["tcp", "unix", "shortcut"], nginx, ("nginx", "wrk")),
    ("redis", ["tcp", "unix", "shortcut"], redis, ("redis-server", "redis-benchmark")),
    ("iperf3", ["tcp", "shortcut"], iperf3, ("iperf3",)),
    ("memcached", ["tcp", "unix", "shortcut"], memcached, ("memcached",)),
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
    ("conn", "conn", "connect + 64 B exchange + close, sockbench (connections/s)",
     "conn/s", False, None, "shortcut", None, None),
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
]


def run_all():
    only = set(args.only.split(",")) if args.only else None
    samples = {}    # row id -> variant -> [values], aligned by repetition (None: failed)
    errors = {}     # (group, variant) -> first error
    skipped = {}    # group -> reason
    fallbacks = {}  # (group, variant) -> {reason: connection ends that stayed on TCP}
    nfail = {}      # (group, variant) -> failed runs
    for name, variants, fn, bins in GROUPS:
        if only and name not in only:
            continue
        missing = [b for b in bins if not which(b)]
        if missing:
            skipped[name] = "not installed: " + ", ".join(missing)
            print(f"skipping {name}: {skipped[name]}", file=sys.stderr)
            continue
        t0 = time.time()
        print(f"running: {name} ({', '.join(variants)}) x {args.reps}", file=sys.stderr, flush=True)
        for rep in range(args.reps):
            k = rep % len(variants)
            for v in variants[k:] + variants[:k]:
                c = Ctx(v)
                try:
                    res = fn(c)
                except (Failed, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
                    c.cleanup()
                    errors.setdefault((name, v), f"{type(e).__name__}: {e}")
                    nfail[(name, v)] = nfail.get((name, v), 0) + 1
                    print(f"  {name} {v} rep {rep + 1}: FAILED: {e}", file=sys.stderr, flush=True)
                    continue
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
    return samples, errors, skipped, fallbacks


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


def build_rows(samples, errors, skipped, fallbacks):
    out = []
    for rid, group, title, unit, lower, na, sv, target, refname in ROWS:
        s = samples.get(rid.replace("_nospin", "") if sv == "shortcut_nospin" else rid, {})
        if sv == "shortcut_nospin":
            s = dict(s)
            s["shortcut_nospin"] = samples.get(rid, {}).get("shortcut_nospin")
        tcp, unix, shm = s.get("tcp"), s.get("unix"), s.get(sv)
        ref = s.get("ref")
        mt, mu, ms = med(tcp or []), med(unix or []), med(shm or [])
        rt = paired(shm, tcp)
        ru = paired(shm, unix)
        rut = paired(unix, tcp)
        row = {
            "id": rid, "group": group, "title": title, "unit": unit, "lower_is_better": lower,
            "samples": {"tcp": tcp, "unix": unix, "shortcut": shm, "reference": ref},
            "median": {"tcp": mt, "unix": mu, "shortcut": ms, "reference": med(ref or [])},
            "ratio_to_tcp": ms / mt if ms is not None and mt else None,
            "ratio_to_tcp_spread": [rt[0], rt[-1]] if rt else None,
            "ratio_to_unix": ms / mu if ms is not None and mu else None,
            "ratio_to_unix_spread": [ru[0], ru[-1]] if ru else None,
            "unix_ratio_to_tcp": mu / mt if mu is not None and mt else None,
            "unix_ratio_to_tcp_spread": [rut[0], rut[-1]] if rut else None,
            "unix_note": FOOTNOTES[na] if na else None,
            "reference_name": refname,
            "target": {"op": target[0], "ratio_to_tcp": target[1]} if target else None,
            "errors": {v: e for (g, v), e in errors.items()
                       if g == group and v in ("tcp", "unix", sv, "ref")},
            "skipped": skipped.get(group),
            "fallbacks": fallbacks.get((group, sv)),
            "shortcut_variant": sv,
        }
        if target and row["ratio_to_tcp"] is not None:
            r = row["ratio_to_tcp"]
            row["target_met"] = r >= target[1] if target[0] == ">=" else r <= target[1]
        else:
            row["target_met"] = None
        out.append((row, na))
    return out


def cell(row, key):
    v = row["shortcut_variant"] if key == "shortcut" else key
    if row["median"][key] is None and v in row["errors"]:
        return "failed"
    return fmt(row["median"][key])


def print_table(rows, fallbacks):
    print("| workload (unmodified programs) | kernel TCP | Unix socket | shortcut run "
          "| shortcut vs TCP (spread) | shortcut vs Unix (spread) | Unix vs TCP | target | physical reference |")
    print("|---|---|---|---|---|---|---|---|---|")
    notes = []
    for row, na in rows:
        if row["skipped"] and row["median"]["tcp"] is None:
            print(f"| {row['title']} | ({row['skipped']}) | | | | | | | |")
            continue
        if na:
            unix = f"n/a ({na})"
        else:
            unix = cell(row, "unix")
        rt, rs = row["ratio_to_tcp"], row["ratio_to_tcp_spread"]
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
        print(f"| {row['title']} | {cell(row, 'tcp')} | {unix} | {cell(row, 'shortcut')} "
              f"| {vs_tcp} | {vs_unix} | {fr(row['unix_ratio_to_tcp'])} | {tg} | {ref} |")
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


if __name__ == "__main__":
    if not os.access(SOCKBENCH, os.X_OK):
        raise SystemExit(f"{SOCKBENCH} missing: make {os.path.relpath(SOCKBENCH)}")
    t0 = time.time()
    samples, errors, skipped, fallbacks = run_all()
    rows = build_rows(samples, errors, skipped, fallbacks)
    if args.only:
        rows = [(r, na) for r, na in rows if r["group"] in args.only.split(",")]
    print_table(rows, fallbacks)
    if args.json:
        data = {}
        if os.path.exists(args.json):
            with open(args.json) as f:
                data = json.load(f)
        data["programs"] = {"reps": args.reps, "quick": QUICK, "seconds_per_run": DUR,
                            "elapsed_s": round(time.time() - t0, 1),
                            "rows": [r for r, _ in rows], "footnotes": FOOTNOTES}
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    if errors:
        sys.exit(1)   # the table is complete; failed cells are named in it
