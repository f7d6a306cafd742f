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


def wait_port(port, timeout=5.0):
    import socket
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def nginx(accel):
    """nginx (2 workers, keepalive, sendfile) + wrk -t2 -c100 -d3s on a small file."""
    ng = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not ng or not shutil.which("wrk"):
        return None
    tmp = tempfile.mkdtemp(prefix="sc-bng-")
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir)
    port = free_port()
    os.makedirs(os.path.join(tmp, "html"))
    with open(os.path.join(tmp, "html", "index.html"), "w") as f:
        f.write("hello\n" * 100)
    user = "user %s;\n" % __import__("pwd").getpwuid(os.getuid()).pw_name if os.getuid() == 0 else ""
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""{user}worker_processes 2;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off; sendfile on; keepalive_requests 1000000;
  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp};
  uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  server {{ listen 127.0.0.1:{port}; root {tmp}/html; }}
}}
""")
    pre = [shortcut, "run"] if accel else []
    srv = subprocess.Popen(pre + [ng, "-c", conf, "-g", "daemon off;"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port):
            raise SystemExit("nginx did not start")
        r = subprocess.run(pre + ["wrk", "-t2", "-c100", "-d3s", f"http://127.0.0.1:{port}/index.html"],
                           capture_output=True, text=True, env=env, timeout=60)
        line = [l for l in r.stdout.splitlines() if l.startswith("Requests/sec")]
        if "Socket errors" in r.stdout or "Non-2xx" in r.stdout or not line:
            raise SystemExit("wrk: " + r.stdout)
        v = float(line[0].split()[1])
    finally:
        srv.terminate()
        srv.wait()
    if accel and stats(rundir)["conns_accelerated"] < 100:
        raise SystemExit("nginx: not accelerated")
    shutil.rmtree(rundir, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return v


def iperf3(accel):
    if not shutil.which("iperf3"):
        return None
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir)
    port = free_port()
    pre = [shortcut, "run"] if accel else []
    srv = subprocess.Popen(pre + ["iperf3", "-s", "-1", "-p", str(port)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = subprocess.run(pre + ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "2", "-J"],
                           capture_output=True, text=True, env=env, timeout=60)
        v = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        srv.kill()
        srv.wait()
    if accel and stats(rundir)["conns_accelerated"] < 2:
        raise SystemExit("iperf3: not accelerated")
    shutil.rmtree(rundir, ignore_errors=True)
    return v


def sockperf(mode, accel):
    if not shutil.which("sockperf"):
        return None
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir)
    port = free_port()
    pre = [shortcut, "run"] if accel else []
    srv = subprocess.Popen(pre + ["sockperf", "server", "--tcp", "-i", "127.0.0.1", "-p", str(port)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        args = ["-m", "14"] if mode == "pp" else ["-m", "64000"]
        r = subprocess.run(pre + ["sockperf", mode, "--tcp", "-i", "127.0.0.1", "-p", str(port),
                                  "-t", "2", "--mps", "10000000"] + args,
                           capture_output=True, text=True, env=env, timeout=60)
        out = r.stdout + r.stderr
        import re
        if mode == "pp":
            m = re.search(r"Summary: Latency is ([0-9.]+) usec", out)
        else:
            m = re.search(r"Summary: BandWidth is ([0-9.]+) MBps", out)
        if not m:
            raise SystemExit("sockperf: " + out[-500:])
        v = float(m.group(1))
    finally:
        srv.kill()
        srv.wait()
    if accel and stats(rundir)["conns_accelerated"] < 2:
        raise SystemExit("sockperf: not accelerated")
    shutil.rmtree(rundir, ignore_errors=True)
    return v


rows = [
    ("connect + 64 B exchange + close (connections/s)", lambda a: sock("conn", 64, a, "ops_per_s"), False),
    ("request/response 100 B, ipc-bench style (messages/s)", lambda a: sock("rr", 100, a, "ops_per_s"), False),
    ("stream 64 KiB writes (GB/s)", lambda a: sock("stream", 65536, a, "gbytes_per_s"), False),
    ("redis-benchmark SET -c 50 -d 1024 (requests/s)", lambda a: redis("set", a), False),
    ("redis-benchmark GET -c 50 -d 1024 (requests/s)", lambda a: redis("get", a), False),
    ("nginx 2 workers + wrk -t2 -c100, small file, keepalive (requests/s)", nginx, False),
    ("iperf3 -t 2 (Gbit/s)", iperf3, False),
    ("sockperf pp --tcp -m 14 (latency µs; lower is better)", lambda a: sockperf("pp", a), True),
    ("sockperf tp --tcp -m 64000 (MB/s)", lambda a: sockperf("tp", a), False),
]
print("| workload (unmodified programs) | kernel TCP | shortcut run | ratio | spread of ratios |")
print("|---|---|---|---|---|")
for title, fn, lower in rows:
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
    print(f"| {title} | {mt:.4g} | {ms:.4g} | {ms / mt:.3g}x | {ratios[0]:.3g}–{ratios[-1]:.3g}x |")
print(f"\nEach workload ran {reps} times plainly and under `shortcut run`, alternating; medians; "
      "every accelerated run was checked through `shortcut stats` to have used shared memory.")
