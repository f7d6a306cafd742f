# SPDX-License-Identifier: MIT
"""A memcached text-protocol client (stdlib socket only) that checks every
byte: N random keys with random values (1 B .. MAX bytes, log-uniform) are
set over several connections (memcached spreads connections over its worker
threads), then read back one by one and with multi-key gets, and compared.
Prints one JSON line; exits 0 only if every answer was right."""
import json
import math
import random
import socket
import sys


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = bytearray()

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError("server closed the connection")
        self.buf += d

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                ln = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return ln
            self._fill()

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        d = bytes(self.buf[:n])
        del self.buf[:n]
        return d

    def set(self, key, val):
        self.s.sendall(b"set %s 0 0 %d\r\n" % (key, len(val)) + val + b"\r\n")
        return self.line()

    def get_many(self, keys):
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        out = {}
        while True:
            ln = self.line()
            if ln == b"END":
                return out
            parts = ln.split()
            if parts[0] != b"VALUE" or len(parts) != 4:
                raise ValueError("unexpected reply %r" % ln[:80])
            n = int(parts[3])
            data = self.exact(n + 2)
            if data[-2:] != b"\r\n":
                raise ValueError("value of %r not terminated" % parts[1])
            out[parts[1]] = data[:-2]


def main():
    port, n, maxsize, seed = (int(a) for a in sys.argv[1:5])
    nconns = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    rnd = random.Random(seed)
    conns = [Conn(port) for _ in range(nconns)]
    items = {}
    for i in range(n):
        size = int(math.exp(rnd.uniform(0, math.log(maxsize))))
        size = max(1, min(maxsize, size))
        key = b"k%d-%d" % (seed, i)
        items[key] = rnd.randbytes(size)
    keys = list(items)
    res = {"keys": n, "bytes": sum(len(v) for v in items.values()),
           "stored": 0, "get_ok": 0, "mget_ok": 0, "bad": []}
    for i, k in enumerate(keys):
        r = conns[i % nconns].set(k, items[k])
        if r == b"STORED":
            res["stored"] += 1
        elif len(res["bad"]) < 10:
            res["bad"].append("set %s: %r" % (k.decode(), r[:80]))
    for i, k in enumerate(keys):
        got = conns[(i + 1) % nconns].get_many([k])
        if got.get(k) == items[k]:
            res["get_ok"] += 1
        elif len(res["bad"]) < 10:
            res["bad"].append("get %s: %s" % (k.decode(), "missing" if k not in got else
                                               "%d bytes, expected %d" % (len(got[k]), len(items[k]))))
    for b in range(0, n, 50):
        batch = keys[b:b + 50]
        got = conns[b // 50 % nconns].get_many(batch)
        for k in batch:
            if got.get(k) == items[k]:
                res["mget_ok"] += 1
            elif len(res["bad"]) < 10:
                res["bad"].append("mget %s wrong" % k.decode())
    for c in conns:
        c.s.sendall(b"quit\r\n")
        c.s.close()
    ok = res["stored"] == res["get_ok"] == res["mget_ok"] == n
    print(json.dumps(res), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
