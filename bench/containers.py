#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Containers (issue 22): what shortcut gives between two containers of one
host, and the figures of every scenario of test_containers.py.

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

  bench/containers.py scenarios [--runs N] [--out FILE]
      Runs `python3 -m pytest -q -s tests/integration/test_containers.py`
      N times in a row (default 1), gathers each test's verdict (JUnit XML)
      and the figures it prints (`SCENARIO NAME: shm N/M, notice X ms`:
      connection ends on shared memory of all ends, the time a killed
      peer took to be noticed), and writes a Markdown table to FILE
      (default bench/results/containers.md) with the machine and the date.
      Each run's output stays in build/containers/scenarios/ (--render:
      the table of those again, nothing run).  Exit 1 if a test failed in
      any run.
"""
import argparse
import datetime
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
import xml.etree.ElementTree as ET

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
        proof = check_shm(run_stats(rundir)) if accel else None
        return rates, proof
    finally:
        b.close()
        shutil.rmtree(rundir, ignore_errors=True)


def run_stats(rundir):
    """`shortcut stats --json` of a run directory (tests/integration's
    helper: on sys.path once the engine is loaded)."""
    from helpers import stats
    return stats(rundir)


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
        proof = check_shm(run_stats(rundir)) if accel else None
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


# ---- scenarios: test_containers.py's verdicts and figures -------------------

# what each test is, in the words (the table's first column)
SCENARIOS = {
    "test_four_client_containers_one_server": "4 client containers at once, one server container",
    "test_pod_app_and_sidecar_call_each_other": "pod style, app and sidecar call each other at "
    "once, both directions, 5 rounds",
    "test_pod_style_many_rounds": "pod style both directions, no engine (`unshare`), 1,000 rounds",
    "test_server_killed_at_each_setup_stage": "kill -9 of the server container at a set-up stage",
    "test_same_source_port_two_netns_never_mispaired": "same source port from two network "
    "namespaces at once, 1,000 rounds",
    "test_tools_across_pid_namespaces": "`stat`, `stats`, `off --wait` about two containers",
    "test_two_uids": "two uids (containers `--user`), with or without their group",
    "test_redis_benchmark_two_containers": "redis-benchmark from two containers at once",
    "test_doctor_says_rundir_not_shared": "`shortcut doctor` in a container",
    "test_cdi_device_two_containers": "CDI device, two containers",
    "test_make_install_cdi": "`make install-cdi`",
    "test_pod_example_kube_play": "docs/containers.md's pod, `podman kube play`",
}
LINE = re.compile(r"^SCENARIO (\S+): shm (\S+), notice (\S+)(?: ms)?(?:; (.*))?$")


def conntrack_drops():
    """Packets the host's connection tracking dropped since boot because
    its table was full (/proc/net/stat/nf_conntrack "drop", every CPU's);
    None where there is no such file.  A new connection's SYN dropped so
    makes its connect wait for the retransmissions (1, 3, 7, 15, 31 s).
    The table is shared with everything else the machine runs, and a
    container's bridged traffic is tracked in it wherever br_netfilter is
    loaded (dockerd loads it)."""
    try:
        with open("/proc/net/stat/nf_conntrack") as f:
            head, *rows = f.read().split("\n")
    except OSError:
        return None
    col = head.split().index("drop")
    return sum(int(r.split()[col], 16) for r in rows if r.strip())


def merge_notes(notes):
    """The notes of several runs in one: those that differ only in their
    numbers as one, each number a range."""
    groups = {}
    for n in notes:
        groups.setdefault(re.sub(r"\d+", "#", n), []).append(
            [int(x) for x in re.findall(r"\d+", n)])
    parts = []
    for key, nums in groups.items():
        cols = iter(list(zip(*nums)))

        def num(_):
            vals = next(cols)
            return str(min(vals)) if min(vals) == max(vals) else "%d–%d" % (min(vals), max(vals))
        parts.append(re.sub("#", num, key) + (" (%d×)" % len(nums) if len(groups) > 1 else ""))
    return "; ".join(parts)


def merge_shm(shms):
    """"N/M" of several runs: "N/M", "N1–N2/M", or each with its count."""
    if len(set(shms)) == 1:
        return shms[0]
    if len({s.split("/")[1] for s in shms}) == 1:
        n = [int(s.split("/")[0]) for s in shms]
        return "%d–%d/%s" % (min(n), max(n), shms[0].split("/")[1])
    return ", ".join("%s (%d×)" % (s, shms.count(s)) for s in sorted(set(shms)))


def one_run(i, logdir):
    """pytest once, into logdir's runI.log (its output), runI.xml (JUnit)
    and runI.json (seconds, the kernel's conntrack-full count)."""
    xml = os.path.join(logdir, "run%d.xml" % i)
    log = os.path.join(logdir, "run%d.log" % i)
    drops0 = conntrack_drops()
    t0 = time.monotonic()
    with open(log, "w") as f:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        "tests/integration/test_containers.py", "--junitxml", xml],
                       cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    with open(os.path.join(logdir, "run%d.json" % i), "w") as f:
        drops1 = conntrack_drops()
        json.dump({"took": time.monotonic() - t0,
                   "drops": drops1 - drops0 if drops0 is not None else None}, f)


def read_run(i, logdir):
    """What one_run left: {test name: {"verdict", "why", "shm", "notice",
    "note"}}, the test order, seconds, the log, the conntrack-full count."""
    xml = os.path.join(logdir, "run%d.xml" % i)
    log = os.path.join(logdir, "run%d.log" % i)
    try:
        with open(os.path.join(logdir, "run%d.json" % i)) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit("run %d: not run (%s)" % (i, e))
    res = {}
    order = []
    try:
        tree = ET.parse(xml)
    except (OSError, ET.ParseError) as e:
        raise SystemExit("run %d: no JUnit XML (%s): see %s" % (i, e, log))
    for tc in tree.iter("testcase"):
        name = tc.get("name")
        verdict, why = "pass", ""
        for kind in ("failure", "error", "skipped"):
            el = tc.find(kind)
            if el is not None:
                verdict = {"failure": "FAIL", "error": "ERROR", "skipped": "skip"}[kind]
                why = (el.get("message") or el.text or "").strip()
                break
        res[name] = {"verdict": verdict, "why": why}
        order.append(name)
    with open(log) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m and m.group(1) in res:
                res[m.group(1)].update(shm=m.group(2), notice=m.group(3), note=m.group(4) or "")
    return res, order, meta["took"], log, meta["drops"]


def cmd_scenarios(a):
    logdir = os.path.join(ROOT, "build", "containers", "scenarios")
    os.makedirs(logdir, exist_ok=True)
    session = os.path.join(logdir, "session.json")
    if not a.render:
        for f in os.listdir(logdir):
            os.unlink(os.path.join(logdir, f))
        meta = {"start": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                "load0": loadavg(), "runs": a.runs}
        for i in range(1, a.runs + 1):
            sys.stderr.write("scenarios: run %d of %d\n" % (i, a.runs))
            one_run(i, logdir)
        meta["load1"] = loadavg()
        with open(session, "w") as f:
            json.dump(meta, f)
    try:
        with open(session) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit("no runs to render in %s (%s)" % (logdir, e))
    runs, order, took, summary = [], None, [], []
    for i in range(1, meta["runs"] + 1):
        res, o, t, log, drops = read_run(i, logdir)
        runs.append(res)
        took.append(t)
        order = order or o
        bad = [n for n, r in res.items() if r["verdict"] in ("FAIL", "ERROR")]
        line = "run %d: %d tests in %.0f s, %s" % (
            i, len(res), t, "failed: " + ", ".join("`%s`" % n for n in bad) if bad else
            "none failed")
        if drops:
            line += "; the host's connection tracking table was full during it: %d packets " \
                "dropped (/proc/net/stat/nf_conntrack), new connections' SYNs among them" % drops
        summary.append(line)
        sys.stderr.write("scenarios: %s (%s)\n" % (line, os.path.relpath(log, ROOT)))
    N = len(runs)
    out = []
    w = out.append
    eng = [v for v in (tool_version(["podman", "--version"]),
                       tool_version(["/usr/bin/docker", "--version"])) if v]
    w("# Containers (issue 22): every scenario of test_containers.py\n")
    w("%s; %s; %s. `python3 -m pytest -q -s tests/integration/test_containers.py`, %d run%s in a "
      "row (%s s); load average %s before, %s after (the machine was shared with other work)."
      "\n" % (meta["start"], machine(), ", ".join(eng) or "no engine", N,
              "s" if N > 1 else "", ", ".join("%.0f" % t for t in took), meta["load0"],
              meta["load1"]))
    w("Correct: the test's verdict (every byte checked by the programs, each scenario's "
      "assertions)%s. Connection ends on shared memory / all connection ends: `shortcut stats "
      "--json` of the test's run directory at its end (both ends of a connection counted where "
      "both have the library; a connection switched back to TCP later still counts as on shared "
      "memory). Time to notice: from the kill -9 to the client's EOF or ECONNRESET (its "
      "`CLOCK_MONOTONIC`)%s. Made by `bench/containers.py scenarios%s`.\n" % (
          ", in each run" if N > 1 else "",
          ", median and range over the runs" if N > 1 else "",
          " --runs %d" % N if N > 1 else ""))
    w("| scenario | variant | correct? | connection ends on shared memory / all | time to notice "
      "a killed peer | notes |")
    w("|---|---|---|---|---|---|")
    failures = []
    for name in order:
        base, _, param = name.partition("[")
        param = param.rstrip("]")
        rs = [r[name] for r in runs if name in r]
        passed = sum(r["verdict"] == "pass" for r in rs)
        skipped = [r for r in rs if r["verdict"] == "skip"]
        if skipped and len(skipped) == len(rs):
            correct = "skipped: " + skipped[0]["why"][:120]
        elif passed == len(rs):
            correct = "yes" + (" (%d/%d)" % (passed, N) if N > 1 else "")
        else:
            correct = "**no** (%d/%d passed)" % (passed, len(rs))
        for k, r in enumerate(runs, 1):
            if name in r and r[name]["verdict"] in ("FAIL", "ERROR"):
                failures.append((k, name, r[name]["why"]))
        shms = [r["shm"] for r in rs if "shm" in r and r["shm"] != "n/a"]
        shm = merge_shm(shms) if shms else "—"
        ns = [float(r["notice"]) for r in rs if r.get("notice", "n/a") != "n/a"]
        if not ns:
            notice = "—"
        elif len(ns) == 1:
            notice = "%.0f ms" % ns[0]
        elif round(min(ns)) == round(max(ns)):
            notice = "%.0f ms" % ns[0]
        else:
            notice = "%.0f ms (%.0f–%.0f)" % (statistics.median(ns), min(ns), max(ns))
        note = merge_notes([r["note"] for r in rs if r.get("note")])
        w("| %s | %s | %s | %s | %s | %s |" % (SCENARIOS.get(base, base), param or "", correct,
                                               shm, notice, note.replace("|", "\\|")))
    if N > 1 or failures:
        w("\nRuns:\n")
        for line in summary:
            w("- " + line)
    if failures:
        w("\nFailures:\n")
        for k, name, why in failures:
            w("- run %d, `%s`: %s" % (k, name, " ".join(why.split())[:600]))
    text = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("redis", help="redis-benchmark between two containers and two processes")
    r.add_argument("reps", type=int)
    r.add_argument("--quick", action="store_true", help="-n 30000 instead of 100000")
    r.add_argument("--json", help="store the samples in this JSON file (key 'containers')")
    s = sub.add_parser("scenarios", help="test_containers.py's verdicts and figures, a table")
    s.add_argument("--runs", type=int, default=1)
    s.add_argument("--render", action="store_true",
                   help="run nothing: the table of the runs left in build/containers/scenarios/")
    s.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "containers.md"))
    a = ap.parse_args()
    if a.cmd == "redis":
        if a.reps < 1:
            ap.error("REPS must be >= 1")
        return cmd_redis(a)
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    return cmd_scenarios(a)


if __name__ == "__main__":
    sys.exit(main())
