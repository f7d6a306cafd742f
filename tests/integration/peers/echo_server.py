# SPDX-License-Identifier: MIT
"""TCP server. Prints its port on the first stdout line, serves --clients
connections, then prints one JSON line describing each connection.

  --mode echo    echo until EOF, then close
  --mode banner  send BANNER right after accept, then echo until EOF
  --mode digest  read until EOF, answer "<bytes> <sha256>\\n", close
  --loop seq|threads|select|poll|selectors   how connections are served
  --accept-delay S   sleep S seconds between listen() and the first accept()
  --accept-after data|all   first accept() once a connection waiting to be
                     accepted has unread bytes (its client sent on TCP) / once
                     all --clients connections wait: an event, not a time
  --record FILE      write every byte received (single connection) to FILE
"""
import argparse
import hashlib
import os
import select
import selectors
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BANNER, addr, family_of, report  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--mode", choices=["echo", "banner", "digest"], default="echo")
p.add_argument("--loop", choices=["seq", "threads", "select", "poll", "selectors"],
               default="seq")
p.add_argument("--clients", type=int, default=1)
p.add_argument("--accept-delay", type=float, default=0.0)
p.add_argument("--accept-after", choices=["data", "all"])
p.add_argument("--record")
a = p.parse_args()

ls = socket.socket(family_of(a.host), socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((a.host, 0))
ls.listen(128)
print(ls.getsockname()[1], flush=True)
if a.accept_delay:
    time.sleep(a.accept_delay)


def queued(port, what):
    """Connections to port not accepted yet (the kernel lists them all the
    same, established or in CLOSE_WAIT): one has unread bytes (what ==
    "data"), or there are --clients of them ("all")."""
    n = 0
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for r in rows:
            c = r.split()
            if int(c[1].rsplit(":", 1)[1], 16) != port or c[3] not in ("01", "08"):
                continue
            n += 1
            if what == "data" and int(c[4].split(":")[1], 16) > 0:
                return True
    return what == "all" and n >= a.clients


if a.accept_after:
    end = time.monotonic() + 30                  # a hang guard, not a deadline
    while not queued(ls.getsockname()[1], a.accept_after):
        if time.monotonic() > end:
            sys.exit("server: no queued connection with %s in 30 s" % a.accept_after)
        time.sleep(0.01)

results = []
lock = threading.Lock()


errors = []


def serve_blocking(c):
    try:
        serve_one(c)
    except Exception as e:  # reported, and the exit code says so
        sys.stderr.write("server: %s: %s\n" % (type(e).__name__, e))
        with lock:
            errors.append(type(e).__name__)


def serve_one(c):
    info = {"peer": addr(c.getpeername()), "sock": addr(c.getsockname())}
    h = hashlib.sha256()
    n = 0
    rec = open(a.record, "wb") if a.record else None
    if a.mode == "banner":
        c.sendall(BANNER)
    while True:
        d = c.recv(65536)
        if not d:
            break
        n += len(d)
        h.update(d)
        if rec:
            rec.write(d)
        if a.mode != "digest":
            c.sendall(d)
    if rec:
        rec.close()
    if a.mode == "digest":
        c.sendall(b"%d %s\n" % (n, h.hexdigest().encode()))
    c.close()
    info.update(received=n, sha_received=h.hexdigest())
    with lock:
        results.append(info)


class NbConn:
    """One connection of an event-loop server: echo with an output buffer."""

    def __init__(self, c):
        c.setblocking(False)
        self.c = c
        self.out = bytearray()
        self.eof = False
        self.h = hashlib.sha256()
        self.n = 0
        self.info = {"peer": addr(c.getpeername()), "sock": addr(c.getsockname())}

    def on_read(self):
        try:
            d = self.c.recv(65536)
        except BlockingIOError:
            return
        if not d:
            self.eof = True
        else:
            self.n += len(d)
            self.h.update(d)
            self.out += d
        self.on_write()

    def on_write(self):
        while self.out:
            try:
                k = self.c.send(self.out)
            except BlockingIOError:
                return
            del self.out[:k]

    def done(self):
        return self.eof and not self.out

    def finish(self):
        self.c.close()
        self.info.update(received=self.n, sha_received=self.h.hexdigest())
        results.append(self.info)


def loop_select(kind):
    ls.setblocking(False)
    conns = []
    accepted = 0
    sel = selectors.DefaultSelector() if kind == "selectors" else None
    pl = select.poll() if kind == "poll" else None
    if sel:
        sel.register(ls, selectors.EVENT_READ, None)
    if pl:
        pl.register(ls, select.POLLIN)
    deadline = time.monotonic() + 50
    while accepted < a.clients or conns:
        if time.monotonic() > deadline:
            raise SystemExit("event loop: timed out")
        readable, writable = [], []
        if kind == "select":
            rl = [x.c for x in conns if not x.eof] + ([ls] if accepted < a.clients else [])
            wl = [x.c for x in conns if x.out]
            r, w, _ = select.select(rl, wl, [], 5)
            readable, writable = r, w
        elif kind == "poll":
            for fd, ev in pl.poll(5000):
                if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    readable.append(fd)
                if ev & select.POLLOUT:
                    writable.append(fd)
        else:
            for key, ev in sel.select(5):
                if ev & selectors.EVENT_READ:
                    readable.append(key.fileobj)
                if ev & selectors.EVENT_WRITE:
                    writable.append(key.fileobj)
        byfd = {x.c.fileno(): x for x in conns}
        for obj in readable:
            fd = obj if isinstance(obj, int) else obj.fileno()
            if fd == ls.fileno():
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                x = NbConn(c)
                conns.append(x)
                accepted += 1
                if sel:
                    sel.register(c, selectors.EVENT_READ, x)
                if pl:
                    pl.register(c, select.POLLIN)
                if accepted == a.clients:
                    if sel:
                        sel.unregister(ls)
                    if pl:
                        pl.unregister(ls)
            elif fd in byfd:
                byfd[fd].on_read()
        for obj in writable:
            fd = obj if isinstance(obj, int) else obj.fileno()
            if fd in byfd:
                byfd[fd].on_write()
        for x in list(conns):
            if x.done():
                if sel:
                    sel.unregister(x.c)
                if pl:
                    pl.unregister(x.c)
                conns.remove(x)
                x.finish()
            elif x.eof:
                # read side done: only wait for writability from now on
                if sel:
                    sel.modify(x.c, selectors.EVENT_WRITE, x)
                if pl:
                    pl.modify(x.c, select.POLLOUT)
            elif sel or pl:
                want_w = bool(x.out)
                if sel:
                    sel.modify(x.c, selectors.EVENT_READ |
                               (selectors.EVENT_WRITE if want_w else 0), x)
                if pl:
                    pl.modify(x.c, select.POLLIN | (select.POLLOUT if want_w else 0))


if a.loop == "seq":
    for _ in range(a.clients):
        c, _ = ls.accept()
        serve_blocking(c)
elif a.loop == "threads":
    ths = []
    for _ in range(a.clients):
        c, _ = ls.accept()
        t = threading.Thread(target=serve_blocking, args=(c,))
        t.start()
        ths.append(t)
    for t in ths:
        t.join(50)
else:
    loop_select(a.loop)
ls.close()
report({"conns": results, "errors": errors})
sys.exit(1 if errors else 0)
