# SPDX-License-Identifier: MIT
"""shortcut installed as a system tool (issue 16).

`make install` into a temporary DESTDIR, then only the installed files: the
command (doctor, run, stat, stats --prometheus), the library preloaded from
the installed prefix (also moved elsewhere as a whole), a program built with
`pkg-config --cflags --libs shortcut` against it, the symbol versions that
keep interposition working, the man pages, bash completion, the version
everywhere, `make uninstall`.  Then the Debian package: `make deb`, lintian,
and the package extracted with `dpkg -x` alone running `make demo`'s two
benchmarks, a C program's round trip and an accelerated redis round trip.

Debian packages (tests/integration/run.sh installs them): pkgconf, mandoc,
groff-base, man-db, dpkg-dev, debhelper, lintian, redis-server,
redis-tools; Python's prometheus_client.  A test whose tool is missing
skips, naming it."""
import gzip
import json
import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import tempfile
import threading

import pytest

from helpers import PROGRAMS, ROOT, need

PREFIX = "/usr/local"
with open(os.path.join(ROOT, "VERSION")) as _f:
    VERSION = _f.read().strip()
MAJOR = VERSION.split(".")[0]
SONAME = "libshortcut.so." + MAJOR
NODE = "SHORTCUT_" + MAJOR
# a TCP connection in one Python process, 4 bytes each way; prints the
# libshortcut files mapped into it
PAIR = ("import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); "
        "c.sendall(b'ping'); assert a.recv(4) == b'ping'; a.sendall(b'pong'); "
        "assert c.recv(4) == b'pong'; "
        "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libshortcut' in l}))")


def clean_env(rundir, **more):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SHORTCUT_") and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env["SHORTCUT_RUNDIR"] = str(rundir)
    env.update(more)
    return env


def run(args, env=None, timeout=120, **kw):
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, **kw)


SCRATCH = []


def scratch(prefix):
    """A temporary directory, removed when the module's tests are done."""
    d = tempfile.mkdtemp(prefix=prefix)
    SCRATCH.append(d)
    return d


@pytest.fixture(scope="module", autouse=True)
def _clean_scratch():
    yield
    for d in SCRATCH:
        shutil.rmtree(d, ignore_errors=True)
        if os.path.islink(d + "-link"):
            os.unlink(d + "-link")


def rundir():
    """A fresh run directory path (short: a Unix socket name must fit),
    not created: the library or doctor makes it."""
    d = scratch("sc-i-")
    os.rmdir(d)
    return d


def objdump_versions(path):
    """{name: version} of the symbols path defines."""
    out = run(["objdump", "-T", path]).stdout
    v = {}
    for l in out.splitlines():
        p = l.split()
        if len(p) >= 7 and p[2] == "DF" and p[3] != "*UND*":
            v[p[-1]] = p[-2]
    return v


class Tree:
    """An installed prefix: DESTDIR + PREFIX."""

    def __init__(self, root, prefix=PREFIX, libdir=None):
        self.root = root
        self.prefix = os.path.join(root, prefix.lstrip("/"))
        self.bin = os.path.join(self.prefix, "bin", "shortcut")
        self.libdir = libdir or os.path.join(self.prefix, "lib")
        self.lib = os.path.join(self.libdir, SONAME)

    def sc(self, *args, env=None, **kw):
        return run([self.bin, *args], env=env, **kw)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("destdir"))
    r = run(["make", "-C", ROOT, "-s", "install", "DESTDIR=" + dest], timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return Tree(dest)


# ---- the installed files --------------------------------------------------

def test_installed_files(tree):
    p = tree.prefix
    files = ["bin/shortcut", f"lib/libshortcut.so.{VERSION}", "lib/libshortcut.a",
             "include/shortcut.h", "lib/pkgconfig/shortcut.pc", "share/man/man1/shortcut.1",
             "share/man/man7/shortcut.7", "share/man/man3/libshortcut.3",
             "share/bash-completion/completions/shortcut"]
    for f in files:
        assert os.path.isfile(os.path.join(p, f)), f
    assert os.stat(tree.bin).st_mode & stat.S_IXUSR
    # the soname link and the link for linking, relative
    assert os.readlink(os.path.join(p, "lib", SONAME)) == f"libshortcut.so.{VERSION}"
    assert os.readlink(os.path.join(p, "lib", "libshortcut.so")) == SONAME
    dyn = run(["readelf", "-d", tree.lib]).stdout
    assert f"Library soname: [{SONAME}]" in dyn, dyn
    with open(os.path.join(p, "lib/pkgconfig/shortcut.pc")) as f:
        pc = f.read()
    assert f"prefix={PREFIX}\n" in pc and f"Version: {VERSION}\n" in pc, pc
    # nothing of the build tree's paths in what was installed
    for f in ("bin/shortcut", f"lib/libshortcut.so.{VERSION}", "lib/pkgconfig/shortcut.pc"):
        with open(os.path.join(p, f), "rb") as fh:
            assert os.path.join(ROOT, "build").encode() not in fh.read(), f


def test_version_from_one_place(tree):
    """VERSION: the command, the soname, the .pc file, the man pages, the
    CHANGELOG's newest entry (the package's: test_deb_builds_and_passes_lintian)."""
    env = clean_env(rundir())
    for arg in ("--version", "version"):
        r = tree.sc(arg, env=env)
        assert r.returncode == 0 and r.stdout == f"shortcut {VERSION}\n", r
    need(("pkg-config", "pkgconf"))
    r = run(["pkg-config", "--modversion", "shortcut"],
            env=dict(env, PKG_CONFIG_PATH=os.path.join(tree.prefix, "lib", "pkgconfig")))
    assert r.stdout.strip() == VERSION, r
    for page in ("man1/shortcut.1", "man7/shortcut.7", "man3/libshortcut.3"):
        with open(os.path.join(tree.prefix, "share", "man", page)) as f:
            th = [l for l in f if l.startswith(".TH")][0]
        assert f'"shortcut {VERSION}"' in th, th
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        top = re.search(r"^## (\S+) — (\d{4}-\d\d-\d\d)$", f.read(), re.M)
    assert top and top.group(1) == VERSION


def test_symbol_versions(tree):
    """The C API in the version node, the interposed libc names in the base
    version: a node of another name on recv would make the loader pass over
    ours for a program's recv@GLIBC_2.2.5 (then nothing is accelerated)."""
    need(("objdump", "binutils"))
    v = objdump_versions(tree.lib)
    api = {n: x for n, x in v.items() if n.startswith("sc_")}
    calls = {n: x for n, x in v.items() if not n.startswith("sc_")}
    assert {"sc_listen", "sc_connect", "sc_send", "sc_recv", "sc_stats_get"} <= set(api)
    assert set(api.values()) == {NODE}, api
    assert {"recv", "send", "connect", "accept", "epoll_wait", "close"} <= set(calls)
    assert set(calls.values()) == {"Base"}, calls


# ---- the installed command ------------------------------------------------

def test_installed_run_preloads_installed_library(tree):
    """shortcut run, installed, preloads the installed library (found from
    its own path, not the build tree's) and the connection is on shared
    memory; the same from a copy of the prefix moved elsewhere."""
    rd = rundir()
    env = clean_env(rd)
    r = tree.sc("run", "python3", "-c", PAIR, env=env)
    assert r.returncode == 0, r.stderr
    assert eval(r.stdout) == [os.path.realpath(tree.lib)], r.stdout
    st = json.loads(tree.sc("stats", "--json", env=env).stdout)
    assert st["conns_accelerated"] == 2 and st["bytes_shm_sent"] == 8, st
    # the whole prefix somewhere else: its own library still
    moved = scratch("sc-moved-")
    shutil.copytree(tree.root, moved, symlinks=True, dirs_exist_ok=True)
    m = Tree(moved)
    r = m.sc("run", "python3", "-c", PAIR, env=clean_env(rundir()))
    assert r.returncode == 0, r.stderr
    assert eval(r.stdout) == [os.path.realpath(m.lib)], r.stdout


def test_preloaded_installed_library_binds_versioned_references(tree):
    """LD_PRELOAD of the installed library, no shortcut run: a C program
    whose send/recv/read/write are versioned references (recv@GLIBC_2.2.5)
    gets ours; shortcut stats shows its connection accelerated."""
    need(("cc", "gcc"), ("objdump", "binutils"))
    exe = os.path.join(scratch("sc-tp-"), "tcp_pair")
    r = run(["cc", "-O2", "-Wall", "-Werror", "-o", exe, os.path.join(PROGRAMS, "tcp_pair.c")])
    assert r.returncode == 0, r.stderr
    und = run(["objdump", "-T", exe]).stdout
    assert re.search(r"\(GLIBC_[0-9.]+\)\s+recv$", und, re.M), und
    rd = rundir()
    r = run([exe], env=clean_env(rd, LD_PRELOAD=tree.lib))
    assert r.returncode == 0 and r.stdout == "ok\n", r
    st = json.loads(tree.sc("stats", "--json", env=clean_env(rd)).stdout)
    assert st["conns_accelerated"] == 2, st
    assert st["bytes_shm_sent"] == 2 * 65536 and st["bytes_tcp_sent"] == 0, st


def test_installed_stat_shows_live_connections(tree):
    """shortcut stat (installed) while a program holds its accelerated
    connection open: both ends, mode shm, the peer being the same process."""
    rd = rundir()
    env = clean_env(rd)
    hold = PAIR + "; print('ready', flush=True); input()"
    p = subprocess.Popen([tree.bin, "run", "python3", "-c", hold], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        p.stdout.readline()                      # the maps line
        assert p.stdout.readline() == "ready\n"  # the connection is up
        r = tree.sc("stat", "--json", env=env)
        assert r.returncode == 0, r.stderr
        recs = [x for x in json.loads(r.stdout) if x["mode"] == "shm"]
        assert len(recs) == 2, r.stdout
        assert {x["pid"] for x in recs} == {p.pid} and {x["peer_pid"] for x in recs} == {p.pid}
        assert sorted(x["bytes_sent"] for x in recs) == [4, 4]
        text = tree.sc("stat", env=env).stdout
        assert text.splitlines()[0].split()[:4] == ["PID", "COMMAND", "FD", "MODE"], text
    finally:
        p.communicate("\n", timeout=30)
    assert p.returncode == 0


def parse_prometheus(text):
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_stats_prometheus(tree):
    """stats --prometheus: parsed by prometheus_client's parser, every family
    with HELP and TYPE before its samples, counters named _total, label
    values escaped; the numbers are stats --json's."""
    pytest.importorskip("prometheus_client", reason="Python's prometheus_client "
                        "(pip install prometheus_client, or python3-prometheus-client)")
    rd = rundir()
    env = clean_env(rd)
    assert tree.sc("run", "python3", "-c", PAIR, env=env).returncode == 0
    assert tree.sc("run", "--off", "python3", "-c", PAIR, env=env).returncode == 0
    r = tree.sc("stats", "--prometheus", env=env)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    js = json.loads(tree.sc("stats", "--json", env=env).stdout)
    fams = parse_prometheus(text)
    # the exposition itself: HELP and TYPE first, one TYPE per family
    typed = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name not in typed, name
            typed[name] = kind
        elif line.startswith("# HELP "):
            assert len(line.split(" ", 3)) == 4, line
        else:
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            assert name in typed, f"sample before its TYPE: {line}"
            assert re.fullmatch(r'[a-z_]+(\{([a-z_]+="(\\.|[^"\\])*",?)+\})? [0-9]+', line), line
    for name, kind in typed.items():
        assert (kind == "counter") == name.endswith("_total"), (name, kind)
        assert name.startswith("shortcut_")
    for want in ("shortcut_connections", "shortcut_fallbacks", "shortcut_bytes",
                 "shortcut_wakeups", "shortcut_switches", "shortcut_devmem_bytes",
                 "shortcut_devmem_fragments_outstanding", "shortcut_info"):
        assert want in fams, sorted(fams)

    def val(fam, **labels):
        got = [s.value for s in fams[fam].samples
               if not s.name.endswith("_created") and s.labels == labels]
        assert len(got) == 1, (fam, labels, fams[fam].samples)
        return got[0]
    assert fams["shortcut_connections"].type == "counter"
    assert val("shortcut_connections", mode="shm") == js["conns_accelerated"] == 2
    assert val("shortcut_connections", mode="tcp") == js["conns_fallback"] == 2
    assert val("shortcut_fallbacks", reason="disabled") == js["fallback"]["disabled"] == 2
    assert {s.labels["reason"] for s in fams["shortcut_fallbacks"].samples} == set(js["fallback"])
    assert val("shortcut_bytes", path="shm", direction="sent") == js["bytes_shm_sent"] == 8
    assert val("shortcut_bytes", path="tcp", direction="sent") == js["bytes_tcp_sent"] == 8
    assert val("shortcut_wakeups") == js["wakeups_sent"]
    assert val("shortcut_switches") == js["conns_switched_to_tcp"]
    assert val("shortcut_devmem_bindings") == js["devmem"]["bindings"]
    assert val("shortcut_info", version=VERSION, rundir=rd) == 1
    # a run directory name that needs escaping in a label value
    odd = scratch('sc-"q\\')
    os.chmod(odd, 0o700)
    r = tree.sc("stats", "--prometheus", env=clean_env(odd))
    assert r.returncode == 0, r.stderr
    assert [s.labels["rundir"] for s in parse_prometheus(r.stdout)["shortcut_info"].samples] == [odd]


@pytest.mark.parametrize("args", [["stats", "--json", "--prometheus"],
                                  ["stats", "--prometheus", "--reset"], ["stats", "--bogus"]])
def test_stats_option_errors(tree, args):
    r = tree.sc(*args, env=clean_env(rundir()))
    assert r.returncode == 2 and "--prometheus" in r.stderr and "usage" in r.stderr, r


# ---- doctor ---------------------------------------------------------------

CHECKS = {"ld-preload", "config", "library", "memfd", "futex", "fd-passing", "tcp-save-syn",
          "syn-mark", "close_range", "rundir", "rundir-fs", "switch", "fd-limit", "policies",
          "pid-ns"}


def doctor(tree, *args, env, **kw):
    r = tree.sc("doctor", "--json", *args, env=env, **kw)
    assert r.returncode in (0, 1), r
    d = json.loads(r.stdout)
    assert d["ok"] == (r.returncode == 0) and d["version"] == VERSION
    return r.returncode, {c["name"]: c for c in d["checks"]}


def test_doctor_all_ok(tree):
    """On this host, with a fresh run directory and nothing preloaded, every
    check is ok (it creates the run directory 0700, as the library would);
    the text form says one line per check."""
    rd = rundir()
    rc, checks = doctor(tree, env=clean_env(rd))
    assert rc == 0, checks
    assert set(checks) == CHECKS, set(checks) ^ CHECKS
    assert all(c["status"] == "ok" and c["fix"] == "" for c in checks.values())
    assert os.path.realpath(tree.lib) in checks["library"]["detail"] or \
        tree.lib in checks["library"]["detail"], checks["library"]
    st = os.lstat(rd)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    r = tree.sc("doctor", env=clean_env(rd))
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and len(lines) == len(CHECKS) + 1, r.stdout
    assert lines[-1] == f"all {len(CHECKS)} checks ok"
    assert all(l.split()[0] == "ok" for l in lines[:-1]), r.stdout


def test_doctor_finds_problems(tree):
    """Each problem is named on its own line with its fix, and exits 1: a run
    directory of mode 0755, one that is a symbolic link, LD_PRELOAD set, a
    low fd limit, an invalid SHORTCUT_* variable, the kill switch on."""
    rd = rundir()
    os.mkdir(rd, 0o755)
    os.chmod(rd, 0o755)
    rc, c = doctor(tree, env=clean_env(rd))
    assert rc == 1 and c["rundir"]["status"] == "warn" and "0755" in c["rundir"]["detail"]
    assert c["rundir"]["fix"] == f"chmod 700 {rd}"
    os.chmod(rd, 0o700)

    link = rd + "-link"
    os.symlink(rd, link)
    rc, c = doctor(tree, env=clean_env(link))
    assert rc == 1 and c["rundir"]["status"] == "fail" and "symbolic link" in c["rundir"]["detail"]

    rc, c = doctor(tree, env=clean_env(rd, LD_PRELOAD="libm.so.6"))
    assert rc == 1 and c["ld-preload"]["status"] == "warn" and "libm.so.6" in c["ld-preload"]["detail"]

    def low_fds():
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
    rc, c = doctor(tree, env=clean_env(rd), preexec_fn=low_fds)
    assert rc == 1 and c["fd-limit"]["status"] == "warn", c["fd-limit"]
    assert "RLIMIT_NOFILE 200" in c["fd-limit"]["detail"] and "ulimit -n" in c["fd-limit"]["fix"]

    r = tree.sc("doctor", env=clean_env(rd, SHORTCUT_RMEM="1"))
    assert r.returncode == 1 and "SHORTCUT_RMEM" in r.stderr
    assert re.search(r"^fail\s+config\s", r.stdout, re.M), r.stdout

    assert tree.sc("off", "--wait", "0", env=clean_env(rd)).returncode == 0
    rc, c = doctor(tree, env=clean_env(rd))
    assert rc == 1 and c["switch"]["status"] == "warn" and c["switch"]["fix"] == "shortcut on"
    assert tree.sc("on", env=clean_env(rd)).returncode == 0
    rc, c = doctor(tree, env=clean_env(rd))
    assert rc == 0, {k: v for k, v in c.items() if v["status"] != "ok"}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    """Programs the loader will not preload into, or not accelerate: static,
    Go without cgo (a Go section, no pthread_create),
    set-user-ID to another user; and a plain one."""
    need(("cc", "gcc"))
    d = tmp_path_factory.mktemp("targets")
    src = d / "t.c"
    src.write_text("int main(void) { return 3; }\n")
    go = d / "go.c"
    go.write_text('__attribute__((used, section(".go.buildinfo"))) const char b[16] = "go";\n'
                  "int main(void) { return 3; }\n")
    t = {}
    for name, args in (("plain", [str(src)]), ("static", ["-static", str(src)]),
                       ("gofake", [str(go)])):
        r = run(["cc", "-o", str(d / name), *args])
        if r.returncode == 0:
            t[name] = str(d / name)
    if os.geteuid() == 0 and "plain" in t:
        shutil.copy(t["plain"], d / "suid")
        os.chown(d / "suid", 65534, -1)
        os.chmod(d / "suid", 0o4755)
        if not os.statvfs(str(d)).f_flag & os.ST_NOSUID:
            t["suid"] = str(d / "suid")
    return t


@pytest.mark.parametrize("kind,words", [
    ("static", "statically linked"), ("gofake", "a Go program without cgo"), ("suid", "set-user-ID"),
])
def test_run_warns_for_programs_without_preload(tree, targets, kind, words):
    """shortcut run says before it runs such a program that it will not be
    accelerated (and runs it: its own exit status comes back); doctor
    PROGRAM says the same with a fix."""
    if kind not in targets:
        pytest.skip(f"no {kind} program here (static libc, root, a nosuid /tmp)")
    env = clean_env(rundir())
    r = tree.sc("run", targets[kind], env=env)
    assert r.returncode == 3, r
    assert f"shortcut: warning: {targets[kind]}: {words}" in r.stderr, r.stderr
    rc, c = doctor(tree, targets[kind], env=env)
    assert rc == 1 and c["program"]["status"] == "warn" and words in c["program"]["detail"]
    assert c["program"]["fix"]


def test_run_no_warning_for_a_plain_program(tree, targets):
    env = clean_env(rundir())
    r = tree.sc("run", targets["plain"], env=env)
    assert r.returncode == 3 and r.stderr == "", r
    rc, c = doctor(tree, targets["plain"], env=env)
    assert rc == 0 and c["program"]["status"] == "ok"
    rc, c = doctor(tree, "no-such-program-here", env=env)
    assert rc == 1 and c["program"]["status"] == "fail"


def test_doctor_usage(tree):
    r = tree.sc("doctor", "--bogus", env=clean_env(rundir()))
    assert r.returncode == 2 and "--bogus" in r.stderr and "usage: shortcut doctor" in r.stderr


# ---- a C API program built against the installed library ------------------

def pkg_env(tree):
    return dict(clean_env(rundir()), PKG_CONFIG_PATH=os.path.join(tree.prefix, "lib", "pkgconfig"),
                PKG_CONFIG_SYSROOT_DIR=tree.root)


def test_pkg_config_program(tree):
    """cc prog.c $(pkg-config --cflags --libs shortcut): the program needs
    libshortcut.so.0, its sc_* references carry SHORTCUT_0, and it runs
    against the installed library.  Linked with it, the program has the
    interposer too: its own TCP connection is accelerated (shortcut(7))."""
    need(("pkg-config", "pkgconf"), ("cc", "gcc"))
    env = pkg_env(tree)
    flags = run(["pkg-config", "--cflags", "--libs", "shortcut"], env=env)
    assert flags.returncode == 0, flags.stderr
    assert f"-I{tree.prefix}/include" in flags.stdout and "-lshortcut" in flags.stdout
    exe = os.path.join(scratch("sc-api-"), "api")
    r = run(["cc", "-O2", "-Wall", "-Werror", "-DWITH_API", "-o", exe,
             os.path.join(PROGRAMS, "tcp_pair.c"), *flags.stdout.split()], env=env)
    assert r.returncode == 0, r.stderr
    assert f"Shared library: [{SONAME}]" in run(["readelf", "-d", exe]).stdout
    und = run(["objdump", "-T", exe]).stdout
    assert re.search(r"\(%s\)\s+sc_listen$" % NODE, und, re.M), und
    renv = dict(clean_env(rundir()), LD_LIBRARY_PATH=os.path.join(tree.prefix, "lib"))
    r = run([exe], env=renv)
    assert r.returncode == 0 and r.stdout == "ok\napi hello accelerated 2\n", r
    # the C API alone, statically: no interposer, the TCP connection is the kernel's
    static = exe + "-static"
    libs_l = run(["pkg-config", "--libs-only-L", "shortcut"], env=env).stdout.split()
    cflags = run(["pkg-config", "--cflags", "shortcut"], env=env).stdout.split()
    r = run(["cc", "-O2", "-DWITH_API", "-o", static, os.path.join(PROGRAMS, "tcp_pair.c"),
             *cflags, *libs_l, "-l:libshortcut.a", "-pthread"])
    assert r.returncode == 0, r.stderr
    assert SONAME not in run(["readelf", "-d", static]).stdout
    r = run([static], env=clean_env(rundir()))
    assert r.returncode == 0 and r.stdout == "ok\napi hello accelerated 0\n", r


# ---- man pages, completion -------------------------------------------------

PAGES = ("man1/shortcut.1", "man7/shortcut.7", "man3/libshortcut.3")


@pytest.mark.parametrize("page", PAGES)
def test_man_page_renders_clean(tree, page):
    """mandoc -Tlint, groff -ww and man -l (at three widths) say nothing."""
    path = os.path.join(tree.prefix, "share", "man", page)
    need(("mandoc", "mandoc"), ("groff", "groff-base"), ("man", "man-db"))
    r = run(["mandoc", "-Tlint", path])
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr
    r = run(["groff", "-ww", "-man", "-z", path])
    assert r.stdout + r.stderr == "", r.stderr
    for width in ("60", "80", "120"):
        r = run(["man", "--warnings", "-l", path], env=dict(os.environ, MANWIDTH=width,
                                                               MANPAGER="cat", PAGER="cat"))
        assert r.returncode == 0 and r.stderr == "", (width, r.stderr)
        assert len(r.stdout.splitlines()) > 40


def man_text(tree, page):
    path = os.path.join(tree.prefix, "share", "man", page)
    if shutil.which("man") is None:
        pytest.skip("man (Debian package man-db) missing")
    r = run(["man", "-l", path], env=dict(os.environ, MANWIDTH="2000", MANPAGER="cat"))
    return r.stdout.replace("\u2010", "-")


def test_man_pages_cover_the_interface(tree):
    """shortcut(1): every subcommand of `shortcut help` and its options,
    exit codes, examples; shortcut(7): every variable of the README's table
    and every fallback reason; libshortcut(3): every exported sc_ function."""
    one = man_text(tree, "man1/shortcut.1")
    helptext = tree.sc("help", env=clean_env(rundir())).stdout
    subs = set(re.findall(r"^  ([a-z]+)\b", helptext, re.M))
    assert {"run", "stat", "stats", "off", "on", "doctor", "perf", "config", "version"} <= subs
    for s in subs:
        assert re.search(r"^       (shortcut )?%s\b" % s, one, re.M), s
    for opt in re.findall(r"(--[a-z-]+)", helptext) + ["-vvv", "--transports", "--help"]:
        assert opt in one, opt
    for sect in ("EXIT STATUS", "EXAMPLES", "ENVIRONMENT", "FILES", "SEE ALSO"):
        assert "\n" + sect + "\n" in one, sect
    for code in ("0", "1", "2", "127"):
        assert re.search(r"^       %s\s" % code, one, re.M), code

    seven = man_text(tree, "man7/shortcut.7")
    with open(os.path.join(ROOT, "README.md")) as f:
        readme_vars = set(re.findall(r"^\| `(SHORTCUT_[A-Z_]+)` \|", f.read(), re.M))
    assert len(readme_vars) >= 8
    for v in readme_vars:
        assert re.search(r"^       %s(\s|$)" % v, seven, re.M), v
    reasons = set(json.loads(tree.sc("stats", "--json", env=clean_env(rundir())).stdout)["fallback"])
    for reason in reasons | {"switched_to_tcp"}:
        assert re.search(r"^       %s(\s|$)" % reason, seven, re.M), reason
    for sect in ("ENVIRONMENT", "FALLBACK REASONS", "LIMITS"):
        assert "\n" + sect + "\n" in seven, sect

    three = man_text(tree, "man3/libshortcut.3")
    api = [n for n in objdump_versions(tree.lib) if n.startswith("sc_")]
    for n in api:
        assert re.search(r"\b%s\(" % n, three), n
    assert NODE in three and SONAME in three


def test_bash_completion(tree):
    """The installed completion offers the subcommands, each one's options,
    perf's modes and transports, and commands after `shortcut run`."""
    need(("bash", "bash"))
    comp = os.path.join(tree.prefix, "share", "bash-completion", "completions", "shortcut")
    script = f"""
source {comp}
t() {{ COMP_WORDS=("$@"); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMPREPLY=(); _shortcut
      echo "${{COMPREPLY[*]}}"; }}
complete -p shortcut
t shortcut ''
t shortcut st
t shortcut stats --
t shortcut stat --
t shortcut doctor --
t shortcut run -
t shortcut run -v pyth
t shortcut perf ''
t shortcut perf stream --transports ''
t shortcut off --
"""
    r = run(["bash", "--norc", "-c", script])
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "complete -F _shortcut shortcut"
    helptext = tree.sc("help", env=clean_env(rundir())).stdout
    subs = set(re.findall(r"^  ([a-z]+)\b", helptext, re.M))
    assert len(subs) >= 10 and set(out[1].split()) >= subs | {"--version", "--help"}, subs
    assert set(out[2].split()) == {"stat", "stats"}
    assert set(out[3].split()) == {"--json", "--prometheus", "--reset"}
    assert out[4] == "--json"
    assert set(out[5].split()) == {"--json", "--help"}
    assert {"-v", "-vv", "-vvv", "--off", "--"} <= set(out[6].split())
    assert "python3" in out[7].split()
    assert set(out[8].split()) == {"pingpong", "stream", "devmem"}
    assert set(out[9].split()) == {"tcp", "unix", "shortcut", "shm", "futex", "memcpy"}
    assert out[10] == "--wait"


def test_uninstall(tmp_path):
    """make uninstall takes away every file make install put there."""
    dest = str(tmp_path / "root")
    r = run(["make", "-C", ROOT, "-s", "install", "DESTDIR=" + dest, "PREFIX=/opt/sc"], timeout=600)
    assert r.returncode == 0, r.stderr
    files = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs]
    assert len(files) == 11 and os.path.isfile(os.path.join(dest, "opt/sc/bin/shortcut")), files
    r = run(["make", "-C", ROOT, "-s", "uninstall", "DESTDIR=" + dest, "PREFIX=/opt/sc"])
    assert r.returncode == 0, r.stderr
    assert [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs] == []
    # the build tree's own files are the default prefix's again
    assert run(["make", "-C", ROOT, "-s"]).returncode == 0


# ---- the Debian package ----------------------------------------------------

@pytest.fixture(scope="module")
def deb():
    need(("dpkg-buildpackage", "dpkg-dev"), ("dh", "debhelper"), ("lintian", "lintian"))
    r = run(["make", "-C", ROOT, "deb"], timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    arch = run(["dpkg-architecture", "-qDEB_HOST_ARCH"]).stdout.strip()
    path = os.path.join(ROOT, "build", "deb", f"shortcut_{VERSION}_{arch}.deb")
    assert os.path.isfile(path), os.listdir(os.path.dirname(path))
    return path


def test_deb_builds_and_passes_lintian(deb):
    """Its name, fields, dependencies, changelog and files; lintian (as the
    build ran it) reports no error."""
    f = lambda field: run(["dpkg-deb", "-f", deb, field]).stdout.strip()
    assert f("Package") == "shortcut" and f("Version") == VERSION
    assert f("Architecture") == run(["dpkg-architecture", "-qDEB_HOST_ARCH"]).stdout.strip()
    assert re.match(r"libc6 \(>= [0-9.]+\)", f("Depends")), f("Depends")
    files = run(["dpkg-deb", "-c", deb]).stdout
    multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
    for want in ("./usr/bin/shortcut", f"./usr/lib/{multiarch}/libshortcut.so.{VERSION}",
                 f"./usr/lib/{multiarch}/{SONAME} -> libshortcut.so.{VERSION}",
                 f"./usr/lib/{multiarch}/libshortcut.a", f"./usr/lib/{multiarch}/pkgconfig/shortcut.pc",
                 "./usr/include/shortcut.h", "./usr/share/man/man1/shortcut.1.gz",
                 "./usr/share/man/man7/shortcut.7.gz", "./usr/share/man/man3/libshortcut.3.gz",
                 "./usr/share/bash-completion/completions/shortcut",
                 "./usr/share/doc/shortcut/changelog.gz", "./usr/share/doc/shortcut/copyright",
                 "./etc/cdi/shortcut.json", "./usr/lib/tmpfiles.d/shortcut.conf"):
        assert want in files, want
    ctl = run(["dpkg-deb", "-I", deb, "shlibs"]).stdout
    assert ctl.strip() == f"libshortcut {MAJOR} shortcut (>= {VERSION})", ctl
    r = run(["lintian", "--fail-on", "error", deb], timeout=600)
    assert r.returncode == 0 and not re.search(r"^E: ", r.stdout, re.M), r.stdout
    x = scratch("sc-deb-")
    run(["dpkg", "-x", deb, x], check=True)
    with gzip.open(os.path.join(x, "usr/share/doc/shortcut/changelog.gz"), "rt") as fh:
        assert fh.readline().startswith(f"shortcut ({VERSION}) ")


@pytest.fixture(scope="module")
def extracted(deb, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("debroot"))
    run(["dpkg", "-x", deb, root], check=True)
    multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
    return Tree(root, "/usr", os.path.join(root, "usr", "lib", multiarch))


@pytest.mark.parametrize("mode,size", [("pingpong", "64"), ("stream", "65536")])
def test_deb_extracted_runs_demo(extracted, mode, size):
    """make demo's two benchmarks (shorter) from the extracted files alone."""
    r = extracted.sc("perf", mode, "--size", size, "--seconds", "0.1", "--reps", "1", "--json",
                     env=clean_env(rundir()))
    assert r.returncode == 0, r.stderr
    res = {x["transport"]: x for x in json.loads(r.stdout)["results"]}
    assert {"tcp", "unix", "shortcut"} <= set(res)
    key = "rtt_us" if mode == "pingpong" else "gbytes_per_s"
    assert all(x[key] > 0 for x in res.values()), res


def test_deb_extracted_redis_round_trip(extracted):
    """redis-server and redis-cli under the extracted shortcut: the value
    comes back, both connections on shared memory, the library mapped in
    redis-server is the extracted one."""
    need(("redis-server", "redis-server"), ("redis-cli", "redis-tools"))
    rd = rundir()
    env = clean_env(rd, SHORTCUT_LOG="2")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    tmp = scratch("sc-redis-")
    srv = subprocess.Popen([extracted.bin, "run", "redis-server", "--port", str(port), "--save", "",
                            "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        # its listener is on the offer board once the library says so
        # (SHORTCUT_LOG=2); end of file first: it died
        want = f"listening on port {port}, accelerated"
        seen = []
        for line in srv.stderr:
            seen.append(line)
            if want in line:
                break
        else:
            pytest.fail("redis-server ended before it listened:\n" + "".join(seen))
        threading.Thread(target=srv.stderr.read, daemon=True).start()
        cli = lambda *a: extracted.sc("run", "redis-cli", "-p", str(port), *a,
                                      env=clean_env(rd))
        assert cli("set", "k", "round trip").stdout.strip() == "OK"
        assert cli("get", "k").stdout.strip() == "round trip"
        with open(f"/proc/{srv.pid}/maps") as fh:
            libs = {l.split()[-1] for l in fh if "libshortcut" in l}
        assert libs == {os.path.realpath(extracted.lib)}, libs
        assert ROOT not in os.path.realpath(extracted.lib)
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    st = json.loads(extracted.sc("stats", "--json", env=clean_env(rd)).stdout)
    # two redis-cli connections, each accelerated at both ends
    assert st["conns_accelerated"] >= 4 and st["conns_fallback"] == 0, st


def test_deb_extracted_c_round_trip(extracted):
    """A C program's TCP round trip (tcp_pair.c, 64 KiB each way) under the
    extracted shortcut run, with or without redis on this host: both ends on
    shared memory, every byte by it, the extracted library mapped."""
    need(("cc", "gcc"))
    exe = os.path.join(scratch("sc-dx-"), "tcp_pair")
    r = run(["cc", "-O2", "-o", exe, os.path.join(PROGRAMS, "tcp_pair.c")])
    assert r.returncode == 0, r.stderr
    rd = rundir()
    r = extracted.sc("run", exe, env=clean_env(rd, LD_DEBUG="libs"))
    assert r.returncode == 0 and r.stdout == "ok\n", r
    lib = os.path.join(os.path.realpath(extracted.libdir), SONAME)
    assert re.search(r"calling init: %s$" % re.escape(lib), r.stderr, re.M), r.stderr[-2000:]
    st = json.loads(extracted.sc("stats", "--json", env=clean_env(rd)).stdout)
    assert st["conns_accelerated"] == 2 and st["conns_fallback"] == 0, st
    assert st["bytes_shm_sent"] == 2 * 65536 and st["bytes_tcp_sent"] == 0, st
