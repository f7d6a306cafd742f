# SPDX-License-Identifier: MIT
"""A client's first bytes ride with its offer (docs/interposer.md §3, "Early
bytes"): what it sends before the acceptor claims the offer is published on
the board too, and the acceptor puts it in its receiving ring as it claims,
so the request is there when the server first reads.  The server here
accepts only once the client has sent (a pipe says so), so the claim always
comes after the sends: the path is deterministic.  Every byte must arrive
once and in order, whatever part went early, and the log proves how many
did."""
import hashlib
import re
import subprocess
import sys

import pytest

from helpers import SHORTCUT
EARLY_MAX = 248         # SC_EARLY_MAX

SERVER = r"""
import hashlib, socket, sys
want = int(sys.argv[1])
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen()
print(ls.getsockname()[1], flush=True)
sys.stdin.readline()                    # the client has sent its first bytes
c, _ = ls.accept()
got = b""
while len(got) < want:
    d = c.recv(65536)
    if not d:
        break
    got += d
c.sendall(hashlib.sha256(got).hexdigest().encode())
c.close()
"""
CLIENT = r"""
import socket, sys
port, sizes, more = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")], sys.argv[3] == "1"
c = socket.create_connection(("127.0.0.1", port))
pos = 0
for i, n in enumerate(sizes):
    chunk = bytes((pos + k) * 7 % 251 for k in range(n))
    pos += n
    flags = socket.MSG_MORE if more and i == 0 else 0
    assert c.send(chunk, flags) == n
print("sent", flush=True)
reply = b""
while len(reply) < 64:
    d = c.recv(64)
    if not d:
        break
    reply += d
print(reply.decode(), flush=True)
"""


def stream(sizes):
    total = sum(sizes)
    return bytes(k * 7 % 251 for k in range(total))


@pytest.mark.parametrize("sizes,more,early", [
    ([64], False, 64),                          # one small request: all of it
    ([1000], False, EARLY_MAX),                 # the first 248, the rest after the OPEN
    ([100, 100, 100], False, EARLY_MAX),        # appended send by send
    ([100], True, 0),                           # MSG_MORE: held, not early
])
def test_early_bytes(sizes, more, early, env):
    senv = dict(env, SHORTCUT_LOG="3")
    total = sum(sizes)
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER, str(total)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=senv)
    try:
        port = srv.stdout.readline().strip()
        cli = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", CLIENT, port,
                                ",".join(map(str, sizes)), "1" if more else "0"],
                               stdout=subprocess.PIPE, text=True, env=env)
        assert cli.stdout.readline().strip() == "sent"
        srv.stdin.write("go\n")
        srv.stdin.flush()
        digest = cli.stdout.readline().strip()
        assert cli.wait(timeout=60) == 0
        _, err = srv.communicate(timeout=60)
        assert srv.returncode == 0, err
    finally:
        for p in (srv,):
            if p.poll() is None:
                p.kill()
    assert digest == hashlib.sha256(stream(sizes)).hexdigest()
    # the path: on shared memory, with this many bytes taken from the offer
    assert "connection on shared memory (server" in err, err
    taken = [int(n) for n in re.findall(r"claimed, (\d+) early bytes", err)]
    assert taken == [early], err
