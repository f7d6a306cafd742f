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
"""
import argparse
import array
import fcntl
import os
import socket
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import outcome, recv_exact, report  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("scenario", choices=["eof", "reset", "fionread", "peek", "idle", "sendclose"])
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
a = p.parse_args()


def fionread(s):
    buf = array.array("i", [-1])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, buf, True)
    return buf[0]


s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect((a.host, a.port))
ev = []
if a.scenario == "eof":
    time.sleep(0.3)                        # "bye" and the close have happened
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.send(b"x" * 10)))   # peer closed: still accepted
    time.sleep(0.3)                                  # ... and answered with a reset
    ev.append(outcome(lambda: s.send(b"x" * 10)))
    ev.append(outcome(lambda: s.send(b"x" * 10)))
    ev.append(outcome(lambda: s.recv(100)))
elif a.scenario == "reset":
    s.sendall(b"g")
    s.sendall(b"u" * 100)                  # never read by the server
    time.sleep(0.8)                        # server closed with unread data
    ev.append(outcome(lambda: s.send(b"x" * 1000)))
    ev.append(outcome(lambda: s.send(b"x" * 1000)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(100)))
elif a.scenario == "fionread":
    time.sleep(0.3)                        # the server looks at an empty socket
    for n in (100, 400, 500):
        s.sendall(b"x" * n)
    time.sleep(0.1)
    ev.append("empty:%d" % fionread(s))
    d = recv_exact(s, 1)                   # the reply starts
    time.sleep(0.5)                        # ... and all of it arrives
    ev.append("fionread:%d" % (fionread(s) + len(d)))
    ev.append("got:%d" % len(d + recv_exact(s, 999)))
    ev.append("drained:%d" % fionread(s))
    s.sendall(b"d")
elif a.scenario == "idle":
    s.sendall(b"g")
    time.sleep(1.0)                          # no call into the library meanwhile
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
    s.sendall(b"A")                          # server sends "wor" in 0.3 s, "ld" 0.1 s later
    ev.append(outcome(lambda: s.recv(2)))    # "lo"
    ev.append(outcome(lambda: s.recv(10, D)))  # nothing yet
    ev.append(outcome(lambda: s.recv(5, W)))   # waits for both "wor" and "ld"
    s.sendall(b"B")                          # server sends "12345" and closes
    ev.append(outcome(lambda: s.recv(100, W)))  # returns at EOF with what there is
    ev.append(outcome(lambda: s.recv(100, P)))
    ev.append(outcome(lambda: s.recv(100)))
    ev.append(outcome(lambda: s.recv(10, D)))
s.close()
report({"events": ev})
