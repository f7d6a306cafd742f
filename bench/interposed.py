#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Unmodified programs through the interposer, side by side with kernel TCP.

Runs each workload plainly and under `shortcut run`, alternating, REPS times;
checks through `shortcut stats` that the accelerated runs really used shared
memory; prints a Markdown table (medians, spread, ratio) on stdout.
  bench/interposed.py BUILD_DIR REPS
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build, reps = sys.argv[1], int(sys.argv[2])
shortcut = os.path.join(build, "shortcut")
sockbench = os.path.join(build, "bench", "sockbench")


def stats(rundir):
    r = subprocess.run([shortcut, "stats", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, SHORTCUT_RUNDIR=rundir), timeout=30)
    return json.loads(r.stdout)


def sock(mode, size, accel, key):
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir)
    cmd = [sockbench, mode, "--seconds", "1", "--size", str(size)]
    if accel:
        cmd = [shortcut, "run"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    if r.returncode:
        raise SystemExit(f"{cmd}: {r.stderr}")
    v = json.loads(r.stdout)[key]
    if accel and stats(rundir)["conns_accelerated"] == 0:
        raise SystemExit(f"{cmd}: not accelerated")
    shutil.rmtree(rundir, ignore_errors=True)
    return v


def redis(test, accel):
    """redis-benchmark -t test -c 50 -d 1024 against a fresh redis-server."""
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        return None
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir)
    pre = [shortcut, "run"] if accel else []
    port = 17000 + os.getpid() % 1000
    srv = subprocess.Popen(pre + ["redis-server", "--port", str(port), "--save", "",
                                  "--appendonly", "no"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        r = subprocess.run(pre + ["redis-benchmark", "-p", str(port), "-t", test, "-n", "100000",
                                  "-c", "50", "-d", "1024", "-q", "--csv"],
                           capture_output=True, text=True, env=env, timeout=120)
        line = [l for l in r.stdout.splitlines() if l.startswith('"' + test.upper())]
        v = float(line[0].split(",")[1].strip('"'))
        if accel and stats(rundir)["conns_accelerated"] < 50:
            raise SystemExit("redis: not accelerated")
        return v
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(rundir, ignore_errors=True)


rows = [
    ("connect + 64 B exchange + close (connections/s)", lambda a: sock("conn", 64, a, "ops_per_s"), False),
    ("request/response 100 B, ipc-bench style (messages/s)", lambda a: sock("rr", 100, a, "ops_per_s"), False),
    ("stream 64 KiB writes (GB/s)", lambda a: sock("stream", 65536, a, "gbytes_per_s"), False),
    ("redis-benchmark SET -c 50 -d 1024 (requests/s)", lambda a: redis("set", a), False),
    ("redis-benchmark GET -c 50 -d 1024 (requests/s)", lambda a: redis("get", a), False),
]
print("| workload (unmodified programs) | kernel TCP | shortcut run | ratio | spread of ratios |")
print("|---|---|---|---|---|")
for title, fn, _ in rows:
    print(f"running: {title}", file=sys.stderr)
    tcp, shm = [], []
    for _ in range(reps):
        a, b = fn(False), fn(True)
        if a is None or b is None:
            break
        tcp.append(a)
        shm.append(b)
    if not tcp:
        print(f"| {title} | (program not installed) | | | |")
        continue
    ratios = sorted(s / t for s, t in zip(shm, tcp))
    mt, ms = statistics.median(tcp), statistics.median(shm)
    print(f"| {title} | {mt:.4g} | {ms:.4g} | {ms / mt:.2f}x | {ratios[0]:.2f}–{ratios[-1]:.2f}x |")
print(f"\nEach workload ran {reps} times plainly and under `shortcut run`, alternating; medians; "
      "every accelerated run was checked through `shortcut stats` to have used shared memory.")
