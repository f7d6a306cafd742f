# SPDX-License-Identifier: MIT
"""The programs of test_containers.py: ordinary socket programs (stdlib
only), run as pid 1 of a container or of a PID namespace, told what to do
by lines on stdin, answering on stdout.  Each checks every byte itself.

    ctr.py server PORT                       threaded echo server
    ctr.py stream HOST PORT NCONN NBYTES ID  at "go": NCONN connections at once,
                                             NBYTES each way, checked
    ctr.py hold HOST PORT NCONN              NCONN connections held; "ping":
                                             64 KiB each way on each; "more": one more
    ctr.py pair LPORT HOST PORT NCONN NBYTES an echo server, and at "go" a
                                             stream client of HOST:PORT (pods)
    ctr.py stage PORT                        "accept": accept(); "use": echo
    ctr.py once HOST PORT                    connect, send, read until the end:
                                             "end KIND MONOTONIC"
    ctr.py mpserver PORT                     each connection's bytes checked
                                             against the address it comes from
    ctr.py mpclient HOST PORT MYIP           "go SPORT ROUND": from MYIP:SPORT
    ctr.py probe DIR                         what of DIR this user can open
"""
import json
import os
import random
import socket
import stat
import sys
import threading
import time


def say(*words):
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def pattern(seed, n):
    return random.Random(seed).randbytes(n)


def recv_all(s):
    got = bytearray()
    while True:
        d = s.recv(1 << 20)
        if not d:
            return bytes(got)
        got += d


def listener(port, backlog=128):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(backlog)
    return ls


def echo(c):
    try:
        while True:
            d = c.recv(1 << 20)
            if not d:
                break
            c.sendall(d)
        c.shutdown(socket.SHUT_WR)
    except OSError as e:
        say("server-error", e.errno, e.strerror)
    finally:
        c.close()


def serve(ls, handler):
    def loop():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=handler, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def wait_stdin_end():
    for line in sys.stdin:
        if line.strip() == "quit":
            break
    sys.stdout.flush()
    os._exit(0)


def cmd_server(port):
    serve(listener(int(port)), echo)
    say("ready")
    wait_stdin_end()


def one_stream(host, port, nbytes, seed, results, i):
    """One connection: nbytes out (a sender thread), the echo read back."""
    data = pattern(seed, nbytes)
    try:
        s = socket.create_connection((host, port), timeout=None)

        def send():
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        t = threading.Thread(target=send)
        t.start()
        got = recv_all(s)
        t.join()
        s.close()
        if got == data:
            results[i] = "ok"
        else:
            results[i] = "bad got=%d want=%d first-diff=%d" % (
                len(got), nbytes, next((k for k in range(min(len(got), nbytes))
                                        if got[k] != data[k]), min(len(got), nbytes)))
    except OSError as e:
        results[i] = "error %s %s" % (e.errno, e.strerror)


def streams(host, port, nconn, nbytes, ident):
    results = [None] * nconn
    ts = [threading.Thread(target=one_stream, args=(host, port, nbytes, "%s/%d" % (ident, i),
                                                    results, i)) for i in range(nconn)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i, r in enumerate(results):
        say("conn", i, r)
    ok = sum(r == "ok" for r in results)
    say("done", ok, nconn - ok)
    return ok == nconn


def cmd_stream(host, port, nconn, nbytes, ident):
    say("ready")
    if sys.stdin.readline().strip() != "go":
        os._exit(2)
    good = streams(host, int(port), int(nconn), int(nbytes), ident)
    os._exit(0 if good else 1)


def cmd_hold(host, port, nconn):
    conns = []

    def exchange(s, n, seed):
        data = pattern(seed, n)
        t = threading.Thread(target=s.sendall, args=(data,))
        t.start()
        got = bytearray()
        while len(got) < n:
            d = s.recv(n - len(got))
            if not d:
                break
            got += d
        t.join()
        return bytes(got) == data

    def one():
        s = socket.create_connection((host, int(port)))
        ok = exchange(s, 100, "hello")
        conns.append(s)
        return ok, s.getsockname()[1]
    oks = [one() for _ in range(int(nconn))]
    say("up", sum(o for o, _ in oks), " ".join(str(p) for _, p in oks))
    for line in sys.stdin:
        w = line.split()
        if w[0] == "ping":
            oks = [exchange(s, 65536, "ping%d" % k) for k, s in enumerate(conns)]
            say("pong", sum(oks), len(oks) - sum(oks))
        elif w[0] == "more":
            ok, p = one()
            say("more", int(ok), p)
        elif w[0] == "quit":
            break
    os._exit(0)


def cmd_pair(lport, host, port, nconn, nbytes):
    serve(listener(int(lport)), echo)
    say("ready")
    for line in sys.stdin:
        if line.strip() == "go":
            streams(host, int(port), int(nconn), int(nbytes), "pair%s" % lport)
        elif line.strip() == "quit":
            break
    os._exit(0)


def cmd_stage(port):
    ls = listener(int(port))
    say("ready")
    c = None
    for line in sys.stdin:
        if line.strip() == "accept":
            c, _ = ls.accept()
            say("accepted")
        elif line.strip() == "use":
            echo(c)
    os._exit(0)


def cmd_once(host, port):
    s = socket.create_connection((host, int(port)))
    say("connected")
    kind = "eof"
    try:
        s.sendall(b"q" * 100)
        while True:
            d = s.recv(65536)
            if not d:
                break
    except ConnectionResetError:
        kind = "reset"
    except BrokenPipeError:
        kind = "epipe"
    except OSError as e:
        kind = "error-%d" % e.errno
    say("end", kind, repr(time.monotonic()))
    os._exit(0)


MP_LEN = 2000   # beyond the early bytes (248) that ride with an offer


def mp_payload(ip, port, rnd):
    return pattern("%s:%s:%s" % (ip, port, rnd), MP_LEN)


def cmd_mpserver(port):
    lock = threading.Lock()

    def handle(c):
        peer = c.getpeername()
        try:
            data = recv_all(c)
            head, _, body = data.partition(b"\n")
            w = head.decode(errors="replace").split()
            if len(w) != 3:
                verdict = "bad header %r" % head[:60]
            elif (w[0], int(w[1])) != peer:
                verdict = "misdelivered bytes-of %s:%s on-connection-of %s:%d" % (
                    w[0], w[1], peer[0], peer[1])
            elif body != mp_payload(w[0], w[1], w[2]):
                verdict = "bad payload %d bytes" % len(body)
            else:
                verdict = "ok"
            c.sendall(("%s %s %d\n" % (verdict.split()[0], peer[0], peer[1])).encode())
            if verdict != "ok":
                with lock:
                    say(verdict)
        except OSError as e:
            with lock:
                say("server-error", e.errno, e.strerror, "peer %s:%d" % peer)
        c.close()
    serve(listener(int(port), 512), handle)
    say("ready")
    wait_stdin_end()


def cmd_mpclient(host, port, myip):
    for line in sys.stdin:
        w = line.split()
        if w[0] != "go":
            break
        sport, rnd = int(w[1]), w[2]
        try:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((myip, sport))
            s.connect((host, int(port)))
            s.sendall(("%s %d %s\n" % (myip, sport, rnd)).encode() +
                      mp_payload(myip, sport, rnd))
            s.shutdown(socket.SHUT_WR)
            reply = recv_all(s).decode(errors="replace").strip()
            s.close()
            say("r", rnd, "ok" if reply == "ok %s %d" % (myip, sport) else "bad", reply)
        except OSError as e:
            say("r", rnd, "error", e.errno, e.strerror)
    os._exit(0)


def cmd_probe(d):
    """Every entry of d this user could use: read, write, connect to."""
    out = {}
    try:
        names = sorted(os.listdir(d))
    except OSError as e:
        say(json.dumps({"uid": os.getuid(), "listdir": "denied %d" % e.errno, "entries": {}}))
        return
    for name in names:
        p = os.path.join(d, name)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISSOCK(st.st_mode):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(5)
            try:
                s.connect(p)
                out[name] = "connected"
            except OSError as e:
                out[name] = "denied %s" % e.errno
            s.close()
            continue
        got = []
        for mode, what in ((os.O_RDONLY, "read"), (os.O_WRONLY, "write")):
            try:
                os.close(os.open(p, mode | os.O_NONBLOCK))
                got.append(what)
            except OSError:
                pass
        out[name] = " ".join(got) or "denied"
    say(json.dumps({"uid": os.getuid(), "entries": out}))


if __name__ == "__main__":
    globals()["cmd_" + sys.argv[1]](*sys.argv[2:])
