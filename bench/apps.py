#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 25's applications (tests/integration/test_apps.py) side by side:
kernel TCP against `shortcut run` on every end, alternating in fresh
processes, medians; each row's speed ratio to kernel TCP.

  bench/apps.py BUILD_DIR REPS [--quick] [--json FILE] [--only ROW,...]

Rows (ids for --only): pgbouncer (pgbench -S through pgbouncer, tps), mariadb
(mariadb-slap, queries/s), grpc (unary calls/s and bidirectional stream
messages/s), ws (Node ws echo, messages/s), axum (axum + reqwest, req/s),
erlang (gen_tcp echo, messages/s), netty (Netty 4.2 native epoll echo,
messages/s), haproxy (wrk through HAProxy to nginx, req/s). The programs,
their configurations and builds are the test's (tests/integration/apps/:
appconf.py, appbuild.py). Every shortcut run is checked through `shortcut
stats --json`: its connections on shared memory, none on TCP; a run that
was not is left out of the figures and named under the table. A row whose
software is missing says so. Prints a Markdown section on stdout, progress
on stderr; with --json adds the samples to FILE under "apps". Exit 1 if a
run failed."""
import argparse
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "apps"))
import appbuild  # noqa: E402
import appconf  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("build")
ap.add_argument("reps", type=int)
ap.add_argument("--quick", action="store_true")
ap.add_argument("--json")
ap.add_argument("--only", default="")
args = ap.parse_args()
SHORTCUT = os.path.abspath(os.path.join(args.build, "shortcut"))
Q = args.quick
SECS = 1 if Q else 2                  # pgbench -T, wrk -d
MEMDIR = "/dev/shm" if os.path.isdir("/dev/shm") else None
TEMP = []                             # what the groups' set-ups made: removed at the end


class Failed(Exception):
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def listening(port):
    want = ":%04X" % port
    for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for ln in open(fn).readlines()[1:]:
                x = ln.split()
                if x[1].endswith(want) and x[3] == "0A":
                    return True
        except OSError:
            pass
    return False


def tail(path, n=400):
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return ""
    return " / ".join(ln.strip() for ln in text.strip().splitlines() if ln.strip())[-n:]


class Ctx:
    """One run of one transport ("tcp" or "shortcut"): run directory,
    scratch directory, servers; owner: the user that runs every program"""

    def __init__(self, accel, owner=None):
        self.accel = accel
        self.rundir = tempfile.mkdtemp(prefix="sc-bench-", dir=MEMDIR)
        self.tmp = tempfile.mkdtemp(prefix="sc-ba-")
        self.user = {}
        if owner:
            pw = pwd.getpwnam(owner)
            for d in (self.rundir, self.tmp):
                os.chown(d, pw.pw_uid, pw.pw_gid)
            self.user = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SHORTCUT_") and k != "LD_PRELOAD"}
        self.env["SHORTCUT_RUNDIR"] = self.rundir
        self.env["SHORTCUT_LOG"] = "2"          # the listener's registration (servers)
        self.pre = [SHORTCUT, "run"] if accel else []
        self.procs = []
        self.n = 0

    def path(self, name):
        return os.path.join(self.tmp, name)

    def server(self, cmd, port=None, ready=None, registered=True, timeout=60):
        """start cmd; port None: it prints "listening PORT". Waits until it
        listens, its listener is registered (shortcut, registered) and ready
        is in its output. Returns the port."""
        self.n += 1
        out, err = self.path(f"s{self.n}.out"), self.path(f"s{self.n}.err")
        p = subprocess.Popen(self.pre + cmd, env=self.env, stdout=open(out, "w"), stderr=open(err, "w"),
                             stdin=subprocess.DEVNULL, cwd=self.tmp, start_new_session=True, **self.user)
        p.err = err
        self.procs.append(p)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if p.poll() is not None:
                raise Failed(f"{os.path.basename(cmd[0])} exited ({p.returncode}): {tail(out)} {tail(err)}")
            if port is None:
                m = re.search(r"^listening (\d+)$", open(out).read(), re.M)
                port = int(m.group(1)) if m else None
            if port and listening(port):
                log = open(err, errors="replace").read()
                if (not self.accel or not registered or f"listening on port {port}, accelerated" in log) \
                        and (ready is None or ready in log):
                    return port
            time.sleep(0.02)
        raise Failed(f"{os.path.basename(cmd[0])} not ready after {timeout} s: {tail(err)}")

    def run(self, cmd, timeout=120, env=None):
        e = dict(self.env)
        e.pop("SHORTCUT_LOG")
        e.update(env or {})
        p = subprocess.Popen(self.pre + cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True, cwd=self.tmp, start_new_session=True,
                             **self.user)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise Failed(f"{os.path.basename(cmd[0])}: no result after {timeout} s")
        if p.returncode != 0:
            raise Failed(f"{os.path.basename(cmd[0])}: exit {p.returncode}: "
                         f"{' / '.join((out + err).strip().splitlines()[-4:])[-400:]}")
        return out + err

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        self.procs = []

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.rundir, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def finish(self, min_ends, allow=()):
        """stop the servers; a shortcut run must have had at least min_ends
        connection ends on shared memory and none on TCP (but for the
        fallback reasons in allow; short connections only with their
        server's ends, peer_not_accelerated, as many)"""
        self.stop()
        try:
            if self.accel:
                r = subprocess.run([SHORTCUT, "stats", "--json"], capture_output=True, text=True, env=self.env,
                                   timeout=30, **self.user)
                st = json.loads(r.stdout)
                fb = {k: v for k, v in st["fallback"].items() if v}
                short = fb.get("short_connections", 0)
                if st["conns_accelerated"] < min_ends or set(fb) - set(allow) or \
                        fb.get("peer_not_accelerated", 0) != short:
                    raise Failed(f"not accelerated: {st['conns_accelerated']} connection ends on shared memory "
                                 f"(expected >= {min_ends}), {st['conns_fallback']} on TCP {fb}")
        finally:
            shutil.rmtree(self.rundir, ignore_errors=True)
            shutil.rmtree(self.tmp, ignore_errors=True)


def result(out):
    for ln in out.splitlines():
        if ln.startswith("result "):
            r = dict(re.findall(r"(\w+)=(\S+)", ln))
            if r.get("ok") in ("true", "True") and r.get("errors") == "0":
                return r
    raise Failed("no good result line: " + " / ".join(out.strip().splitlines()[-3:])[-400:])


# ---- the rows: each takes a Ctx, returns {row id: figure} and the ends ------

def pg_prepare():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(re.sub(r"\D", "", d) or 0))
    bindir = next((d for d in reversed(dirs) if all(os.access(os.path.join(d, b), os.X_OK)
                                                    for b in ("initdb", "postgres", "pgbench"))), None)
    if not bindir:
        raise appbuild.Missing("not installed: postgresql (initdb, postgres, pgbench)")
    bouncer = appbuild.tool("pgbouncer", what="Debian package pgbouncer")
    owner = None
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres").pw_name
    # one cluster for every run, initialised once (pgbench -i on kernel TCP)
    d = tempfile.mkdtemp(prefix="sc-ba-pg-")
    TEMP.append(d)
    if owner:
        os.chown(d, pwd.getpwnam(owner).pw_uid, pwd.getpwnam(owner).pw_gid)
    kw = dict(user=owner) if owner else {}
    subprocess.run([os.path.join(bindir, "initdb"), "-D", d + "/data", "--auth=trust", "-U", "postgres",
                    "--no-sync"], check=True, capture_output=True, cwd=d, **kw)
    c = Ctx(False, owner)
    port = free_port()
    c.server(appconf.postgres_cmd(bindir, d + "/data", c.tmp, port), port=port,
             ready="ready to accept connections")
    c.run([os.path.join(bindir, "pgbench"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-i",
           "-s", "1", "-q", "postgres"])
    c.cleanup()
    return bindir, bouncer, owner, d


def pgbouncer(c, prep):
    bindir, bouncer, owner, d = prep
    pg_port, pb_port = free_port(), free_port()
    c.server(appconf.postgres_cmd(bindir, d + "/data", c.tmp, pg_port), port=pg_port,
             ready="ready to accept connections")
    c.server([bouncer, appconf.pgbouncer_ini(c.tmp, pb_port, pg_port)], port=pb_port)
    out = c.run([os.path.join(bindir, "pgbench"), "-h", "127.0.0.1", "-p", str(pb_port), "-U", "postgres",
                 "-S", "-T", str(SECS), "-c", "4", "-j", "2", "postgres"], env={"PGCONNECT_TIMEOUT": "10"})
    failed = re.search(r"number of failed transactions: (\d+)", out)
    tps = re.search(r"tps = ([0-9.]+)", out)
    if not (failed and tps and failed.group(1) == "0"):
        raise Failed("pgbench: " + " / ".join(out.strip().splitlines()[-4:]))
    # pgbench's 4 clients and its first; pgbouncer's pool to postgres
    return {"pgbouncer": float(tps.group(1))}, 2 * (4 + 1 + 1)


def mariadb_prepare():
    mariadbd = appbuild.tool("mariadbd", what="Debian package mariadb-server")
    inst = appbuild.tool("mariadb-install-db", what="Debian package mariadb-server")
    slap = appbuild.tool("mariadb-slap", what="Debian package mariadb-client")
    TEMP.append(tempfile.mkdtemp(prefix="sc-ba-maria-"))
    d = TEMP[-1] + "/data"
    subprocess.run([inst] + appconf.mariadb_install_args(d), check=True, capture_output=True, timeout=300)
    return mariadbd, slap, d


MARIA_QUERIES = 1000 if Q else 4000


def mariadb(c, prep):
    mariadbd, slap, d = prep
    port = free_port()
    # innodb_use_native_aio=0: with InnoDB's io_uring its connections are on TCP
    c.server([mariadbd] + appconf.mariadb_args(d, c.tmp, port, native_aio=False), port=port,
             ready="ready for connections")
    out = c.run([slap, "-h", "127.0.0.1", "-P", str(port), "-u", "root", "--concurrency=8", "--iterations=1",
                 f"--number-of-queries={MARIA_QUERIES}", "--auto-generate-sql",
                 "--auto-generate-sql-load-type=mixed", "--auto-generate-sql-add-autoincrement"])
    m = re.search(r"Average number of seconds to run all queries: ([0-9.]+) seconds", out)
    if not m:
        raise Failed("mariadb-slap: " + out[-300:])
    # 8 clients, mariadb-slap's own
    return {"mariadb": MARIA_QUERIES / max(float(m.group(1)), 1e-3)}, 2 * (8 + 1)


GRPC_CALLS, GRPC_MESSAGES = (500, 5000) if Q else (2000, 20000)


def grpc(c, prog):
    port = c.server(prog + ["server"])
    r = result(c.run(prog + ["client", str(port), str(GRPC_CALLS), str(GRPC_MESSAGES), "100"]))
    return {"grpc_unary": float(r["calls_per_s"]), "grpc_stream": float(r["msg_per_s"])}, 2


WS_MESSAGES = 5000 if Q else 20000


def ws(c, prog):
    cmd, mods = prog
    c.env["NODE_PATH"] = mods
    port = c.server(cmd + ["server"])
    r = result(c.run(cmd + ["client", str(port), "4", str(WS_MESSAGES), "0", "100"]))
    return {"ws": float(r["msg_per_s"])}, 2 * 4


AXUM_REQUESTS = 4000 if Q else 20000


def axum(c, prog):
    port = c.server(prog + ["server"])
    r = result(c.run(prog + ["client", str(port), "--conns", "8", "--requests", str(AXUM_REQUESTS), "--big", "0"]))
    return {"axum": float(r["req_per_s"])}, 2


ECHO_MESSAGES = 3000 if Q else 10000


def erlang(c, prog):
    port = c.server(prog + ["server", "4"])
    r = result(c.run(prog + ["client", str(port), "4", str(ECHO_MESSAGES), "256", "0", "100"]))
    return {"erlang": float(r["msg_per_s"])}, 2 * 4


def netty(c, prog):
    port = c.server(prog + ["server", "4"])
    r = result(c.run(prog + ["client", str(port), "4", str(ECHO_MESSAGES), "256", "0", "100"]))
    return {"netty": float(r["msg_per_s"])}, 2 * 4


def haproxy_prepare():
    haproxy = appbuild.tool("haproxy", what="Debian package haproxy")
    nginx = appbuild.tool("nginx", what="Debian package nginx")
    wrk = appbuild.tool("wrk", what="Debian package wrk")
    www = tempfile.mkdtemp(prefix="sc-ba-www-")
    TEMP.append(www)
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("<html><body>" + "shortcut " * 60 + "</body></html>\n")
    os.chmod(www, 0o755)
    return haproxy, nginx, wrk, www


# wrk closes, at its end, connections a server has not accepted yet: on
# TCP as peer_closed_first, harmless; HAProxy closes some of its
# connections to nginx after a request or two, and with the library's
# defaults it then puts its next ones there on TCP (short_connections, and
# nginx's end peer_not_accelerated: as many), as users get it
WRK_ALLOW = ("peer_closed_first", "short_connections", "peer_not_accelerated")


def haproxy(c, prep):
    hap, nginx, wrk, www = prep
    be, fe = free_port(), free_port()
    c.server([nginx, "-p", c.tmp + "/", "-e", c.tmp + "/error.log", "-c", appconf.nginx_conf(c.tmp, be, www)],
             port=be)
    # no splice: small answers, HAProxy's own forwarding (splicing large
    # bodies is test_apps.py's row)
    c.server([hap, "-db", "-f", appconf.haproxy_cfg(c.tmp, fe, be, splice=False)], port=fe)
    out = c.run([wrk, "-t2", "-c50", f"-d{SECS}s", f"http://127.0.0.1:{fe}/index.html"])
    m = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    if not m or "Socket errors" in out or "Non-2xx" in out:
        raise Failed("wrk: " + " / ".join(out.strip().splitlines()[-5:]))
    # wrk's 50 connections; HAProxy's to nginx
    return {"haproxy": float(m.group(1))}, 2 * (50 + 1), WRK_ALLOW


# id, title, unit; the group that measures it
ROWS = [
    ("pgbouncer", "pgbouncer + PostgreSQL, `pgbench -S -c 4 -j 2` through pgbouncer", "tps", "pgbouncer"),
    ("mariadb", "MariaDB (`innodb_use_native_aio=0`), `mariadb-slap` 8 clients, mixed", "queries/s", "mariadb"),
    ("grpc_unary", "Python gRPC, unary calls of 1–4096 B, one channel", "calls/s", "grpc"),
    ("grpc_stream", "Python gRPC, bidirectional stream", "msg/s", "grpc"),
    ("ws", "Node `ws` echo, 4 WebSockets, 32 in flight each", "msg/s", "ws"),
    ("axum", "axum + reqwest, 8 at once, keep-alive (GET, POST ≤ 32 KiB)", "req/s", "axum"),
    ("erlang", "Erlang `gen_tcp` echo, 4 connections, 256 B round trips", "msg/s", "erlang"),
    ("netty", "Netty 4.2 native epoll echo, 4 connections, 256 B round trips", "msg/s", "netty"),
    ("haproxy", "HAProxy (HTTP, keep-alive) + nginx, `wrk -t2 -c50`, small file", "req/s", "haproxy"),
]
GROUPS = {
    "pgbouncer": (pg_prepare, pgbouncer, "postgres"),
    "mariadb": (mariadb_prepare, mariadb, None),
    "grpc": (appbuild.grpc, grpc, None),
    "ws": (appbuild.node_ws, ws, None),
    "axum": (lambda: appbuild.rt_http(), axum, None),
    "erlang": (appbuild.erlang, erlang, None),
    "netty": (lambda: appbuild.netty("4.2.18.Final"), netty, None),
    "haproxy": (haproxy_prepare, haproxy, None),
}


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(v):
    if v is None:
        return ""
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3g}"


def main():
    only = [g for g in args.only.split(",") if g]
    groups = [g for g in GROUPS if not only or g in only]
    samples = {r[0]: {"tcp": [], "shortcut": []} for r in ROWS}
    notes, status, missing = [], 0, {}
    t0 = time.monotonic()
    for g in groups:
        prepare, fn, owner = GROUPS[g]
        try:
            prep = prepare()
        except appbuild.Missing as e:
            missing[g] = str(e)
            continue
        except (appbuild.BuildFailed, subprocess.CalledProcessError, Failed, KeyError) as e:
            notes.append(f"{g}: set-up failed: {str(e)[-400:]}")
            status = 1
            continue
        owner = owner if os.geteuid() == 0 else None
        for i in range(args.reps):
            for accel in ((False, True) if i % 2 == 0 else (True, False)):
                what = "shortcut" if accel else "tcp"
                print(f"running: apps {g} {what} {i + 1}/{args.reps}", file=sys.stderr)
                c = Ctx(accel, owner)
                try:
                    vals, ends, *allow = fn(c, prep)
                    c.finish(ends, *allow)
                except (Failed, OSError) as e:      # OSError: a program that would not start
                    c.cleanup()
                    notes.append(f"{g}, {what}, run {i + 1}: {e}")
                    status = 1
                    continue
                for k, v in vals.items():
                    samples[k][what].append(v)
    elapsed = time.monotonic() - t0
    for d in TEMP:
        shutil.rmtree(d, ignore_errors=True)

    print(f"Medians of {args.reps} runs per transport, alternating in fresh processes; both ends under "
          "`shortcut run` in its runs, every one checked to have put its connections on shared memory "
          "(none on TCP). Higher is better; ratio: shortcut's figure over kernel TCP's (lowest–highest "
          "run pair).\n")
    print("| application | kernel TCP | `shortcut run` | shortcut vs TCP (spread) |")
    print("|---|---|---|---|")
    rows = []
    for rid, title, unit, g in ROWS:
        if g not in groups:
            continue
        s = samples[rid]
        t, m = med(s["tcp"]), med(s["shortcut"])
        if g in missing:
            cells = "not installed | | "
        elif t and m:
            pairs = sorted(b / a for a, b in zip(s["tcp"], s["shortcut"]) if a)
            cells = f"{fmt(t)} | {fmt(m)} | {m / t:.2f}x ({pairs[0]:.2f}–{pairs[-1]:.2f})"
        else:
            cells = f"{fmt(t)} | {fmt(m) or '**failed**'} | "
        print(f"| {title} ({unit}) | {cells} |")
        pairs = sorted(b / a for a, b in zip(s["tcp"], s["shortcut"]) if a)
        rows.append({"id": "apps_" + rid, "title": f"{title} ({unit})", "unit": unit, "lower_is_better": False,
                     "samples": s, "median": {"tcp": t, "shortcut": m},
                     "ratio_to_tcp": (m / t) if t and m else None,
                     "ratio_to_tcp_spread": [pairs[0], pairs[-1]] if pairs else None})
    for g, why in missing.items():
        print(f"\n{g}: {why}")
    if notes:
        print("\nRuns left out:\n")
        for n in notes:
            print(f"- {n}")
    print(f"\nSizes: pgbench and wrk {SECS} s, mariadb-slap {MARIA_QUERIES} queries, gRPC {GRPC_CALLS} calls "
          f"and {GRPC_MESSAGES} stream messages, ws 4 x {WS_MESSAGES} messages, axum {AXUM_REQUESTS} requests, "
          f"Erlang and Netty 4 x {ECHO_MESSAGES} round trips; this section took {elapsed:.0f} s.")
    if args.json:
        try:
            j = json.load(open(args.json))
        except (OSError, ValueError):
            j = {}
        j["apps"] = rows
        json.dump(j, open(args.json, "w"), indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
