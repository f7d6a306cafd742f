# SPDX-License-Identifier: MIT
"""Real containers for the tests (issue 22): a container engine from
Debian's packages, an image made with debootstrap and cached in the build
tree, and containers that run the built library and `shortcut` binary
bind-mounted read-only with a shared run directory, their program pid 1
(as with any ENTRYPOINT).  Also network namespaces with a bridge, and
`unshare` PID namespaces, for what real containers make slow.

The engine: Podman (Debian's podman 4.3: daemonless, CDI, `kube play`) by
default; Docker (Debian's docker.io 20.10, its own dockerd started here,
stopped at the end) for the tests that name it, or for all with
SC_CONTAINER_ENGINE=docker.  Installed with apt-get when the tests run as
root; a test skips, naming what is missing, only where that cannot be done.

The image: `debootstrap --variant=minbase bookworm` plus python3 and
redis, from the Debian mirror apt uses here, with three users and a group
for the tests of users who trust each other; made once into
build/containers/IMAGE.tar (about a minute) and imported into the engine
once (seconds); `make clean` removes it.

    python3 -m pytest -q -s tests/integration/test_containers.py   # the costs printed
"""
import fcntl
import glob
import hashlib
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from helpers import BUILD, LIB, PEERS, PROGRAMS, ROOT, SHORTCUT, clean_env, kill_group  # noqa: F401

CACHE = os.path.join(BUILD, "containers")

WATCHDOG = 20   # a failure detector only: every wait ends on an event

# ---- what the tests assert on that the identity/liveness rework (issue 22,
# the lead's part) decides: one place each, to adapt to its wording -------

# `shortcut doctor --json` names a check by this name when the run
# directory is not shared with the peers a container would need (its status
# then not "ok"; "ok" where it is a bind mount shared with others).
DOCTOR_RUNDIR_SHARED = "rundir-shared"
# The variable naming the group whose users accelerate each other (a run
# directory owned by that group, mode 2770).
GROUP_VAR = "SHORTCUT_GROUP"
# SHORTCUT_LOG=3 lines of the accepting process: right after its claim of
# an offer (before the OPEN goes to the client), and once the OPEN went
# (the connection on shared memory).  tests/integration/programs/stopat.c
# holds the process at the first line holding the text.
LOG_CLAIMED = "claimed"
LOG_OPEN_SENT = "connection on shared memory (server"
# SHORTCUT_LOG=1: the line of a connection on shared memory, either end,
# and of one left on TCP
LOG_ON_SHM = "connection on shared memory"
LOG_ON_TCP = "connection stays on TCP"

# ---- the image -----------------------------------------------------------

SUITE = "bookworm"
PACKAGES = ("python3", "redis-server", "redis-tools")
# users in the image: two that may trust each other (TRUST_GROUP), and one
# outside it
USERS = {"sc-a": 1001, "sc-b": 1002, "sc-c": 1003}
TRUST_GROUP, TRUST_GID = "sctrust", 4242
IMAGE_RECIPE = 3   # bump when the recipe below changes
# inside every container
CTR_LIB = "/opt/shortcut/lib/libshortcut.so.0"
CTR_BIN = "/opt/shortcut/bin/shortcut"
CTR_STOPAT = "/opt/shortcut/lib/stopat.so"
CTR_RUNDIR = "/run/sc"
CTR_PEERS = "/t"
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _recipe_id():
    h = hashlib.sha256(repr((SUITE, PACKAGES, sorted(USERS.items()), TRUST_GROUP, TRUST_GID,
                             IMAGE_RECIPE)).encode()).hexdigest()
    return h[:12]


IMAGE_ID = _recipe_id()
IMAGE_TAR = os.path.join(CACHE, "%s-minbase-%s.tar" % (SUITE, IMAGE_ID))
IMAGE = "localhost/shortcut-test:%s" % IMAGE_ID

COSTS = {}      # what this session spent on set-up, seconds (reported once)


def _log(msg):
    sys.stderr.write("containers: %s\n" % msg)
    sys.stderr.flush()


def _run(args, timeout=120, check=True, env=None, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), r.returncode,
                                                 (r.stderr or r.stdout).strip()[-2000:]))
    return r


def _apt_install(pkgs, why):
    """Installs Debian packages (root with apt-get); False when it cannot."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    t = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # services must not start on installation (docker.io's dockerd)
    policy = "/usr/sbin/policy-rc.d"
    had_policy = os.path.exists(policy)
    if not had_policy:
        with open(policy, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(policy, 0o755)
    try:
        for attempt in ("install", "update"):
            r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] +
                               list(pkgs), capture_output=True, text=True, env=env, timeout=900)
            if r.returncode == 0:
                break
            if attempt == "install":
                subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env,
                               timeout=600)
    finally:
        if not had_policy:
            os.unlink(policy)
    COSTS["apt-get install " + " ".join(pkgs)] = time.monotonic() - t
    if r.returncode != 0:
        _log("apt-get install %s failed (%s): %s" % (" ".join(pkgs), why, r.stderr.strip()[-500:]))
    return r.returncode == 0


def debian_mirror():
    """The Debian archive apt uses here (its sources), else deb.debian.org."""
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        with open(path) as f:
            for stanza in f.read().split("\n\n"):
                fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
                if SUITE in fields.get("Suites", "").split() and \
                        "main" in fields.get("Components", "").split():
                    return fields["URIs"].split()[0]
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
        try:
            with open(path) as f:
                for line in f:
                    w = line.split()
                    w = [x for x in w if not x.startswith("[")]
                    if len(w) >= 4 and w[0] == "deb" and w[2] == SUITE and "main" in w[3:]:
                        return w[1]
        except OSError:
            pass
    return "http://deb.debian.org/debian"


def _image_tar():
    """build/containers/IMAGE.tar, made with debootstrap if not there yet."""
    if os.path.exists(IMAGE_TAR):
        return IMAGE_TAR
    if not shutil.which("debootstrap") and not _apt_install(["debootstrap"], "the image"):
        pytest.skip("debootstrap missing (Debian package debootstrap; root needed to install it)")
    for old in glob.glob(os.path.join(CACHE, "%s-minbase-*.tar" % SUITE)):
        os.unlink(old)      # an older recipe's
    rootfs = os.path.join(CACHE, "rootfs.tmp")
    shutil.rmtree(rootfs, ignore_errors=True)
    mirror = debian_mirror()
    t = time.monotonic()
    r = subprocess.run(["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES),
                        SUITE, rootfs, mirror], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        shutil.rmtree(rootfs, ignore_errors=True)
        pytest.skip("debootstrap %s from %s failed: %s" % (SUITE, mirror,
                                                          (r.stdout + r.stderr).strip()[-800:]))
    COSTS["debootstrap"] = time.monotonic() - t
    with open(os.path.join(rootfs, "etc", "passwd"), "a") as f:
        for u, uid in USERS.items():
            f.write("%s:x:%d:%d::/tmp:/bin/sh\n" % (u, uid, uid))
    with open(os.path.join(rootfs, "etc", "group"), "a") as f:
        for u, uid in USERS.items():
            f.write("%s:x:%d:\n" % (u, uid))
        f.write("%s:x:%d:sc-a,sc-b\n" % (TRUST_GROUP, TRUST_GID))
    for d in ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
              "var/cache/apt", "var/lib/apt/lists"):
        p = os.path.join(rootfs, d)
        if os.path.isdir(p):
            shutil.rmtree(p)
            os.mkdir(p)
    t = time.monotonic()
    _run(["tar", "-C", rootfs, "-cf", IMAGE_TAR + ".tmp", "."], timeout=600)
    os.rename(IMAGE_TAR + ".tmp", IMAGE_TAR)
    shutil.rmtree(rootfs, ignore_errors=True)
    COSTS["image tar"] = time.monotonic() - t
    return IMAGE_TAR


# ---- engines -------------------------------------------------------------


class Engine:
    """One container engine: how to call it (argv, environment), and the
    flags every `run` needs here."""

    def __init__(self, kind, argv, env=None):
        self.kind = kind
        self.argv = argv
        self.env = env or dict(os.environ)
        self.flags = []

    def __call__(self, *args, timeout=120, check=True, **kw):
        return _run(self.argv + list(args), timeout=timeout, check=check, env=self.env, **kw)

    def has_image(self):
        return self("image", "inspect", IMAGE, check=False).returncode == 0

    def import_image(self):
        tar = _image_tar()
        t = time.monotonic()
        # a PATH for `kube play` (podman run sets one; an imported image has none)
        self("import", "--change", "ENV PATH=" + PATH_ENV, tar, IMAGE, timeout=600)
        COSTS["%s import" % self.kind] = time.monotonic() - t

    def works(self, extra=()):
        r = self(*(["run", "--rm"] + list(extra) + [IMAGE, "true"]), check=False, timeout=120)
        return r.returncode == 0, (r.stderr or r.stdout).strip()

    def cleanup(self, label):
        r = self("ps", "-aq", "--filter", "label=" + label, check=False)
        ids = r.stdout.split()
        if ids:
            self(*(["rm", "-f"] + (["-t", "0"] if self.kind == "podman" else []) + ids),
                 check=False, timeout=120)
        if self.kind == "podman":
            r = self("pod", "ps", "-q", "--filter", "label=" + label, check=False)
            for p in r.stdout.split():
                self("pod", "rm", "-f", p, check=False)


def _podman():
    if not shutil.which("podman") and not _apt_install(
            ["podman", "runc", "crun", "conmon", "containernetworking-plugins", "catatonit",
             "iptables", "uidmap"], "podman"):
        pytest.skip("podman missing (Debian package podman; root needed to install it)")
    os.makedirs(CACHE, exist_ok=True)
    conf = os.path.join(CACHE, "containers.conf")
    eng = Engine("podman", ["podman"], dict(os.environ, CONTAINERS_CONF=conf))
    # Podman's defaults may not run here: crun refuses a cgroup v1/v2
    # hybrid with a v2 controller (runc does not), and raising
    # RLIMIT_NOFILE and NPROC to Podman's defaults needs CAP_SYS_RESOURCE,
    # which this machine's root may not have.  A containers.conf of ours
    # (CONTAINERS_CONF, this engine's calls only) says what works: pods'
    # infra containers and `kube play` read it too.
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    # (podman caps its own NPROC at 32768 where it cannot raise it)
    nproc = min(nproc[1] if nproc[1] != resource.RLIM_INFINITY else 32768, 32768)
    why = []
    for runtime in (None, "runc"):
        if runtime and not shutil.which(runtime):
            continue
        with open(conf, "w") as f:
            f.write("# written by tests/integration/containers.py\n[containers]\n"
                    "default_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n"
                    % (nofile[0], nofile[1], nproc, nproc))
            if runtime:
                f.write("[engine]\nruntime = \"%s\"\n" % runtime)
        if not eng.has_image():
            eng.import_image()
        ok, err = eng.works()
        if ok:
            return eng
        why.append("%s: %s" % (runtime or "default runtime", err[-300:]))
    pytest.skip("podman cannot run a container here: " + "; ".join(why))


_dockerd = None


def _docker():
    global _dockerd
    if not os.path.exists("/usr/bin/dockerd") and not shutil.which("dockerd") and \
            not _apt_install(["docker.io"], "docker"):
        pytest.skip("dockerd missing (Debian package docker.io; root needed to install it)")
    # Debian's client, not another docker on PATH (a newer static client
    # talks to dockerd 20.10 too, but the engine under test is Debian's)
    client = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else shutil.which("docker")
    sock = "/run/sc-test-docker.sock"
    eng = Engine("docker", [client, "-H", "unix://" + sock])
    if eng("version", check=False, timeout=30).returncode != 0:
        d = os.path.join(CACHE, "docker")
        os.makedirs(d, exist_ok=True)
        t = time.monotonic()
        log = open(os.path.join(d, "dockerd.log"), "ab")
        _dockerd = subprocess.Popen(
            [shutil.which("dockerd") or "/usr/bin/dockerd", "--data-root", os.path.join(d, "data"),
             "--exec-root", "/run/sc-test-docker", "-H", "unix://" + sock,
             "--pidfile", "/run/sc-test-docker.pid"], stdout=log, stderr=log,
            start_new_session=True)
        # ready when it answers (its start has no event to wait on)
        while eng("version", check=False, timeout=30).returncode != 0:
            if _dockerd.poll() is not None or time.monotonic() - t > 60:
                pytest.skip("dockerd did not start (build/containers/docker/dockerd.log)")
            time.sleep(0.2)
        COSTS["dockerd start"] = time.monotonic() - t
    if not eng.has_image():
        eng.import_image()
    ok, err = eng.works()
    if not ok:
        pytest.skip("docker cannot run a container here: " + err[-500:])
    return eng


def stop_dockerd():
    global _dockerd
    if _dockerd and _dockerd.poll() is None:
        _dockerd.terminate()
        try:
            _dockerd.wait(60)
        except subprocess.TimeoutExpired:
            _dockerd.kill()
            _dockerd.wait()
    _dockerd = None


_engines = {}


def engine(kind=None):
    """The engine of that kind (podman, docker; default SC_CONTAINER_ENGINE,
    else podman), installed, its image imported; skips naming what is
    missing where that cannot be done."""
    kind = kind or os.environ.get("SC_CONTAINER_ENGINE", "podman")
    if kind in _engines:
        if isinstance(_engines[kind], str):
            pytest.skip(_engines[kind])
        return _engines[kind]
    if os.geteuid() != 0:
        _engines[kind] = "containers: the tests run their engine as root (rootful %s)" % kind
        pytest.skip(_engines[kind])
    for f in (SHORTCUT, LIB):
        if not os.access(f, os.R_OK):
            pytest.skip("%s not built (make)" % f)
    os.makedirs(CACHE, exist_ok=True)
    t = time.monotonic()
    # one builder of the image at a time (two test runs on one tree)
    with open(os.path.join(CACHE, ".lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        try:
            _engines[kind] = {"podman": _podman, "docker": _docker}[kind]()
        except pytest.skip.Exception as e:
            _engines[kind] = str(e)
            raise
    COSTS["%s ready" % kind] = time.monotonic() - t
    _log("%s ready in %.1f s (%s)" % (kind, COSTS["%s ready" % kind], ", ".join(
        "%s %.1f s" % kv for kv in COSTS.items() if not kv[0].endswith("ready"))))
    return _engines[kind]


def stopat_lib():
    """build/containers/stopat.so (programs/stopat.c), built when older."""
    src = os.path.join(PROGRAMS, "stopat.c")
    out = os.path.join(CACHE, "stopat.so")
    os.makedirs(CACHE, exist_ok=True)
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        _run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", out + ".tmp",
              src, "-ldl"])
        os.rename(out + ".tmp", out)
    return out


# ---- containers ----------------------------------------------------------


class Lines:
    """A stream's lines, read by a thread of its own (a full pipe never
    stops the container), waited for with a deadline."""

    def __init__(self, f, name):
        self.lines = []
        self.ended = False
        self.cv = threading.Condition()
        self.name = name
        self.t = threading.Thread(target=self._read, args=(f,), daemon=True)
        self.t.start()

    def _read(self, f):
        for raw in iter(f.readline, b""):
            with self.cv:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.ended = True
            self.cv.notify_all()

    def wait_for(self, pred, timeout, start=0):
        """The index and text of the first line from `start` on that pred
        accepts; AssertionError when the stream ends or the time runs out."""
        end = time.monotonic() + timeout
        i = start
        with self.cv:
            while True:
                while i < len(self.lines):
                    if pred(self.lines[i]):
                        return i, self.lines[i]
                    i += 1
                left = end - time.monotonic()
                if self.ended or left <= 0:
                    raise AssertionError("%s: %s waiting for a line (%d lines: %r)" % (
                        self.name, "ended" if self.ended else "no answer in %g s" % timeout,
                        len(self.lines), self.lines[-8:]))
                self.cv.wait(left)

    def text(self):
        with self.cv:
            return "\n".join(self.lines)


class Ctr:
    """A running container (`ENGINE run -i --rm`): stdin to write lines
    to, stdout and stderr as Lines."""

    def __init__(self, eng, name, popen):
        self.eng = eng
        self.name = name
        self.p = popen
        self.out = Lines(popen.stdout, name + " stdout")
        self.err = Lines(popen.stderr, name + " stderr")
        self.pos = 0
        self._pid = None

    def line(self, timeout=WATCHDOG, prefix=""):
        """The next stdout line (starting with prefix: the next such one)."""
        i, text = self.out.wait_for(lambda s: s.startswith(prefix), timeout, self.pos)
        self.pos = i + 1
        return text

    def words(self, timeout=WATCHDOG, prefix=""):
        return self.line(timeout, prefix).split()

    def send(self, text):
        self.p.stdin.write((text + "\n").encode())
        self.p.stdin.flush()

    def host_pid(self):
        """The host's pid of the container's pid 1 (it runs: call after a line from it)."""
        if not self._pid:
            self._pid = int(self.eng("inspect", "-f", "{{.State.Pid}}", self.name).stdout)
            assert self._pid > 0, "%s is not running" % self.name
        return self._pid

    def ip(self):
        return self.eng("inspect", "-f", "{{.NetworkSettings.IPAddress}}", self.name).stdout.strip()

    def kill9(self):
        os.kill(self.host_pid(), signal.SIGKILL)

    def wait(self, timeout=WATCHDOG):
        """The exit status of its program; fails the test if it has none by then."""
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s did not exit within %g s; stdout %r, stderr %r" % (
                self.name, timeout, self.out.lines[-5:], self.err.lines[-5:]))

    def finish(self, timeout=WATCHDOG):
        """stdin closed, the exit awaited: (status, stdout, stderr)."""
        try:
            self.p.stdin.close()
        except OSError:
            pass
        rc = self.wait(timeout)
        self.out.t.join(10)
        self.err.t.join(10)
        return rc, self.out.text(), self.err.text()


class Bench:
    """The containers of one test: run them, and remove every one at the
    end (label sc-test=PID-N), whatever happened."""

    def __init__(self, eng, rundir):
        self.eng = eng
        self.rundir = rundir
        self.label = "sc-test=%d-%d" % (os.getpid(), id(self) & 0xffffff)
        self.n = 0
        self.ctrs = []

    def name(self, what):
        self.n += 1
        return "sc%d-%d-%s" % (os.getpid(), self.n, what)

    def mounts(self, rundir=True, stopat=False):
        m = ["-v", LIB + ":" + CTR_LIB + ":ro", "-v", SHORTCUT + ":" + CTR_BIN + ":ro",
             "-v", PEERS + ":" + CTR_PEERS + ":ro"]
        if stopat:
            m += ["-v", stopat_lib() + ":" + CTR_STOPAT + ":ro"]
        if rundir:
            m += ["-v", (self.rundir if rundir is True else rundir) + ":" + CTR_RUNDIR]
        return m

    def run(self, what, argv, env=None, preload=True, rundir=True, stopat=None, flags=(),
            name=None, cdi=None):
        """A container running argv (its pid 1): the library preloaded
        (LD_PRELOAD; preload="run": `shortcut run` as the entrypoint, which
        execs argv; False: neither), the run directory bind-mounted at
        /run/sc (rundir=False: none; a path: that host directory) and
        SHORTCUT_RUNDIR set to it; stopat: programs/stopat.c preloaded
        after the library, holding the process at the first stderr line
        with that text; cdi: none of these, the CDI device of that name
        (shortcut.dev/run=CDI) gives them (preload="run": its binary)."""
        name = name or self.name(what)
        e = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        via_run = preload == "run"
        if cdi:
            rundir = preload = stopat = None
        if rundir:
            e["SHORTCUT_RUNDIR"] = CTR_RUNDIR
        if preload is True:
            e["LD_PRELOAD"] = CTR_LIB + (" " + CTR_STOPAT if stopat else "")
        elif stopat:
            e["LD_PRELOAD"] = CTR_STOPAT
        if stopat:
            e["SC_STOPAT"] = stopat
        e.update(env or {})
        args = ["run", "-i", "--rm", "--name", name, "--label", self.label]
        if cdi:
            args += ["--device", "shortcut.dev/run=" + cdi, "-v", PEERS + ":" + CTR_PEERS + ":ro"]
        else:
            args += self.mounts(rundir, bool(stopat))
        for k, v in e.items():
            args += ["-e", "%s=%s" % (k, v)]
        # SC_CONTAINER_FLAGS: more for every container (--pid host: one PID
        # namespace for all, to tell PID namespaces' part in a failure)
        args += list(flags) + os.environ.get("SC_CONTAINER_FLAGS", "").split() + [IMAGE]
        args += ([CTR_BIN, "run", "--"] if via_run else []) + list(argv)
        p = subprocess.Popen(self.eng.argv + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=self.eng.env, start_new_session=True)
        c = Ctr(self.eng, name, p)
        self.ctrs.append(c)
        return c

    def sh(self, what, script, **kw):
        """A shell script as pid 1 (sh execs the program it ends with)."""
        return self.run(what, ["sh", "-c", script], **kw)

    def close(self):
        for c in self.ctrs:
            if c.p.poll() is None:
                try:
                    os.kill(c.host_pid(), signal.SIGKILL)
                except (OSError, RuntimeError, AssertionError, ValueError):
                    pass
        self.eng.cleanup(self.label)
        for c in self.ctrs:
            try:
                c.p.wait(30)
            except subprocess.TimeoutExpired:
                c.p.kill()
                c.p.wait()


def shm_rundir(prefix="sc-ctr-"):
    """A host run directory for containers to share (a tmpfs, as the default's)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def host_env(rundir, **extra):
    return clean_env(rundir, extra)


def sc(rundir, *args, timeout=30, **extra):
    """`build/shortcut ARGS` on the host, with that run directory."""
    return subprocess.run([SHORTCUT] + list(args), capture_output=True, text=True,
                          env=host_env(rundir, **extra), timeout=timeout)


def listing(rundir):
    """The run directory's files: name -> (inode, type)."""
    out = {}
    for f in os.listdir(rundir):
        try:
            st = os.lstat(os.path.join(rundir, f))
        except FileNotFoundError:
            continue
        out[f] = (st.st_ino, st.st_mode >> 12)
    return out


# ---- network namespaces and PID namespaces without an engine -------------


class Netns:
    """Network namespaces joined by a bridge (as a container engine's
    default network): `server` holds the bridge and 10.79.K.1, client i
    10.79.K.(i+2) through a veth pair.  Commands run in one with
    `cmd(ns, argv, pidns=True)`: `unshare --pid --fork --mount-proc` makes
    the program pid 1 of a PID namespace of its own."""

    def __init__(self, nclients, subnet):
        if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
            pytest.skip("needs root, iproute2 and unshare")
        tag = "%d" % (os.getpid() % 100000)
        self.server = "scs" + tag
        self.clients = ["scc%d-%s" % (i, tag) for i in range(nclients)]
        self.net = "10.79.%d" % subnet
        self.addr = {self.server: self.net + ".1"}
        self.procs = []
        try:
            self._sh("ip", "netns", "add", self.server)
            self._sh("ip", "-n", self.server, "link", "add", "br0", "type", "bridge")
            self._sh("ip", "-n", self.server, "addr", "add", self.net + ".1/24", "dev", "br0")
            self._sh("ip", "-n", self.server, "link", "set", "br0", "up")
            self._sh("ip", "-n", self.server, "link", "set", "lo", "up")
            for i, ns in enumerate(self.clients):
                a, b = "v%d%s" % (i, tag), "w%d%s" % (i, tag)
                self._sh("ip", "netns", "add", ns)
                self._sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
                self._sh("ip", "link", "set", a, "netns", ns)
                self._sh("ip", "link", "set", b, "netns", self.server)
                self._sh("ip", "-n", self.server, "link", "set", b, "master", "br0")
                self._sh("ip", "-n", self.server, "link", "set", b, "up")
                self.addr[ns] = "%s.%d" % (self.net, i + 2)
                self._sh("ip", "-n", ns, "addr", "add", self.addr[ns] + "/24", "dev", a)
                self._sh("ip", "-n", ns, "link", "set", a, "up")
                self._sh("ip", "-n", ns, "link", "set", "lo", "up")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            self.close()
            pytest.skip("network namespaces unavailable here: %s" % e)

    @staticmethod
    def _sh(*args):
        _run(list(args), timeout=30)

    def start(self, ns, argv, env, pidns=True):
        pre = ["ip", "netns", "exec", ns]
        if pidns:
            pre += ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--"]
        # stderr to a file: a log never fills a pipe nobody reads
        err = tempfile.TemporaryFile()
        p = subprocess.Popen(pre + list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=err, env=env, start_new_session=True)
        p.errfile = err
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            kill_group(p, 30)
        for ns in [self.server] + self.clients:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def stderr_tail(p, n=1500):
    """The end of what a process of Netns.start wrote on stderr."""
    f = getattr(p, "errfile", None)
    if not f:
        return ""
    f.seek(0)
    return f.read().decode(errors="replace")[-n:]


def readline(p, timeout=WATCHDOG, what="a line"):
    """p's next stdout line (a process of Netns.start); fails after timeout."""
    end = time.monotonic() + timeout
    buf = b""
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError("no %s from %r in %g s; its stderr: %s" % (
                what, p.args[-3:], timeout, stderr_tail(p)))
        r, _, _ = select.select([p.stdout], [], [], left)
        if r:
            b = os.read(p.stdout.fileno(), 1)
            if not b:
                raise AssertionError("%r ended while waiting for %s; its stderr: %s" % (
                    p.args[-3:], what, stderr_tail(p)))
            buf += b
    return buf.decode().rstrip("\n")
