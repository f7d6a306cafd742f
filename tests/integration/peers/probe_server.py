# SPDX-License-Identifier: MIT
"""Server side of the socket-semantics probes (see probe_client.py). Prints
its port, serves one connection, prints {"events": [...]} where each event is
the outcome of one call, so a plain run and an accelerated run compare.
Steps wait for events (FIONREAD reaching a count, the client's bytes), not
for fixed times; GUARD seconds is a hang guard."""
import argparse
import array
import fcntl
import os
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
a = p.parse_args()


GUARD = 10.0


def fionread(s):
    buf = array.array("i", [-1])
    fcntl.ioctl(s.fileno(), termios.FIONREAD, buf, True)
    return buf[0]


def wait_fionread(s, n):
    """Until n bytes are readable."""
    end = time.monotonic() + GUARD
    while fionread(s) < n:
        if time.monotonic() > end:
            sys.exit("probe_server: %d of %d bytes arrived in %gs" % (fionread(s), n, GUARD))
        time.sleep(0.001)


ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.bind((a.host, 0))
ls.listen(8)
print(ls.getsockname()[1], flush=True)
c, _ = ls.accept()
ev = []

if a.scenario == "eof":
    # say goodbye and close at once: the client sees data, then EOF, then
    # finds out what writing to a closed peer does
    c.sendall(b"bye")
    c.close()
    ev.append("closed")
elif a.scenario == "reset":
    # the client's bytes arrive and are never read: close() must reset
    ev.append(outcome(lambda: recv_exact(c, 1)))   # the client's "go"
    wait_fionread(c, 100)                           # its 100 bytes arrive meanwhile
    ev.append("unread:%d" % fionread(c))
    c.close()
    ev.append("closed")
elif a.scenario == "fionread":
    ev.append("empty:%d" % fionread(c))             # the client waits for our word
    c.sendall(b"w")                                 # the word (not counted below)
    wait_fionread(c, 1000)                          # the client sent 100+400+500 bytes
    ev.append("fionread:%d" % fionread(c))
    d = recv_exact(c, 300)
    ev.append("after300:%d" % fionread(c))
    d += recv_exact(c, 700)
    ev.append("got:%d" % len(d))
    ev.append("drained:%d" % fionread(c))
    c.sendall(b"y" * 1000)
    ev.append(outcome(lambda: recv_exact(c, 1)))    # client's done byte
    c.close()
elif a.scenario == "idle":
    # the client's first bytes must arrive while it sleeps (no library call
    # on its side to push them: it waits for the file we make once they are
    # here, or GUARD + 5 s)
    c.settimeout(GUARD)
    ev.append(outcome(lambda: c.recv(10)))
    c.settimeout(None)
    flag = os.path.join(tempfile.gettempdir(), "probe-idle-%d" % ls.getsockname()[1])
    open(flag, "w").close()
    c.sendall(b"h")
    ev.append(outcome(lambda: c.recv(10)))
    c.close()
    os.unlink(flag)
elif a.scenario == "sendclose":
    # the client sent and closed at once: every byte, then EOF
    time.sleep(0.3)
    try:
        d = recv_exact(c, 1 << 20)
        ev.append("got:%d:%s" % (len(d), d == bytes(range(256)) * 20))
    except OSError as e:
        ev.append(type(e).__name__)
    ev.append(outcome(lambda: c.recv(10)))
    c.close()
elif a.scenario == "peek":
    c.sendall(b"hello")
    ev.append(outcome(lambda: recv_exact(c, 1)))    # client's ack "A"
    time.sleep(0.3)
    c.sendall(b"wor")
    time.sleep(0.1)
    c.sendall(b"ld")
    ev.append(outcome(lambda: recv_exact(c, 1)))    # client's ack "B"
    time.sleep(0.1)
    c.sendall(b"12345")
    time.sleep(0.1)
    c.close()
ls.close()
report({"events": ev})
