# SPDX-License-Identifier: MIT
"""TCP client for echo_server.py. Prints one JSON line; exits 1 if any byte
came back wrong.

  echo (default): --count messages of seeded random sizes 1..--max-size,
      each sendall()'d then read back exactly; then shutdown(SHUT_WR) and
      the stream must end with no extra byte.
  --banner: read and check BANNER first (server-speaks-first).
  --bulk N: send N bytes, shutdown(SHUT_WR), expect "<N> <sha256>\\n".
  --conns K: K connections at once (one thread each, seed + i).
  --bind HOST:PORT  bind before connect;  --timeout T  sock.settimeout(T)
  --sent-file F     write every byte sent (single connection) to F
"""
import argparse
import hashlib
import os
import random
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BANNER, addr, fail, family_of, recv_exact, recv_to_eof, report  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--count", type=int, default=100)
p.add_argument("--max-size", type=int, default=16384)
p.add_argument("--conns", type=int, default=1)
p.add_argument("--bind")
p.add_argument("--timeout", type=float)
p.add_argument("--banner", action="store_true")
p.add_argument("--bulk", type=int)
p.add_argument("--sent-file")
a = p.parse_args()

results = [None] * a.conns


def one(i):
    rng = random.Random(a.seed + i)
    info = {"ok": False}
    results[i] = info
    s = socket.socket(family_of(a.host), socket.SOCK_STREAM)
    if a.timeout is not None:
        s.settimeout(a.timeout)
    if a.bind:
        h, _, port = a.bind.rpartition(":")
        s.bind((h.strip("[]"), int(port)))
    s.connect((a.host, a.port))
    info.update(sock=addr(s.getsockname()), peer=addr(s.getpeername()))
    hs, hr = hashlib.sha256(), hashlib.sha256()
    sent = received = 0
    sf = open(a.sent_file, "wb") if a.sent_file else None
    if a.banner:
        b = recv_exact(s, len(BANNER))
        if b != BANNER:
            fail("conn %d: banner %r" % (i, b))
            return
    if a.bulk is not None:
        left = a.bulk
        while left:
            n = min(left, rng.randint(1, 1 << 18))
            d = rng.randbytes(n)
            s.sendall(d)
            hs.update(d)
            if sf:
                sf.write(d)
            left -= n
            sent += n
        s.shutdown(socket.SHUT_WR)
        ans = recv_to_eof(s)
        want = b"%d %s\n" % (sent, hs.hexdigest().encode())
        if ans != want:
            fail("conn %d: digest answer %r, want %r" % (i, ans[:200], want))
            return
    else:
        for k in range(a.count):
            d = rng.randbytes(rng.randint(1, a.max_size))
            s.sendall(d)
            hs.update(d)
            if sf:
                sf.write(d)
            sent += len(d)
            back = recv_exact(s, len(d))
            hr.update(back)
            received += len(back)
            if back != d:
                fail("conn %d msg %d: %d bytes sent, %d back, equal prefix %s" % (
                    i, k, len(d), len(back),
                    next((j for j in range(min(len(d), len(back))) if d[j] != back[j]),
                         min(len(d), len(back)))))
                return
        s.shutdown(socket.SHUT_WR)
        extra = recv_to_eof(s)
        if extra:
            fail("conn %d: %d unexpected bytes after the echo: %r" % (i, len(extra), extra[:100]))
            return
    if sf:
        sf.close()
    s.close()
    info.update(ok=True, sent=sent, sha_sent=hs.hexdigest(),
                received=received, sha_received=hr.hexdigest())


def guarded(i):
    try:
        one(i)
    except Exception as e:  # reported, and the exit code says so
        fail("conn %d: %s: %s" % (i, type(e).__name__, e))
        results[i] = {"ok": False, "error": type(e).__name__}


if a.conns == 1:
    guarded(0)
else:
    ths = [threading.Thread(target=guarded, args=(i,)) for i in range(a.conns)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(50)
ok = all(r and r.get("ok") for r in results)
report({"ok": ok, "conns": results})
sys.exit(0 if ok else 1)
