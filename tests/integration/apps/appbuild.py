# SPDX-License-Identifier: MIT
"""The programs of issue 25's matrix that are built from this directory,
fetched and built at their first use and cached under build/ (for
tests/integration/test_apps.py and bench/apps.py). Each function returns the
command line that starts the program (its arguments follow), or raises
Missing (what is not installed or could not be fetched: the caller skips)
or BuildFailed (a compiler's error: the caller fails)."""
import glob
import os
import shutil
import subprocess
import sys

APPS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(APPS, "..", "..", ".."))
OUT = os.path.join(ROOT, "build", "apps")
RUST = os.path.join(APPS, "..", "runtimes", "rust")

NETTY_VERSIONS = ["4.1.137.Final", "4.2.18.Final"]


class Missing(Exception):
    pass


class BuildFailed(Exception):
    pass


def tool(name, *extra, what):
    found = shutil.which(name) or shutil.which(name, path="/usr/local/sbin:/usr/sbin:/sbin")
    for p in extra:
        p = os.path.expanduser(p)
        if not found and os.access(p, os.X_OK):
            found = p
    if not found:
        raise Missing(f"not installed: {name} ({what}); tests/integration/apps/install.sh installs what it can")
    return found


def stale(target, *sources):
    return not os.path.exists(target) or \
        any(os.path.getmtime(s) > os.path.getmtime(target) for s in sources)


def run_build(what, cmd, cwd, env=None, timeout=900):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise BuildFailed(f"building {what} failed: {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")


def netty(version):
    """java NettyEcho against Netty VERSION: its jars fetched from Maven
    Central once (build/apps/java/VERSION/lib), the class compiled there"""
    jv = tool("java", what="Debian package default-jdk-headless")
    javac = tool("javac", what="Debian package default-jdk-headless")
    out = os.path.join(OUT, "java", version)
    lib, classes = os.path.join(out, "lib"), os.path.join(out, "classes")
    pom, src = os.path.join(APPS, "java", "pom.xml"), os.path.join(APPS, "java", "NettyEcho.java")
    if stale(os.path.join(lib, ".fetched"), pom):
        mvn = tool("mvn", what="Debian package maven, to fetch Netty from Maven Central")
        r = subprocess.run([mvn, "-q", "-B", "-f", pom, "dependency:copy-dependencies",
                            "-Dnetty.version=" + version, "-DoutputDirectory=" + lib],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not glob.glob(os.path.join(lib, "netty-transport-native-epoll-*.jar")):
            raise Missing(f"Netty {version} not fetched from Maven Central (mvn dependency:copy-dependencies): "
                          + (r.stdout + r.stderr)[-1500:])
        open(os.path.join(lib, ".fetched"), "w").close()
    if stale(os.path.join(classes, "NettyEcho.class"), src):
        os.makedirs(classes, exist_ok=True)
        run_build("NettyEcho.java", [javac, "-nowarn", "-d", classes, "-cp", os.path.join(lib, "*"), src], APPS)
    return [jv, "-XX:+UseSerialGC", "-cp", classes + ":" + os.path.join(lib, "*"), "NettyEcho"]


def erlang():
    """erl running echo.erl (compiled by erlc into build/apps/erlang)"""
    erl = tool("erl", what="Debian package erlang-base")
    erlc = tool("erlc", what="Debian package erlang-base")
    out = os.path.join(OUT, "erlang")
    src = os.path.join(APPS, "erlang", "echo.erl")
    if stale(os.path.join(out, "echo.beam"), src):
        os.makedirs(out, exist_ok=True)
        run_build("echo.erl", [erlc, "-o", out, src], APPS)
    return [erl, "-noshell", "-pa", out, "-run", "echo", "main"]


def node_ws():
    """(node ws_echo.js, NODE_PATH): ws installed by npm ci from the
    committed package-lock.json into build/apps/node"""
    node = tool("node", what="Debian package nodejs")
    out = os.path.join(OUT, "node")
    mods = os.path.join(out, "node_modules")
    lock = os.path.join(APPS, "node", "package-lock.json")
    if stale(os.path.join(mods, "ws", "package.json"), lock):
        npm = tool("npm", what="Debian package npm, to fetch ws")
        os.makedirs(out, exist_ok=True)
        for f in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(APPS, "node", f), out)
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=out,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise Missing("ws not fetched from the npm registry (npm ci): " + (r.stdout + r.stderr)[-1500:])
    return [node, os.path.join(APPS, "node", "ws_echo.js")], mods


def rt_http():
    """rt-http (axum + reqwest), built with the package of test_runtimes.py's
    tokio rows (one cargo build for both; crates.io at the first, cached in
    build/runtimes/rust)"""
    cargo = tool("cargo", "~/.cargo/bin/cargo", what="rustup's cargo in ~/.cargo/bin")
    target = os.path.join(ROOT, "build", "runtimes", "rust")
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    env["PATH"] = os.path.dirname(cargo) + ":" + env.get("PATH", "")
    run_build("axum + reqwest (tests/integration/runtimes/rust)",
              [cargo, "build", "--release", "--locked", "--quiet"], RUST, env)
    return [os.path.join(target, "release", "rt-http")]


def grpc():
    """python grpc_echo.py, if grpcio imports"""
    r = subprocess.run([sys.executable, "-c", "import grpc"], capture_output=True, text=True)
    if r.returncode != 0:
        raise Missing("not installed: grpcio (pip install -r tests/integration/apps/python/requirements.txt; "
                      "apps/install.sh does)")
    return [sys.executable, os.path.join(APPS, "python", "grpc_echo.py")]
