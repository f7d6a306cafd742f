# SPDX-License-Identifier: MIT
"""Client side of the socket-semantics probes. Prints {"events": [...]}: the
outcome of every call in order ("data:..", "eof", "ok:N" or the exception's
class name), so a plain run and an accelerated run compare call for call.

  eof       data then EOF from a peer that closed; then send twice
  reset     send bytes the server never reads, it closes: send/recv after
  fionread  send 100+400+500 bytes; FIONREAD on the reply
  peek      MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT
  idle      send one byte, then no socket call for 1 s: it must arrive
  sendclose send 5120 bytes and close() at once: all must arrive

Each step waits for the event it needs (poll for the peer's reset, FIONREAD
reaching a count, the server's go byte, a file the server makes when the
idle client's byte has arrived), not for a fixed time; a wait that takes
longer than GUARD seconds fails loudly (a hang guard, not a deadline).
"""
import argparse
import array
import fcntl
import os
import select
import socket
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import outcome, recv_exact, report  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("scenario", choices=["eof", "reset", "fionread", "peek", "idle", "sendclose"])
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
a = p.parse_args()


GUARD = 10.0


def fionread(s):
    buf = array.array("i", [-1])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, buf, True)
    return buf[0]


def wait_reset(s):
    """Until the peer's reset has arrived (poll reports POLLERR/POLLHUP)."""
    p = select.poll()
    p.register(s.fileno(), select.POLLERR | select.POLLHUP)
    if not p.poll(GUARD * 1000):
        sys.exit("probe_client: no reset from the peer in %gs" % GUARD)


def wait_fionread(s, n):
    """Until n bytes are readable."""
    end = time.monotonic() + GUARD
    while fionread(s) < n:
        if time.monotonic() > end:
            sys.exit("probe_client: %d of %d bytes arrived in %gs" % (fionread(s), n, GUARD))
        time.sleep(0.001)


s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect((a.host, a.port))
ev = []
if a.scenario == "eof":
    time.sleep(0.3)                        # "bye" and the close have happened
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.send(b"x" * 10)))   # peer closed: still accepted
    wait_reset(s)                                    # ... and answered with a reset
    ev.append(outcome(lambda: s.send(b"x" * 10)))
    ev.append(outcome(lambda: s.send(b"x" * 10)))
    ev.append(outcome(lambda: s.recv(100)))
elif a.scenario == "reset":
    s.sendall(b"g")
    s.sendall(b"u" * 100)                  # never read by the server
    wait_reset(s)                          # server closed with unread data
    ev.append(outcome(lambda: s.send(b"x" * 1000)))
    ev.append(outcome(lambda: s.send(b"x" * 1000)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(100)))
elif a.scenario == "fionread":
    recv_exact(s, 1)                       # the server looked at an empty socket
    ev.append("empty:%d" % fionread(s))    # (its reply comes after our 1000)
    for n in (100, 400, 500):
        s.sendall(b"x" * n)
    d = recv_exact(s, 1)                   # the reply starts
    wait_fionread(s, 1000 - len(d))        # ... and all of it arrives
    ev.append("fionread:%d" % (fionread(s) + len(d)))
    ev.append("got:%d" % len(d + recv_exact(s, 999)))
    ev.append("drained:%d" % fionread(s))
    s.sendall(b"d")
elif a.scenario == "idle":
    s.sendall(b"g")
    # no call into the library until the server has the byte (it makes a
    # file then; stat() and sleeps are no socket calls), or GUARD + 5 s
    flag = os.path.join(tempfile.gettempdir(), "probe-idle-%d" % a.port)
    end = time.monotonic() + GUARD + 5
    while not os.path.exists(flag) and time.monotonic() < end:
        time.sleep(0.01)
    ev.append(outcome(lambda: s.recv(10)))
    s.shutdown(socket.SHUT_WR)
    ev.append(outcome(lambda: s.recv(10)))
elif a.scenario == "sendclose":
    s.sendall(bytes(range(256)) * 20)        # then close() at once
elif a.scenario == "peek":
    P, W, D = socket.MSG_PEEK, socket.MSG_WAITALL, socket.MSG_DONTWAIT
    time.sleep(0.2)                         # "hello" is there
    ev.append(outcome(lambda: s.recv(100, P)))
    ev.append(outcome(lambda: s.recv(100, P)))
    ev.append(outcome(lambda: s.recv(2, P)))
    ev.append(outcome(lambda: s.recv(3)))
    ev.append(outcome(lambda: s.recv(100, P)))
    ev.append("fionread:%d" % fionread(s))
    ev.append(outcome(lambda: s.recv(2)))    # "lo"
    ev.append(outcome(lambda: s.recv(10, D)))  # nothing yet: the server waits for "A"
    s.sendall(b"A")                          # server sends "wor" in 0.3 s, "ld" 0.1 s later
    ev.append(outcome(lambda: s.recv(5, W)))   # waits for both "wor" and "ld"
    s.sendall(b"B")                          # server sends "12345" and closes
    ev.append(outcome(lambda: s.recv(100, W)))  # returns at EOF with what there is
    ev.append(outcome(lambda: s.recv(100, P)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(10, D)))
s.close()
report({"events": ev})
