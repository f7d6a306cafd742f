# SPDX-License-Identifier: MIT
"""Integrity soak (issue 15): random-size messages in both directions across
many connections, every byte checked end to end, while the kill switch
flips live connections back to TCP mid-stream and the rings wrap many
times.  0 bytes lost, duplicated, reordered or corrupted.

Both ends under `shortcut run`: an echo server, and a client whose
connections each send a stream of pseudo-random bytes (its own seed) in
chunks of random size, from 1 byte to 256 KiB, and check the echo against
the same stream.  In each phase the client opens its connections, moves
half of each stream, and waits; the test turns the kill switch on
(`shortcut off` returns once every live connection is on TCP) or leaves it
off, and the rest goes.  Phases alternate: accelerated connections
switched to TCP mid-stream, then connections made while off (TCP), then
accelerated again.

make test: INTEGRITY_BYTES=3e8 in all (about 5 s).  make soak runs it with
INTEGRITY_BYTES=1e10."""
import os
import subprocess
import sys
import tempfile
import threading

from helpers import SHORTCUT, echo_server, stats

TOTAL = int(float(os.environ.get("INTEGRITY_BYTES", "3e8")))
CONNS = 8
PHASES = 4

SERVER = echo_server(backlog=64, chunk=1 << 18)

# argv: port, connections, bytes per connection per phase, phases.  Each
# phase starts on a line on stdin; prints "half P" once every connection of
# phase P moved half its stream, then waits for a line on stdin; "done P
# bytes errors" at the end of the phase.
CLIENT = r"""
import random, socket, sys, threading
port, nconn, per, phases = (int(a) for a in sys.argv[1:5])
def stream(seed):
    r = random.Random(seed)
    while True:
        n = r.choice((r.randint(1, 64), r.randint(1, 4096), r.randint(1, 1 << 18)))
        yield r.randbytes(n)
errors = []
for phase in range(phases):
    sys.stdin.readline()        # the test has set the switch for this phase
    half = threading.Barrier(nconn + 1)
    go = threading.Event()
    moved = [0] * nconn
    def conn(k):
        s = socket.create_connection(("127.0.0.1", port))
        seed = phase * 1000 + k
        out, want = stream(seed), stream(seed)
        pending = b""
        sent = got = 0
        halfway = False
        def reader():
            nonlocal got, pending
            bad = False
            while got < per:
                b = s.recv(1 << 18)
                if not b:
                    errors.append("conn %d: EOF at %d of %d" % (k, got, per))
                    return
                if bad:                 # (drained, so the writer never blocks)
                    got += len(b)
                    continue
                while b:
                    if not pending:
                        pending = next(want)
                    m = min(len(b), len(pending))
                    if b[:m] != pending[:m]:
                        errors.append("conn %d: bytes differ at %d" % (k, got))
                        bad = True
                        got += len(b)
                        break
                    b, pending, got = b[m:], pending[m:], got + m
        t = threading.Thread(target=reader)
        t.start()
        while sent < per:
            if not halfway and sent >= per // 2:
                halfway = True
                half.wait()
                go.wait()
            chunk = next(out)[:per - sent]
            s.sendall(chunk)
            sent += len(chunk)
        if not halfway:
            half.wait()
        t.join()
        moved[k] = got
        s.close()
    ts = [threading.Thread(target=conn, args=(k,)) for k in range(nconn)]
    for t in ts:
        t.start()
    half.wait()
    print("half", phase, flush=True)
    sys.stdin.readline()
    go.set()
    for t in ts:
        t.join()
    print("done", phase, sum(moved), len(errors), flush=True)
for e in errors[:5]:
    print("error", e, flush=True)
sys.exit(1 if errors else 0)
"""


def run(env, *args):
    r = subprocess.run([SHORTCUT, *args], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_integrity_under_kill_switch_flips():
    per = max(TOTAL // (CONNS * PHASES), 1 << 20)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as rd:
        env = dict(os.environ, SHORTCUT_RUNDIR=rd)
        srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER], env=env,
                               stdout=subprocess.PIPE, text=True)
        try:
            port = srv.stdout.readline().strip()
            cli = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, port,
                                    str(CONNS), str(per), str(PHASES)], env=env,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            # a hang guard only (a failure detector, not a deadline the
            # test relies on): the client is killed, the readline ends
            guard = threading.Timer(600, cli.kill)
            guard.start()
            total = 0
            off = False
            for phase in range(PHASES):
                cli.stdin.write("start\n")
                cli.stdin.flush()
                line = cli.stdout.readline().split()
                assert line[:2] == ["half", str(phase)], line
                # phase 0 and 2: accelerated connections go back to TCP
                # mid-stream; phase 1: made while off; phase 3: on again
                if phase in (0, 2):
                    assert "every connection is on TCP" in run(env, "off")
                    off = True
                cli.stdin.write("go\n")
                cli.stdin.flush()
                line = cli.stdout.readline().split()
                assert line[:2] == ["done", str(phase)], line
                assert int(line[3]) == 0, "errors in phase %d: %s" % (phase, cli.stdout.read())
                assert int(line[2]) == CONNS * per, line
                total += int(line[2])
                if off and phase in (1, 2):
                    run(env, "on")
                    off = False
            assert cli.wait(timeout=120) == 0
            guard.cancel()
            st = stats(env)
            print("\nintegrity: %d bytes each way over %d connections in %d phases, 0 errors; "
                  "%d connections on shared memory, %d switched to TCP mid-stream, "
                  "%d bytes on shared memory, %d on TCP" % (
                      total, CONNS * PHASES, PHASES, st["conns_accelerated"],
                      st["conns_switched_to_tcp"], st["bytes_shm_sent"],
                      st["bytes_tcp_sent"]))
            # both ends of phases 0, 2 and 3 accelerated; 0 and 2 switched
            assert st["conns_accelerated"] >= 2 * CONNS * 3, st
            assert st["conns_switched_to_tcp"] >= 2 * CONNS * 2, st
            assert st["bytes_shm_sent"] > 0 and st["bytes_tcp_sent"] > 0, st
        finally:
            srv.kill()
            srv.wait()
