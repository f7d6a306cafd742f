#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Containers (issue 22): what shortcut gives between two containers of one
host.

  bench/containers.py redis REPS [--quick] [--json FILE]
      redis-benchmark -t set,get -c 50 -d 1024 -n N --csv in one container
      against redis-server in another (each its container's pid 1, the
      engine's default bridge network between them), kernel TCP and shortcut
      alternating, REPS runs each; and the same between two processes on
      the host, in the same run.  A Markdown section on stdout; with --json,
      every sample into FILE under "containers" (keeping what else it holds).
      kernel TCP: the library not loaded (no LD_PRELOAD; its files are
      mounted, unused) and no run directory;
      shortcut: the library bind-mounted read-only and preloaded
      (LD_PRELOAD, as docs/containers.md's bind-mount way), one host run
      directory bind-mounted into both at /run/sc (SHORTCUT_RUNDIR), a fresh
      one per run, read with `shortcut stats --json` after each run: a run
      with a connection end on TCP, or a byte through TCP, is left out of
      the figures and named.  On the host: `shortcut run` on both ends with
      a run directory of their own, or neither.  Needs root and a container
      engine (Podman, or SC_CONTAINER_ENGINE=docker: Docker), else says
      why it skipped; the containers, the image (debootstrap, cached in
      build/containers/) and the engine's set-up are
      tests/integration/containers.py's.
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests", "integration")

CLIENTS = 50
SIZE = 1024
PORT = 6390     # in the server container's own network namespace


class Failed(Exception):
    pass


def machine():
    """One line: CPUs, CPU model, kernel."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            model = m.group(1).strip() if m else ""
    except OSError:
        pass
    return "%d CPUs (%s), %s, kernel %s" % (os.cpu_count(), model or "?", platform.machine(),
                                            platform.release())


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def redis_version():
    v = tool_version(["redis-server", "--version"]) or ""
    m = re.search(r"v=([0-9.]+)", v)
    return "Redis " + m.group(1) if m else "redis"


def tool_version(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip().splitlines()[0] if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


# ---- redis-benchmark: two containers, two host processes --------------------

def parse_csv(out):
    """redis-benchmark --csv: {"SET": req/s, "GET": req/s}."""
    got = {}
    for line in out.splitlines():
        f = [x.strip('"') for x in line.strip().split(",")]
        if len(f) >= 2 and f[0] in ("SET", "GET"):
            got[f[0]] = float(f[1])
    return got


def bench_argv(host, port, n):
    return ["redis-benchmark", "-h", host, "-p", str(port), "-t", "set,get", "-c", str(CLIENTS),
            "-d", str(SIZE), "-n", str(n), "--csv"]


def server_argv(port, bind=None):
    return ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
            "--protected-mode", "no"] + (["--bind", bind] if bind else [])


def check_shm(st):
    """A shortcut run's proof: every connection end on shared memory (both
    ends of each of redis-benchmark's connections), nothing through TCP."""
    fb = {k: v for k, v in st["fallback"].items() if v}
    if st["conns_accelerated"] < 2 * CLIENTS or st["conns_fallback"] or \
            st["bytes_tcp_sent"] or st["bytes_tcp_received"]:
        raise Failed("not all on shared memory: %d connection ends on shared memory, %d on TCP "
                     "%s, %d bytes through TCP" % (st["conns_accelerated"], st["conns_fallback"],
                                                   fb, st["bytes_tcp_sent"] +
                                                   st["bytes_tcp_received"]))
    return {"shm": st["conns_accelerated"], "ends": st["conns_accelerated"] + st["conns_fallback"],
            "bytes_shm": st["bytes_shm_sent"]}


def ctr_run(C, eng, accel, n):
    """One run between two containers: ({"SET":, "GET":}, proof or None)."""
    rundir = C.shm_rundir("sc-bench-ctr-")
    b = C.Bench(eng, rundir)
    # kernel TCP: neither the library nor the run directory
    kw = {"preload": True} if accel else {"preload": False, "rundir": False}
    try:
        srv = b.run("redis", server_argv(PORT), **kw)
        try:
            srv.out.wait_for(lambda s: "Ready to accept connections" in s, 120)
        except AssertionError as e:
            raise Failed("redis-server: %s %s" % (e, srv.err.text()[-300:]))
        cli = b.run("rb", bench_argv(srv.ip(), PORT, n), **kw)
        rc, out, err = cli.finish(600)
        rates = parse_csv(out)
        if rc or set(rates) != {"SET", "GET"}:
            raise Failed("redis-benchmark exited %d: %s" % (rc, (out + err).strip()[-300:]))
        proof = check_shm(C.stats(rundir)) if accel else None
        return rates, proof
    finally:
        b.close()
        shutil.rmtree(rundir, ignore_errors=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def host_run(C, accel, n):
    """The same between two processes on the host (loopback)."""
    rundir = C.shm_rundir("sc-bench-host-")
    env = C.host_env(rundir)
    pre = [C.SHORTCUT, "run", "--"] if accel else []
    port = free_port()
    srv = subprocess.Popen(pre + server_argv(port, "127.0.0.1"), env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        out = C.Lines(srv.stdout, "redis-server")
        try:
            out.wait_for(lambda s: "Ready to accept connections" in s, 60)
        except AssertionError as e:
            raise Failed("redis-server: %s" % e)
        r = subprocess.run(pre + bench_argv("127.0.0.1", port, n), env=env, capture_output=True,
                           text=True, timeout=600)
        rates = parse_csv(r.stdout)
        if r.returncode or set(rates) != {"SET", "GET"}:
            raise Failed("redis-benchmark exited %d: %s" % (r.returncode,
                                                            (r.stdout + r.stderr).strip()[-300:]))
        proof = check_shm(C.stats(rundir)) if accel else None
        return rates, proof
    finally:
        os.killpg(srv.pid, signal.SIGKILL)
        srv.wait()
        shutil.rmtree(rundir, ignore_errors=True)


def skip_section(why):
    print("\n## Containers (issue 22): redis-benchmark between two containers\n")
    print("Skipped: %s." % why)
    sys.stderr.write("containers: skipped: %s\n" % why)


def engine_or_reason():
    """(tests/integration/containers.py, its engine) or (None, why not).
    Unlike the tests, it installs no engine."""
    if os.geteuid() != 0:
        return None, None, "needs root (the containers run under rootful Podman or Docker)"
    kind = os.environ.get("SC_CONTAINER_ENGINE", "podman")
    if kind not in ("podman", "docker"):
        return None, None, "SC_CONTAINER_ENGINE=%s: podman or docker" % kind
    if kind == "podman" and not shutil.which("podman"):
        return None, None, ("needs a container engine: no podman (Debian package podman; "
                            "`make check T=test_containers` installs it), nor "
                            "SC_CONTAINER_ENGINE=docker")
    if kind == "docker" and not (shutil.which("dockerd") or os.path.exists("/usr/bin/dockerd")):
        return None, None, "needs a container engine: no dockerd (Debian package docker.io)"
    sys.path.insert(0, TESTS)
    try:
        import pytest
        import containers as C
    except ImportError as e:
        return None, None, "needs pytest for tests/integration/containers.py (%s)" % e
    if not os.path.exists(C.IMAGE_TAR):
        sys.stderr.write("containers: making the image with debootstrap (a few minutes, once)\n")
    try:
        return C, C.engine(kind), None
    except pytest.skip.Exception as e:
        return None, None, str(e) or "the container engine cannot run here"


def cmd_redis(a):
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        skip_section("needs redis-server and redis-benchmark on the host (Debian packages "
                     "redis-server, redis-tools)")
        return 0
    C, eng, why = engine_or_reason()
    if not C:
        skip_section(why)
        return 0
    n = 30000 if a.quick else 100000
    places = (("ctr", "two containers"), ("host", "two host processes"))
    rates = {(p, v, t): [] for p, _ in places for v in ("tcp", "shortcut") for t in ("SET", "GET")}
    proofs = {p: [] for p, _ in places}
    failed = []
    load0 = loadavg()
    t0 = time.monotonic()
    for i in range(a.reps):
        for place, _ in places:
            # the transports alternate: each sees the same phases of a noisy machine
            for v in (("tcp", "shortcut") if i % 2 == 0 else ("shortcut", "tcp")):
                sys.stderr.write("containers: redis-benchmark, %s, %s, run %d of %d\n" % (
                    place, v, i + 1, a.reps))
                try:
                    if place == "ctr":
                        got, proof = ctr_run(C, eng, v == "shortcut", n)
                    else:
                        got, proof = host_run(C, v == "shortcut", n)
                except (Failed, AssertionError, RuntimeError, subprocess.TimeoutExpired) as e:
                    failed.append("%s, %s, run %d: %s" % (place, v, i + 1, e))
                    continue
                for t, x in got.items():
                    rates[(place, v, t)].append(x)
                if proof:
                    proofs[place].append(proof)
    took = time.monotonic() - t0
    if C._dockerd:
        C.stop_dockerd()

    def med(xs):
        return statistics.median(xs) if xs else None

    def fmt(x):
        return "%s" % format(round(x), ",") if x is not None else "failed"

    ver = tool_version(eng.argv + ["--version"]) or eng.kind
    print("\n## Containers (issue 22): redis-benchmark between two containers\n")
    print("`redis-benchmark -t set,get -c %d -d %d -n %d --csv` against `redis-server` (%s in the "
          "containers' Debian 12 image and on the host), medians of %d runs per transport, kernel "
          "TCP and shortcut alternating, in fresh containers or processes; %s.\n" % (
              CLIENTS, SIZE, n, redis_version(),
              a.reps, ver))
    print("| workload (requests/s) | kernel TCP | shortcut | shortcut vs TCP | kernel TCP min–max "
          "| shortcut min–max | shortcut runs on shared memory |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for place, title in places:
        ps = proofs[place]
        if ps:
            ends = sorted({(p["shm"], p["ends"]) for p in ps})
            proof = "%d of %d: %s connection ends, 0 bytes through TCP" % (
                len(ps), a.reps, ", ".join("%d/%d" % e for e in ends))
        else:
            proof = "none"
        for t in ("SET", "GET"):
            tcp, shm = rates[(place, "tcp", t)], rates[(place, "shortcut", t)]
            mt, ms = med(tcp), med(shm)
            ratio = ms / mt if mt and ms else None
            print("| %s: %s | %s | %s | %s | %s | %s | %s |" % (
                title, t, fmt(mt), fmt(ms), "%.2fx" % ratio if ratio else "",
                "%s–%s" % (fmt(min(tcp)), fmt(max(tcp))) if tcp else "",
                "%s–%s" % (fmt(min(shm)), fmt(max(shm))) if shm else "", proof))
            rows.append({"id": "containers_%s_%s" % (place, t.lower()), "title": "%s: %s" % (
                title, t), "median": {"tcp": mt, "shortcut": ms}, "ratio_to_tcp": ratio,
                "samples": {"tcp": tcp, "shortcut": shm}})
    print("\nContainers: the engine's default bridge network; the client connects to the "
          "server container's address. Kernel TCP: the library loaded in neither container "
          "(no `LD_PRELOAD`), no run directory. shortcut: the library bind-mounted read-only "
          "and preloaded (`LD_PRELOAD`), a fresh host run directory bind-mounted into both at "
          "`/run/sc` (`SHORTCUT_RUNDIR`). Host: two processes over 127.0.0.1, under `shortcut "
          "run` (a run directory of their own) or not. Shared memory proven by `shortcut "
          "stats --json` of each shortcut run (`conns_accelerated` of all connection ends, "
          "both ends counted, `bytes_tcp_*` 0); a run that was not is left out and named "
          "below. `bench/containers.py redis`.")
    try:
        with open("/proc/sys/net/bridge/bridge-nf-call-iptables") as f:
            brnf = f.read().strip() == "1"
    except OSError:
        brnf = False
    print("\nThis section took %.0f s; load average %s at its start, %s at its end (%s). "
          "Bridged traffic between the containers %s through the host's iptables and connection "
          "tracking (br_netfilter, `net.bridge.bridge-nf-call-iptables`%s)." % (
              took, load0, loadavg(), machine(), "went" if brnf else "did not go",
              " = 1: Docker loads it" if brnf else ""))
    for f in failed:
        print("\n- failed: %s" % f)
    if a.json:
        try:
            with open(a.json) as f:
                j = json.load(f)
        except (OSError, ValueError):
            j = {}
        j["containers"] = {"engine": ver, "n": n, "clients": CLIENTS, "size": SIZE,
                           "reps": a.reps, "rows": rows, "proofs": proofs, "failed": failed}
        with open(a.json, "w") as f:
            json.dump(j, f, indent=1)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("redis", help="redis-benchmark between two containers and two processes")
    r.add_argument("reps", type=int)
    r.add_argument("--quick", action="store_true", help="-n 30000 instead of 100000")
    r.add_argument("--json", help="store the samples in this JSON file (key 'containers')")
    a = ap.parse_args()
    if a.reps < 1:
        ap.error("REPS must be >= 1")
    return cmd_redis(a)


if __name__ == "__main__":
    sys.exit(main())
