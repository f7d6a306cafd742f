# SPDX-License-Identifier: MIT
"""What the integration tests share: the paths of the build, a clean
environment for a run directory, `shortcut stats --json` / `stat --json`,
free ports, log tails and the like.  A plain module (`from helpers import
stats`) so that a test file, a peer started with tests/integration on
sys.path, or a script can use it; the pytest fixtures built on it are in
conftest.py.  Every time limit here is a hang guard, never a deadline a
test relies on."""
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.join(ROOT, "build")
SHORTCUT = os.path.join(BUILD, "shortcut")
LIB = os.path.join(BUILD, "libshortcut.so")
PEERS = os.path.join(HERE, "peers")
PROGRAMS = os.path.join(HERE, "programs")

HANG = 120      # how long a `shortcut` command may take before a test calls it hung


def need_built(lib=False):
    """Skip unless build/shortcut (and, with lib, the library) is built."""
    if not os.access(SHORTCUT, os.X_OK) or (lib and not os.path.exists(LIB)):
        pytest.skip("build/shortcut not built (make -C %s)" % ROOT)


def clean_env(rundir, extra=None, unbuffered=False):
    """os.environ without SHORTCUT_* settings and LD_PRELOAD, with
    SHORTCUT_RUNDIR=rundir (and PYTHONUNBUFFERED=1 with unbuffered), then
    extra's entries."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("SHORTCUT_") and k != "LD_PRELOAD"}
    e["SHORTCUT_RUNDIR"] = str(rundir)
    if unbuffered:
        e["PYTHONUNBUFFERED"] = "1"
    e.update(extra or {})
    return e


def _env(where):
    return where if isinstance(where, dict) else clean_env(where)


def shortcut_json(where, *args, timeout=HANG, user=None):
    """`shortcut ARGS`, which must succeed and print JSON, parsed; where is
    an environment (a dict) or a run directory."""
    r = subprocess.run([SHORTCUT, *args], capture_output=True, text=True, env=_env(where),
                       timeout=timeout, user=user)
    assert r.returncode == 0, "shortcut %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr)
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise AssertionError("shortcut %s printed no JSON: %r" % (" ".join(args), r.stdout[:500]))


def stats(where, timeout=HANG, user=None):
    """`shortcut stats --json` of a run directory (where: an environment
    naming it, or the directory), as a dict: how many connection ends went
    on shared memory or fell back to TCP and why, the bytes each way took."""
    return shortcut_json(where, "stats", "--json", timeout=timeout, user=user)


def stat(where, timeout=HANG, user=None):
    """`shortcut stat --json`: the live connections, a list of dicts."""
    return shortcut_json(where, "stat", "--json", timeout=timeout, user=user)


def short_tempdir(prefix="sc-"):
    """A new directory whose path is short enough for a run directory (a
    Unix socket's name in it must fit); the caller removes it."""
    d = tempfile.mkdtemp(prefix=prefix)
    assert len(d) < 60, d
    return d


def which(binary):
    """shutil.which, also looking in the sbin directories (nginx is in
    /usr/sbin, often not on a user's PATH)."""
    return shutil.which(binary) or shutil.which(binary, path="/usr/local/sbin:/usr/sbin:/sbin")


def need(*pairs):
    """pairs of (binary, Debian package): skip if a binary is absent."""
    missing = [f"{b} (Debian package {p})" for b, p in pairs if which(b) is None]
    if missing:
        pytest.skip("not installed: " + ", ".join(missing))


def free_port():
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def listening(port):
    """Whether a socket listens on TCP port (any address), as /proc says."""
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for r in rows:
            c = r.split()
            if c[3] == "0A" and int(c[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def tail(path, n=3000):
    """The last n bytes of a file as text ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def signame(rc):
    """A process's exit status in words: 'exit 1', 'killed by SIGKILL'."""
    if rc is not None and rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    if rc is not None and rc > 128:
        try:
            return f"exit {rc} ({signal.Signals(rc - 128).name}?)"
        except ValueError:
            pass
    return f"exit {rc}"


def kill_group(p, timeout=10):
    """SIGKILL to the process group of p (started with
    start_new_session=True) unless p has ended, then reap p."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout)


def echo_server(backlog=16, chunk=65536):
    """The source of a Python echo server (a thread per connection) on
    127.0.0.1 that prints its port on its first line."""
    return r"""
import socket, sys, threading
ls = socket.socket()
ls.bind(("127.0.0.1", 0)); ls.listen(%d)
print(ls.getsockname()[1], flush=True)
def echo(c):
    while True:
        b = c.recv(%d)
        if not b:
            break
        c.sendall(b)
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
""" % (backlog, chunk)


class Scratch:
    """One test's run directory, scratch directory (.tmp) and the processes
    it started, each in a process group of its own (.procs); as a context
    manager, it kills them and removes both directories at its end. owner:
    a user name that owns both (the programs then run as it: PostgreSQL
    refuses root)."""

    IDLE_S = 30         # wait_idle's hang guard

    def __init__(self, prefix="sc-tmp-", owner=None):
        need_built(lib=True)
        self.rundir = short_tempdir("sc-")
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.user = owner
        if owner:
            pw = pwd.getpwnam(owner)
            for d in (self.rundir, self.tmp):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        self.env = clean_env(self.rundir)
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def stat(self):
        """`shortcut stat --json` as the run directory's owner (shortcut
        refuses another user's); [] if it printed nothing."""
        r = subprocess.run([SHORTCUT, "stat", "--json"], capture_output=True, text=True,
                           env=self.env, timeout=30, user=self.user)
        return json.loads(r.stdout or "[]")

    def wait_idle(self, timeout=None):
        """Until no connection of a live process is listed (servers closed the
        connections of clients that left), so that their bytes are counted.
        It returns as soon as that is so: the timeout is a hang guard (the
        checks after it fail if it ran out), not a deadline a busy machine
        has to meet."""
        deadline = time.monotonic() + (self.IDLE_S if timeout is None else timeout)
        while time.monotonic() < deadline:
            if not self.stat():
                return
            time.sleep(0.05)

    def stats(self):
        return stats(self.env, user=self.user)

    @staticmethod
    def kill(p):
        """SIGKILL to p's process group; p reaped if it ends in 10 s."""
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def finish(self):
        for p in self.procs:
            self.kill(p)
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.rundir, ignore_errors=True)
