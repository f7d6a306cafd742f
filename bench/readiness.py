#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Readiness (issue 4): an asyncio echo server and 10,000 idle connections in
one epoll set, kernel TCP vs `shortcut run`, in the same run.

  bench/readiness.py BUILD_DIR REPS [--quick]

- bench/asyncio_echo.py: 50 connections of request/response 100 B between an
  asyncio server process and an asyncio client process (messages/s), with
  BufferedProtocol and with Protocol.data_received.
- bench/epoll_idle.c (BUILD_DIR/bench/epoll_idle, compiled here if missing or
  older than its source): a server with N idle connections (10,000; 2,000
  with --quick) and one active one in one level-triggered epoll set (server
  and clients pinned to two different CPUs);
  ping-pong latency with and without the idle ones, the server's CPU time
  while nothing moves, the cost of epoll_wait(timeout 0) with nothing ready,
  and all idle connections sending one message at once (none may be missed).
  Under shortcut with SHORTCUT_RMEM=16K SHORTCUT_WMEM=16K, with the default
  spin and with SHORTCUT_SPIN_US=0.

Every configuration runs REPS times, alternating; medians; every accelerated
run is checked through `shortcut stats` (all connections on shared memory, no
fallback).  Prints a Markdown section on stdout, progress on stderr.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import asyncio_echo  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
quick = "--quick" in sys.argv[1:]
if len(args) != 2:
    raise SystemExit(__doc__)
build, reps = args[0], int(args[1])
shortcut = os.path.join(build, "shortcut")

ECHO_SECONDS = 1.0 if quick else 2.0
IDLE_CONNS = 2000 if quick else 10000
IDLE_ARGS = ["--conns", str(IDLE_CONNS)] + (
    ["--seconds", "0.5", "--idle-seconds", "0.5", "--calls", "50000"] if quick else
    ["--seconds", "1", "--idle-seconds", "1.5", "--calls", "100000"])
# the server on one CPU, the clients on another: otherwise the scheduler
# sometimes runs both on one vCPU, and a round trip is then a context switch
# (~15 µs here) instead of a cross-CPU wake-up (~70 µs), run to run at random
CPUS = sorted(os.sched_getaffinity(0))
PIN = f"{CPUS[0]},{CPUS[1]}" if len(CPUS) >= 2 else None
if PIN:
    IDLE_ARGS += ["--pin", PIN]
SHM_ENV = {"SHORTCUT_RMEM": "16K", "SHORTCUT_WMEM": "16K"}


def epoll_idle_binary():
    src = os.path.join(HERE, "epoll_idle.c")
    out = os.path.join(build, "bench", "epoll_idle")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-Wall", "-o", out, src], check=True)
    return out


def stats(rundir):
    r = subprocess.run([shortcut, "stats", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, SHORTCUT_RUNDIR=rundir), timeout=30)
    return json.loads(r.stdout)


def epoll_idle(binary, accel, spin=None):
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir)
    cmd = [binary] + IDLE_ARGS
    if accel:
        env.update(SHM_ENV)
        if spin is not None:
            env["SHORTCUT_SPIN_US"] = str(spin)
        cmd = [shortcut, "run"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-2000:]}")
    v = json.loads(r.stdout)
    if accel:
        st = stats(rundir)
        want = 2 * (IDLE_CONNS + 1)
        if st["conns_accelerated"] != want or st["conns_fallback"]:
            raise SystemExit(f"{' '.join(cmd)}: {st['conns_accelerated']} of {want} connection "
                             f"ends accelerated, fallback {st['fallback']} (rundir {rundir})")
    shutil.rmtree(rundir, ignore_errors=True)
    return v


def med(xs):
    return statistics.median(xs)


def fmt(x):
    if x is None:
        return ""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def spread(a, b):
    r = sorted(y / x for x, y in zip(a, b) if x)
    return f"{r[0]:.3g}–{r[-1]:.3g}x" if r else ""


print("## Readiness (issue 4)")
print()

# ---- asyncio echo ----
echo = {}
for style in asyncio_echo.STYLES:
    tcp, shm = [], []
    for i in range(reps):
        print(f"running: asyncio echo ({style}) {i + 1}/{reps}", file=sys.stderr)
        tcp.append(asyncio_echo.run_once(build, False, ECHO_SECONDS, 50, 100, style)["messages_per_s"])
        shm.append(asyncio_echo.run_once(build, True, ECHO_SECONDS, 50, 100, style)["messages_per_s"])
    echo[style] = (tcp, shm)

print("| asyncio echo, 50 connections, request/response 100 B (messages/s) "
      "| kernel TCP | shortcut run | ratio | spread of ratios |")
print("|---|---|---|---|---|")
titles = {"buffered": "asyncio.BufferedProtocol (recv_into)",
          "protocol": "asyncio.Protocol (data_received)"}
for style in asyncio_echo.STYLES:
    tcp, shm = echo[style]
    print(f"| {titles[style]} | {fmt(med(tcp))} | {fmt(med(shm))} | "
          f"{med(shm) / med(tcp):.3g}x | {spread(tcp, shm)} |")
print()

# ---- epoll_idle ----
binary = epoll_idle_binary()
configs = [("tcp", False, None), ("shm", True, None), ("shm0", True, 0)]
runs = {k: [] for k, _, _ in configs}
for i in range(reps):
    for key, accel, spin in configs:
        print(f"running: epoll_idle {key} {i + 1}/{reps}", file=sys.stderr)
        runs[key].append(epoll_idle(binary, accel, spin))

figures = [
    ("ping-pong 64 B, lone connection (round trip µs, mean)", lambda v: v["lone"]["rtt_us"]),
    ("  the same, median (µs)", lambda v: v["lone"]["rtt_median_us"]),
    (f"ping-pong 64 B, with {IDLE_CONNS:,} idle in the set (round trip µs, mean)",
     lambda v: v["idle"]["rtt_us"]),
    ("  the same, median (µs)", lambda v: v["idle"]["rtt_median_us"]),
    ("  the same, p99 (µs)", lambda v: v["idle"]["rtt_p99_us"]),
    (f"round trip with {IDLE_CONNS:,} idle / lone (same run)", lambda v: v["rtt_ratio"]),
    (f"server CPU while idle, {IDLE_CONNS:,} registered (% of a CPU)",
     lambda v: v["idle"]["server_idle_cpu_pct"]),
    (f"server wake-ups while idle, {IDLE_CONNS:,} registered", lambda v: v["idle"]["server_idle_wakeups"]),
    ("epoll_wait(timeout 0), nothing ready, 1 registered (ns per call)",
     lambda v: v["lone"]["epoll_wait0_ns"]),
    (f"epoll_wait(timeout 0), nothing ready, {IDLE_CONNS + 1:,} registered (ns per call)",
     lambda v: v["idle"]["epoll_wait0_ns"]),
    (f"all {IDLE_CONNS:,} idle connections send 64 B at once: until the server read all (ms)",
     lambda v: v["burst_s"] * 1e3),
    (f"connecting {IDLE_CONNS:,} idle connections until all registered (s)",
     lambda v: v["registered_s"]),
]
print(f"| epoll with {IDLE_CONNS:,} idle connections (epoll_idle; lower is better) | kernel TCP "
      "| shortcut | shortcut, SPIN_US=0 | shortcut vs TCP | spread | SPIN_US=0 vs TCP |")
print("|---|---|---|---|---|---|---|")
for title, f in figures:
    t = [f(v) for v in runs["tcp"]]
    s = [f(v) for v in runs["shm"]]
    z = [f(v) for v in runs["shm0"]]
    mt, ms, mz = med(t), med(s), med(z)
    if "idle /" in title:   # a ratio already: no ratio of ratios
        print(f"| {title} | {mt:.3g}x | {ms:.3g}x | {mz:.3g}x | | | |")
        continue
    if mt:
        print(f"| {title} | {fmt(mt)} | {fmt(ms)} | {fmt(mz)} | {ms / mt:.3g}x | {spread(t, s)} | "
              f"{mz / mt:.3g}x |")
    else:
        print(f"| {title} | {fmt(mt)} | {fmt(ms)} | {fmt(mz)} | | | |")
v0 = runs["shm"][0]
print(f"\nEach configuration ran {reps} times, alternating; medians; every `shortcut run` "
      f"was checked through `shortcut stats` to have put every connection on shared memory. "
      f"asyncio: server and client are separate Python processes (default event loop), "
      f"{ECHO_SECONDS:g} s each. epoll_idle: the server holds all {IDLE_CONNS:,} idle "
      f"connections and the active one in one epoll set (level-triggered EPOLLIN); the idle "
      f"ones are opened by {v0['holders']} client process(es) (RLIMIT_NOFILE {v0['nofile']}); "
      + (f"server pinned to CPU {CPUS[0]}, clients to CPU {CPUS[1]}; " if PIN else "")
      + "under shortcut SHORTCUT_RMEM=16K SHORTCUT_WMEM=16K.")
