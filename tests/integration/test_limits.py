# SPDX-License-Identifier: MIT
"""An accelerated server at a low fd limit (RLIMIT_NOFILE 256) serves 200
concurrent connections from an accelerated client, as it would on kernel
TCP: accelerated connections cost it no fd besides their sockets, and near
the limit new ones stay on TCP (fallback "limits") instead of failing."""
import subprocess
import sys

from helpers import SHORTCUT, stats

SERVER = r"""
import socket, selectors, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
sel = selectors.DefaultSelector()
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(512); ls.setblocking(False)
print(ls.getsockname()[1], flush=True)
sel.register(ls, selectors.EVENT_READ)
done = 0
while done < 200:
    for key, ev in sel.select(timeout=20):
        if key.fileobj is ls:
            try:
                c, _ = ls.accept()
            except BlockingIOError:
                continue
            c.setblocking(False); sel.register(c, selectors.EVENT_READ)
        else:
            c = key.fileobj
            try: d = c.recv(100)
            except BlockingIOError: continue
            if not d: sel.unregister(c); c.close(); done += 1
            else: c.send(d)
print("server done", flush=True)
"""
CLIENT = r"""
import socket, sys
port = int(sys.argv[1]); conns = []
for i in range(200):
    conns.append(socket.create_connection(("127.0.0.1", port)))
ok = 0
for i, c in enumerate(conns):
    m = b"ping%d" % i
    c.sendall(m); ok += c.recv(100) == m
for c in conns: c.close()
print("client ok", ok)
"""


def test_low_fd_limit_server(env):
    srv = subprocess.Popen([SHORTCUT, "run", sys.executable, "-c", SERVER], stdout=subprocess.PIPE,
                           text=True, env=env)
    try:
        port = srv.stdout.readline().strip()
        cli = subprocess.run([SHORTCUT, "run", sys.executable, "-c", CLIENT, port],
                             capture_output=True, text=True, env=env, timeout=60)
        assert cli.stdout.strip() == "client ok 200", cli.stdout + cli.stderr
        out, _ = srv.communicate(timeout=30)
        assert out.strip() == "server done", out
    finally:
        srv.kill()
        srv.wait()
    st = stats(env)
    # most on shared memory, the rest on TCP for want of fds, none lost
    assert st["conns_accelerated"] >= 2 * 100, st
    assert st["conns_accelerated"] + st["conns_fallback"] == 400, st
    assert st["conns_fallback"] == 0 or st["fallback"]["limits"] > 0, st
