# SPDX-License-Identifier: MIT
"""Helpers shared by the peer scripts (stdlib only). Each peer is an ordinary
socket program: the same script runs plainly and under `shortcut run`."""
import json
import socket
import sys

BANNER = b"220 hello\r\n"


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def addr(a):
    """getsockname()/getpeername() result as a JSON-friendly [host, port]."""
    return [a[0], a[1]]


def recv_exact(s, n):
    """Exactly n bytes, or fewer if the stream ends first."""
    buf = bytearray()
    while len(buf) < n:
        d = s.recv(min(n - len(buf), 1 << 20))
        if not d:
            break
        buf += d
    return bytes(buf)


def recv_to_eof(s):
    buf = bytearray()
    while True:
        d = s.recv(1 << 20)
        if not d:
            return bytes(buf)
        buf += d


def outcome(fn):
    """Result of one socket call as a short comparable string."""
    try:
        r = fn()
    except OSError as e:
        return type(e).__name__
    if isinstance(r, (bytes, bytearray)):
        return "data:" + bytes(r).decode("latin-1") if r else "eof"
    return "ok:%r" % (r,)


def report(obj):
    """Last stdout line: one JSON object the test parses."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(msg):
    sys.stderr.write("peer: " + msg + "\n")
    sys.stderr.flush()
