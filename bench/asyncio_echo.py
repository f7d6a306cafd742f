#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""asyncio echo, server and client in separate processes (issue 4).

A plain asyncio echo server (protocols, the default event loop, no uvloop)
and a client with CONNS concurrent connections, each doing
request/response of SIZE bytes for SECONDS; the figure is messages/s (one
message = one request echoed back).  Measured plainly and with both
processes under `shortcut run`, alternating, REPS times; every accelerated
run is checked through `shortcut stats`.

  bench/asyncio_echo.py BUILD_DIR REPS [--seconds S] [--conns C] [--size N] [--style X]
      the comparison: one JSON object per run on stderr, a summary on stdout
  bench/asyncio_echo.py server [--style X]
      listen on 127.0.0.1, an ephemeral port, printed on stdout
  bench/asyncio_echo.py client PORT [--seconds S] [--conns C] [--size N] [--style X]
      one JSON line: {"style", "conns", "size", "seconds", "messages", "messages_per_s"}

--style buffered (default): asyncio.BufferedProtocol on both sides (recv_into
a buffer of the protocol's, the fastest plain asyncio style); --style
protocol: asyncio.Protocol.data_received.

bench/readiness.py imports run_once() from here.
"""
import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)
# buffered: asyncio.BufferedProtocol (recv_into a buffer of the protocol's);
# protocol: asyncio.Protocol.data_received (asyncio allocates a 256 KiB bytes
# object per recv: glibc serves it with mmap + mremap + munmap, three system
# calls per message that no transport removes)
STYLES = ("buffered", "protocol")


# ---- server ----

class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


class BufEcho(asyncio.BufferedProtocol):
    """The same with a receive buffer of its own (recv_into): asyncio's
    Protocol allocates a 256 KiB bytes object per recv."""

    def connection_made(self, transport):
        self.transport = transport
        self.buf = memoryview(bytearray(65536))

    def get_buffer(self, sizehint):
        return self.buf

    def buffer_updated(self, n):
        self.transport.write(bytes(self.buf[:n]))


async def serve(style):
    loop = asyncio.get_running_loop()
    proto = BufEcho if style == "buffered" else Echo
    srv = await loop.create_server(proto, "127.0.0.1", 0, backlog=1024)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await srv.serve_forever()


# ---- client ----

class Pinger(asyncio.Protocol):
    """One connection: send a message, wait for all of it back, repeat."""

    def __init__(self, msg, state):
        self.msg = msg
        self.size = len(msg)
        self.state = state
        self.pending = 0
        self.count = 0

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.msg)

    def data_received(self, data):
        self.pending += len(data)
        if self.pending >= self.size:
            self.pending -= self.size
            self.count += 1
            if self.state["running"]:
                self.transport.write(self.msg)

    def connection_lost(self, exc):
        if self.state["running"]:
            self.state["lost"] += 1


class BufPinger(Pinger, asyncio.BufferedProtocol):
    def connection_made(self, transport):
        self.buf = memoryview(bytearray(65536))
        super().connection_made(transport)

    def get_buffer(self, sizehint):
        return self.buf

    def buffer_updated(self, n):
        self.pending += n
        if self.pending >= self.size:
            self.pending -= self.size
            self.count += 1
            if self.state["running"]:
                self.transport.write(self.msg)


async def client(port, conns, size, seconds, style, warmup=0.3):
    loop = asyncio.get_running_loop()
    state = {"running": True, "lost": 0}
    msg = b"x" * size
    cls = BufPinger if style == "buffered" else Pinger
    pairs = await asyncio.gather(*[
        loop.create_connection(lambda: cls(msg, state), "127.0.0.1", port)
        for _ in range(conns)])
    protos = [p for _, p in pairs]
    await asyncio.sleep(warmup)
    c0, t0 = sum(p.count for p in protos), time.perf_counter()
    await asyncio.sleep(seconds)
    c1, t1 = sum(p.count for p in protos), time.perf_counter()
    state["running"] = False
    for t, _ in pairs:
        t.close()
    await asyncio.sleep(0)
    if state["lost"]:
        raise SystemExit(f"asyncio_echo client: {state['lost']} connections lost")
    idle = [i for i, p in enumerate(protos) if p.count == 0]
    if idle:
        raise SystemExit(f"asyncio_echo client: {len(idle)} connections never got an echo")
    n = c1 - c0
    return {"style": style, "conns": conns, "size": size, "seconds": round(t1 - t0, 4), "messages": n,
            "messages_per_s": n / (t1 - t0)}


# ---- one measurement: a server process and a client process ----

def stats(shortcut, rundir):
    r = subprocess.run([shortcut, "stats", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, SHORTCUT_RUNDIR=rundir), timeout=30)
    return json.loads(r.stdout)


def run_once(build, accel, seconds=2.0, conns=50, size=100, style="buffered", extra_env=None):
    """messages/s of one run; with accel, both processes under `shortcut run`
    and the run checked to have put all its connections on shared memory."""
    shortcut = os.path.join(build, "shortcut")
    rundir = tempfile.mkdtemp(prefix="sc-bench-")
    env = dict(os.environ, SHORTCUT_RUNDIR=rundir, PYTHONDONTWRITEBYTECODE="1")
    env.update(extra_env or {})
    pre = [shortcut, "run"] if accel else []
    srv = subprocess.Popen(pre + [sys.executable, HERE, "server", "--style", style], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        if not line.strip().isdigit():
            srv.kill()
            raise SystemExit(f"asyncio_echo server did not start: {line!r} {srv.stderr.read()}")
        port = int(line)
        cmd = pre + [sys.executable, HERE, "client", str(port), "--seconds", str(seconds),
                     "--conns", str(conns), "--size", str(size), "--style", style]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=seconds + 60)
        if r.returncode:
            raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-2000:]}")
        res = json.loads(r.stdout)
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    if accel:
        st = stats(shortcut, rundir)
        # both ends of every connection count
        if st["conns_accelerated"] < 2 * conns or st["conns_fallback"]:
            raise SystemExit(f"asyncio_echo: not accelerated ({st['conns_accelerated']} of "
                             f"{2 * conns} connection ends; fallback {st['fallback']})")
        res["conns_accelerated"] = st["conns_accelerated"]
    shutil.rmtree(rundir, ignore_errors=True)
    res["accel"] = accel
    return res


def compare(build, reps, seconds=2.0, conns=50, size=100, style="buffered"):
    tcp, shm = [], []
    for _ in range(reps):
        a = run_once(build, False, seconds, conns, size, style)
        b = run_once(build, True, seconds, conns, size, style)
        print(json.dumps(a), file=sys.stderr)
        print(json.dumps(b), file=sys.stderr)
        tcp.append(a["messages_per_s"])
        shm.append(b["messages_per_s"])
    ratios = sorted(s / t for s, t in zip(shm, tcp))
    return {"tcp": statistics.median(tcp), "shortcut": statistics.median(shm),
            "ratio": statistics.median(shm) / statistics.median(tcp),
            "ratio_min": ratios[0], "ratio_max": ratios[-1], "tcp_runs": tcp, "shortcut_runs": shm}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "server":
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("--style", choices=STYLES, default="buffered")
        asyncio.run(serve(ap.parse_args().style))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("port", type=int)
        ap.add_argument("--seconds", type=float, default=2.0)
        ap.add_argument("--conns", type=int, default=50)
        ap.add_argument("--size", type=int, default=100)
        ap.add_argument("--style", choices=STYLES, default="buffered")
        a = ap.parse_args()
        print(json.dumps(asyncio.run(client(a.port, a.conns, a.size, a.seconds, a.style))))
        return
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("build")
    ap.add_argument("reps", type=int)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--style", choices=STYLES, default="buffered")
    a = ap.parse_args()
    print(json.dumps(compare(a.build, a.reps, a.seconds, a.conns, a.size, a.style)))


if __name__ == "__main__":
    main()
