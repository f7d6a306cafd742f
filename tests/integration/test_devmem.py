# SPDX-License-Identifier: MIT
"""Device memory TCP on the same host (docs/devmem.md), driven by
programs/devmem_nc.c, a validator in the spirit of the kernel's ncdevmem
selftest written against the kernel's API only (raw generic netlink bind-rx
and bind-tx on loopback, recvmsg with MSG_SOCK_DEVMEM, SO_DEVMEM_DONTNEED,
MSG_ZEROCOPY with SCM_DEVMEM_DMABUF and MSG_ERRQUEUE completions), and by
programs/devmem_errors.c, every error case (the table in docs/devmem.md).
Every byte of every fragment is checked against a repeating pattern; the
stats show the payload went into the region.

Run one:  python3 -m pytest -q tests/integration/test_devmem.py -k hold
"""
import os
import subprocess

import pytest

from helpers import PROGRAMS, SHORTCUT, clean_env, stats

HANG = 120      # a hang guard, never a deadline the test relies on


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    if not os.access(SHORTCUT, os.X_OK):
        pytest.skip("build/shortcut not built")
    out = tmp_path_factory.mktemp("devmem")
    exes = {}
    for name in ("devmem_nc", "devmem_errors"):
        exe = str(out / name)
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe,
                        os.path.join(PROGRAMS, name + ".c"), "-ldl"], check=True, timeout=HANG)
        exes[name] = exe
    return exes


def kv(line):
    return {k: int(v) for k, v in (w.split("=") for w in line.split()[2:])}


def run_pair(progs, rundir, server_args, client_args, client_input=None):
    srv = subprocess.Popen([SHORTCUT, "run", progs["devmem_nc"], "server", *server_args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(rundir),
                           text=True)
    try:
        first = srv.stdout.readline()
        assert first.startswith("port "), (first, srv.stderr.read())
        port = first.split()[1]
        cli = subprocess.run([SHORTCUT, "run", progs["devmem_nc"], "client", port,
                              *client_args], env=clean_env(rundir), capture_output=True, text=True,
                             timeout=HANG, input=client_input)
        assert cli.returncode == 0, (cli.stdout, cli.stderr)
        out, err = srv.communicate(timeout=HANG)
        assert srv.returncode == 0, (out, err)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    s_line = [l for l in out.splitlines() if l.startswith("server ok")][0]
    c_line = [l for l in cli.stdout.splitlines() if l.startswith("client ok")][0]
    return kv(s_line), kv(c_line), stats(rundir)


MIB = 1 << 20


def test_validator_wraps_the_region(progs, rundir):
    """64 MiB in random sizes (1 B .. 1.5 MiB) through a 1 MiB region bound
    with bind-rx over netlink: the region wraps 64 times, every byte of
    every fragment checked, every token returned singly (1 each)."""
    s, c, st = run_pair(progs, rundir, ["--pages", "256"], [str(64 * MIB)])
    assert s["bytes"] == c["bytes"] == 64 * MIB
    assert s["frags"] > 16000
    assert st["conns_accelerated"] == 2
    dm = st["devmem"]
    assert dm["bytes_into_regions"] >= 64 * MIB - s["linear"], dm
    assert dm["frags_delivered"] == s["frags"] and dm["frags_outstanding"] == 0, dm


def test_validator_ncdevmem_region(progs, rundir):
    """ncdevmem's own region (16,000 pages) and 1 MiB+ messages."""
    s, c, st = run_pair(progs, rundir, [], [str(96 * MIB), "--seed", "7"])
    assert s["bytes"] == 96 * MIB and s["frags"] > 0
    assert st["devmem"]["bytes_into_regions"] > 0


def test_transmit_from_tx_binding(progs, rundir):
    """The client sends from a tx-bound region (bind-tx, SO_ZEROCOPY,
    MSG_ZEROCOPY with SCM_DEVMEM_DMABUF, iov_base offsets): one copy, from
    region to region; each send's completion arrives on MSG_ERRQUEUE."""
    s, c, st = run_pair(progs, rundir, ["--pages", "512"], [str(32 * MIB), "--tx"])
    assert s["bytes"] == c["bytes"] == 32 * MIB
    assert c["completions"] == c["sends"] > 0
    assert st["devmem"]["frags_delivered"] == s["frags"]


def test_c_api_binding(progs, rundir):
    """sc_devmem_bind_rx instead of netlink."""
    s, c, st = run_pair(progs, rundir, ["--bind", "api", "--pages", "256"], [str(16 * MIB)])
    assert s["bytes"] == 16 * MIB and s["frags"] > 0


def test_hold_every_token(progs, rundir):
    """A receiver that returns nothing until every chunk of the region is
    its own: the sender waits (counted), nothing is lost or overwritten,
    returning the tokens resumes the stream."""
    s, c, st = run_pair(progs, rundir, ["--pages", "128", "--hold"], [str(32 * MIB)])
    assert s["bytes"] == 32 * MIB
    assert s["held_max"] == 128 and s["region_full"] >= 10, s
    assert st["devmem"]["waits"] > 0, st["devmem"]


def test_switch_back_to_tcp_mid_stream(progs, rundir):
    """`shortcut off` in the middle of a devmem stream: the rest arrives
    over kernel TCP (the kernel's loopback copies: plain bytes), what was
    in flight in the region is re-sent first, every byte checked once and
    in order."""
    srv = subprocess.Popen([SHORTCUT, "run", progs["devmem_nc"], "server", "--pages", "256"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(rundir),
                           text=True)
    cli = None
    try:
        port = srv.stdout.readline().split()[1]
        cli = subprocess.Popen([SHORTCUT, "run", progs["devmem_nc"], "client", port,
                                str(16 * MIB), "--pause-at", str(8 * MIB)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=clean_env(rundir), text=True)
        assert cli.stdout.readline().startswith("paused")
        off = subprocess.run([SHORTCUT, "off"], env=clean_env(rundir), capture_output=True,
                             timeout=HANG)
        assert off.returncode == 0, off
        cli.stdin.write("go\n")
        cli.stdin.flush()
        out, err = cli.communicate(timeout=HANG)
        assert cli.returncode == 0, (out, err)
        sout, serr = srv.communicate(timeout=HANG)
        assert srv.returncode == 0, (sout, serr)
    finally:
        for p in (srv, cli):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    s = kv([l for l in sout.splitlines() if l.startswith("server ok")][0])
    assert s["bytes"] == 16 * MIB
    assert s["frags"] > 0 and s["plain"] > 0, s
    st = stats(rundir)
    assert st["conns_switched_to_tcp"] == 2, st


# case -> what shortcut answers (docs/devmem.md has the kernel's beside it)
ERRORS = [
    ("bind-rx, no queue", "EINVAL"),
    ("bind-rx, a tx queue", "EINVAL"),
    ("bind-rx, queue 1 (loopback has one)", "ERANGE"),
    ("bind-rx, fd -1", "EBADF"),
    ("bind-rx, a pipe", "EINVAL"),
    ("bind-rx, an empty memfd", "EINVAL"),
    ("bind-rx, no such device", "ENODEV"),
    ("bind-rx", "id"),
    ("bind-rx again (its queue is bound)", "EEXIST"),
    ("bind-rx after the first's netlink socket closed", "id"),
    ("bind-tx, fd -1", "EBADF"),
    ("bind-tx", "id"),
    ("recvmsg devmem, bytes sent before it asked", "1"),
    ("DONTNEED, a fragment's token", "1"),
    ("DONTNEED, the same token again", "0"),
    ("fragments", "yes"),
    ("plain recv of fragments", "EFAULT"),
    ("recvmsg devmem, control buffer too small", "EFAULT"),
    ("recvmsg devmem | MSG_PEEK", "EINVAL"),
    ("recvmsg devmem", "8"),
    ("DONTNEED, length not a multiple of 8", "EINVAL"),
    ("DONTNEED, 129 tokens", "EINVAL"),
    ("DONTNEED, an unknown token", "0"),
    ("sendmsg devmem, unknown binding", "EINVAL"),
    ("sendmsg devmem, range outside the region", "EFAULT"),
    ("sendmsg devmem, without MSG_ZEROCOPY", "EINVAL"),
    ("sendmsg devmem", "100"),
    ("send MSG_ZEROCOPY, an ordinary buffer", "10"),
    ("completion", "origin 5 code 0 [0, 0]"),
    ("completion", "origin 5 code 1 [1, 1]"),
    ("MSG_ERRQUEUE, nothing queued", "EAGAIN"),
]


def test_error_table(progs, rundir):
    r = subprocess.run([SHORTCUT, "run", progs["devmem_errors"]], env=clean_env(rundir),
                       capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0, (r.stdout, r.stderr)
    got = [tuple(l.split(": ", 1)) for l in r.stdout.splitlines()]
    assert got == ERRORS, "\n".join("%s: %s" % g for g in got)
