#!/bin/bash
# SPDX-License-Identifier: MIT
# make bench: the side-by-side benchmark, everything in one run.
#  1. the connection core (`shortcut perf`): kernel TCP, Unix socket,
#     shortcut and the machine's physical references (bare shared-memory
#     ping-pong, futex ping-pong, memcpy), alternating;
#  1b. device memory (`shortcut perf devmem`): TCP, shortcut's copy path,
#     devmem fragments with and without touching the payload;
#  2. unmodified programs (bench/interposed.py): sockbench, sockperf, nginx
#     (wrk, h2load), redis, iperf3, memcached, each on kernel TCP, a Unix
#     socket where the program has one, and under `shortcut run`, alternating;
#  2b. never slower than kernel TCP (issues 12 and 24, bench/interposed.py
#     --set floor): a connection that stays on TCP (a server without the
#     library), connection set-up (sockbench with blocking, epoll, thread-
#     per-connection and forking servers; pgbench -C), 10,000 connections,
#     epoll_wait(0), CPU per request at fixed rates, oversubscribed pairs,
#     each with its target and pass/miss;
#  2c. applications (issue 25, bench/apps.py): pgbouncer, MariaDB, gRPC,
#     Node ws, axum, Erlang, Netty, HAProxy, each against kernel TCP;
#  3. readiness (bench/readiness.py); 4. calls not accelerated (passthrough.c);
#  5. containers (bench/containers.py redis): redis-benchmark between two
#     containers and between two host processes, kernel TCP and shortcut
#     alternating; only as root with Podman (or SC_CONTAINER_ENGINE=docker),
#     else the section says why it was skipped;
#  6. many cores (bench/scaling.sh): nginx and redis with N workers and N
#     connections, and N pairs of Go programs, N = 1, 2, 4 ... up to the
#     CPUs present.
# Writes bench/results/latest.md (printed at the end), latest.json (every
# sample) and latest.png (bench/plot.py: speed-up over kernel TCP).
#   bench/run.sh [--quick] [--reps N]
#     default: 7 repetitions, 2 s runs (about 30 minutes on a 2-vCPU VM)
#     --quick: 3 repetitions, 1 s runs (about 5 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=7
quick=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=--quick; reps=3 ;;
	--reps) reps=$2; shift ;;
	*) echo "usage: bench/run.sh [--quick] [--reps N]" >&2; exit 2 ;;
	esac
	shift
done
[ "$reps" -ge 1 ] || { echo "--reps must be >= 1" >&2; exit 2; }
start=$(date +%s)
status=0   # 1 if a program run failed (the table names it); everything is still written
out=bench/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -1 /proc/stat > "$tmp/stat0"   # how busy the machine was besides us (end)

# --- what the benchmark drives: install what is missing, if we can --------
has() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ]; }
need_apt=()
has redis-server || need_apt+=(redis-server)
has redis-benchmark || need_apt+=(redis-tools)
has nginx || need_apt+=(nginx)
has wrk || need_apt+=(wrk)
has h2load || need_apt+=(nghttp2-client)
has sockperf || need_apt+=(sockperf)
has iperf3 || need_apt+=(iperf3)
has memcached || need_apt+=(memcached)
{ has memcslap || has memslap; } || need_apt+=(libmemcached-tools)
has_pg() {  # initdb, postgres and pgbench of one version
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && [ -x "$d/postgres" ] && [ -x "$d/pgbench" ] && return 0
	done
	return 1
}
has_pg || need_apt+=(postgresql postgresql-client)
# the sockmap column (bench/sockmap/): clang for the BPF programs, libbpf
has clang || need_apt+=(clang)
[ -e /usr/include/bpf/libbpf.h ] || need_apt+=(libbpf-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing: ${need_apt[*]}" >&2
		# no service may start on installation (policy-rc.d); a failed
		# install leaves its rows "not installed"
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${need_apt[@]}" >/dev/null; } ||
			echo "apt-get failed: rows needing ${need_apt[*]} will say not installed" >&2
		rm -f /usr/sbin/policy-rc.d
	else
		echo "missing Debian packages (their rows will say not installed): ${need_apt[*]}" >&2
	fi
fi
# eBPF sockmap redirection, the kernel's own bypass, as a column of 2 and 2b
# (bench/sockmap/: root and cgroup v2, else the column says skipped)
bench/sockmap/build.sh build/bench >&2 || echo "sockmap column: not built (above)" >&2
# Go's rows of 2 (bench/go, with cgo: a dynamically linked Go program is the
# one shortcut accelerates); Debian's golang-go if no Go is here
gobin=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$gobin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go \
		>/dev/null 2>&1 && gobin=$(command -v go)
fi
if [ -x "$gobin" ]; then
	(cd bench/go && CGO_ENABLED=1 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off \
		GOCACHE="$PWD/../../build/bench/gocache" "$gobin" build -o ../../build/bench/gobench .) >&2 ||
		echo "Go rows: bench/go not built (above)" >&2
else
	echo "Go rows: no go command (Debian package golang-go)" >&2
fi
# the applications of 2c (pgbouncer, haproxy, mariadb, erlang, grpcio):
# tests/integration/test_apps.py's installer; a row it cannot install says so
tests/integration/apps/install.sh >&2
# matplotlib for the chart: pip, else Debian's package (for Debian's python3)
plotpy=python3
if ! python3 -c 'import matplotlib' 2>/dev/null; then
	echo "installing matplotlib" >&2
	python3 -m pip install -q matplotlib 2>/dev/null ||
		python3 -m pip install -q --break-system-packages matplotlib 2>/dev/null ||
		{ [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			python3-matplotlib >/dev/null 2>&1; } || true
	if ! python3 -c 'import matplotlib' 2>/dev/null; then
		plotpy=
		for p in /usr/bin/python3; do
			[ -x "$p" ] && "$p" -c 'import matplotlib' 2>/dev/null && plotpy=$p && break
		done
	fi
fi

# --- 1. the connection core: shortcut perf ------------------------------
secs=()
[ -n "$quick" ] && secs=(--seconds 0.25)
run() {  # name, perf arguments...
	local name=$1
	shift
	echo "running: shortcut perf $* --reps $reps ${secs[*]}" >&2
	build/shortcut perf "$@" --reps "$reps" "${secs[@]}" --json > "$tmp/$name.json"
}
run pp_spin pingpong --size 64
run pp_nospin pingpong --size 64 --spin-us 0
run st_spin stream --size 65536
run st_nospin stream --size 65536 --spin-us 0
python3 - "$tmp" "$reps" "$out/latest.json" "${secs[1]:-0.5}" > "$out/latest.md" <<'PY'
import json, sys, os, platform, datetime
d, reps, jout, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def load(n): return json.load(open(os.path.join(d, n + ".json")))
rows = [("ping-pong 64 B, spinning (round trip, µs; lower is better)", "pp_spin", "rtt_us", "shm", True),
        ("ping-pong 64 B, no spin (round trip, µs)", "pp_nospin", "rtt_us", "futex", True),
        ("stream 64 KiB messages, spinning (GB/s; higher is better)", "st_spin", "gbytes_per_s", "memcpy", False),
        ("stream 64 KiB messages, no spin (GB/s)", "st_nospin", "gbytes_per_s", None, False)]
refname = {"shm": "bare shared-memory ping-pong", "futex": "bare futex ping-pong", "memcpy": "memcpy"}
print(f"# shortcut bench — {datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs, "
      f"{platform.machine()}, kernel {platform.release()}\n")
print(f"## Connection core (`shortcut perf`): medians of {reps} runs of {secs} s per transport\n")
print("| workload | kernel TCP | Unix socket | shortcut | shortcut min–max | shortcut vs TCP | shortcut vs Unix | physical reference |")
print("|---|---|---|---|---|---|---|---|")
core = []
for title, name, key, ref, lower in rows:
    r = {x["transport"]: x for x in load(name)["results"]}
    s = r["shortcut"]
    refs = ""
    if ref and ref in r:
        refs = f"{refname[ref]} {r[ref][key]:.3g} (shortcut = {s[key] / r[ref][key]:.2f}x)"
    print(f"| {title} | {r['tcp'][key]:.3g} | {r['unix'][key]:.3g} | {s[key]:.3g} | "
          f"{s[key + '_min']:.3g}–{s[key + '_max']:.3g} | "
          f"{s['ratio_to_tcp']:.3g}x | {s['ratio_to_unix']:.3g}x | {refs} |")
    core.append({"id": "core_" + name, "title": "core: " + title, "lower_is_better": lower,
                 "unit": "µs" if lower else "GB/s",
                 "median": {"tcp": r["tcp"][key], "unix": r["unix"][key], "shortcut": s[key],
                            "reference": r[ref][key] if ref and ref in r else None},
                 "reference_name": refname.get(ref),
                 "ratio_to_tcp": s["ratio_to_tcp"], "ratio_to_unix": s["ratio_to_unix"],
                 "unix_ratio_to_tcp": r["unix"]["ratio_to_tcp"], "target": None,
                 "perf": load(name)})
print("\nRatios are shortcut's figure divided by the other transport's (for round trips, lower is faster); "
      "min–max: shortcut's lowest and highest repetition. Physical references: the same run, "
      "alternating with the transports.")
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
           "machine": platform.machine(), "kernel": platform.release(), "reps": int(reps),
           "core": core}, open(jout, "w"), indent=1)
PY

# --- 1b. device memory: shortcut perf devmem ------------------------------
dsecs=()
[ -n "$quick" ] && dsecs=(--seconds 0.5)
echo "running: shortcut perf devmem --reps $reps ${dsecs[*]}" >&2
if build/shortcut perf devmem --reps "$reps" "${dsecs[@]}" --json > "$tmp/devmem.json"; then
	python3 - "$tmp/devmem.json" "$out/latest.json" "${dsecs[1]:-1}" "$reps" >> "$out/latest.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = {x["transport"]: x for x in rows}
print(f"\n## Device memory (`shortcut perf devmem`): 1 MiB messages, medians of {sys.argv[4]} runs "
      f"of {sys.argv[3]} s, receivers sleep (SHORTCUT_SPIN_US=0)\n")
print("| transport | GB/s | vs TCP | receiver CPU s per GB | receiver CPU vs shortcut copy |")
print("|---|---|---|---|---|")
label = {"tcp": "kernel TCP", "shortcut": "shortcut, copy (`recv`)",
         "devmem": "shortcut devmem, payload left in the region", "devmem_read": "shortcut devmem, receiver reads each fragment"}
for t in ("tcp", "shortcut", "devmem", "devmem_read"):
    x = r[t]
    rel = x["rx_cpu_s_per_gb"] / r["shortcut"]["rx_cpu_s_per_gb"] if r["shortcut"]["rx_cpu_s_per_gb"] else 0
    print(f"| {label[t]} | {x['gbytes_per_s']:.2f} | {x['ratio_to_tcp']:.2f}x | {x['rx_cpu_s_per_gb']:.4f} | {rel:.2f}x |")
d, c = r["devmem"], r["shortcut"]
thr = d["gbytes_per_s"] / c["gbytes_per_s"] if c["gbytes_per_s"] else 0
cpu = d["rx_cpu_s_per_gb"] / c["rx_cpu_s_per_gb"] if c["rx_cpu_s_per_gb"] else float("inf")
ok = lambda b: "pass" if b else "**miss**"
print(f"\nIssue 24's targets, devmem (payload left in the region) against shortcut's copy path: "
      f"throughput {thr:.2f}x (target >= 1.0x: {ok(thr >= 1.0)}), receiver CPU {cpu:.2f}x "
      f"(target <= 0.2x: {ok(cpu <= 0.2)}).")
print("\nThe devmem receiver binds a 64 MiB memfd region and gets fragment tokens (`SCM_DEVMEM_DMABUF`), "
      "returns them (`SO_DEVMEM_DONTNEED`); its CPU is what receiving costs when the payload is consumed "
      "where it lies (a GPU, a parser that works in place).")
j = json.load(open(sys.argv[2]))
j["devmem"] = rows
json.dump(j, open(sys.argv[2], "w"), indent=1)
PY
else
	status=1
	printf '\n## Device memory\n\n`shortcut perf devmem` failed.\n' >> "$out/latest.md"
fi

# --- 2. unmodified programs: kernel TCP, Unix socket, shortcut run ---------
{
	echo
	echo "## Unmodified programs: kernel TCP, Unix socket, \`shortcut run\`"
	echo
	python3 bench/interposed.py build "$reps" $quick --json "$out/latest.json" || status=$?
} >> "$out/latest.md"

# --- 2b. never slower than kernel TCP (issues 12 and 24) -------------------
{
	echo
	echo "## Never slower than kernel TCP (issues 12 and 24): kernel TCP, sockmap, Unix socket, \`shortcut run\`"
	echo
	floor=(python3 bench/interposed.py build "$reps" $quick --set floor --json "$out/latest.json")
	# in a network namespace of its own: no connection tracking there
	# (the container engines load it, it follows loopback too, and these
	# rows' 10,000 connections a second filled its table: dropped SYNs,
	# one-second stalls in kernel TCP's runs and shortcut's alike)
	if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null && command -v ip >/dev/null; then
		echo "Run in a network namespace of its own (\`unshare -n\`, loopback up), where no connection tracking follows loopback (\`docs/profile.md\`, seventh pass)."
		echo
		unshare -n sh -c 'ip link set lo up && exec "$@"' sh "${floor[@]}" || status=$?
	else
		"${floor[@]}" || status=$?
	fi
} >> "$out/latest.md"

# --- 2c. applications (issue 25): kernel TCP vs shortcut run --------------
{
	echo
	echo "## Applications (issue 25): kernel TCP, \`shortcut run\`"
	echo
	python3 bench/apps.py build "$reps" $quick --json "$out/latest.json" || status=$?
} >> "$out/latest.md"

# --- 3. readiness: asyncio echo, epoll with 10,000 idle connections -------
{
	echo
	python3 bench/readiness.py build "$reps" $quick || status=$?
} >> "$out/latest.md"

# --- 4. calls the interposer does not accelerate: its cost -----------------
if cc -O2 -o build/bench/passthrough bench/passthrough.c 2>/dev/null; then
	python3 - build "$reps" >> "$out/latest.md" <<'PY' || status=$?
import os, statistics, subprocess, sys, tempfile
build, reps = sys.argv[1], int(sys.argv[2])
exe = os.path.join(build, "bench", "passthrough")
runs = {"plain": {}, "shortcut": {}}
for i in range(max(reps, 5)):
    for mode in (("plain", "shortcut") if i % 2 == 0 else ("shortcut", "plain")):
        cmd = [exe, "300000"]
        env = dict(os.environ)
        if mode == "shortcut":
            env["SHORTCUT_RUNDIR"] = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            cmd = [os.path.join(build, "shortcut"), "run"] + cmd
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120).stdout
        for line in out.splitlines():
            name, ns = line.split()
            runs[mode].setdefault(name, []).append(float(ns))
names = {"pipe_write_read": "pipe: write or read of 1 byte", "unix_send_recv": "Unix socket pair: send or recv of 1 byte",
         "poll_1fd": "poll(), one pipe fd, timeout 0", "epoll_wait_0": "epoll_wait(), one pipe fd, timeout 0",
         "fcntl_getfl": "fcntl(F_GETFL) on a pipe"}
print("\n## Calls that are not accelerated: the interposer's cost\n")
print("| call (ns per call, median) | plain | under `shortcut run` | difference | ratio |")
print("|---|---|---|---|---|")
for k, label in names.items():
    a, b = statistics.median(runs["plain"][k]), statistics.median(runs["shortcut"][k])
    print(f"| {label} | {a:.0f} | {b:.0f} | {b - a:+.0f} | {b / a:.2f}x |")
print(f"\n`bench/passthrough.c`, 300,000 iterations per call kind, {max(reps, 5)} runs each way, alternating. "
      "Each call on an fd the interposer does not track costs one table load before it goes to libc; "
      "the differences are within the run-to-run noise of these system calls.")
PY
fi

# --- 5. containers: redis-benchmark between two containers (issue 22) -------
python3 bench/containers.py redis "$reps" $quick --json "$out/latest.json" >> "$out/latest.md" ||
	status=$?

# --- 6. many cores (seed 002): nginx, redis, Go pairs, N = 1, 2, 4..
# up to the CPUs present (bench/scaling.sh; on a 16-core machine:
# bench/results/scaling-16core.md)
{ echo; bench/scaling.sh --reps "$reps" --secs "$([ -n "$quick" ] && echo 1 || echo 2)"; } \
	>> "$out/latest.md" 2> "$tmp/scaling.err" || { status=1; tail -5 "$tmp/scaling.err" >&2; }

# --- chart ------------------------------------------------------------------
if [ -n "$plotpy" ]; then
	"$plotpy" bench/plot.py "$out/latest.json" "$out/latest.png" &&
		printf '\nChart: `bench/results/latest.png` (speed-up over kernel TCP, log scale).\n' >> "$out/latest.md"
else
	echo "matplotlib not available: no chart" >&2
fi
elapsed=$(( $(date +%s) - start ))
printf '\nThe whole benchmark (%s) took %d min %02d s.\n' "${quick:-full}" $((elapsed / 60)) $((elapsed % 60)) >> "$out/latest.md"
# CPU time of the whole machine against that of the benchmark's processes:
# another workload on the same vCPUs depresses every figure that needs two
# CPUs at once (spinning ping-pong most), as the physical references show
times > "$tmp/times"   # the builtin, in this shell: children's user and system time
python3 - "$tmp/stat0" "$(tail -1 "$tmp/times")" "$elapsed" >> "$out/latest.md" <<'PY'
import os, re, sys
hz = os.sysconf("SC_CLK_TCK")
def busy(line):
    f = [int(x) for x in line.split()[1:]]
    # user nice system idle iowait irq softirq steal
    return sum(f[:3]) + f[5] + f[6], f[7]
b0, s0 = busy(open(sys.argv[1]).read())
b1, s1 = busy(open("/proc/stat").readline())
m = re.findall(r"(\d+)m([0-9.]+)s", sys.argv[2])
ours = sum(int(a) * 60 + float(b) for a, b in m)
el = max(float(sys.argv[3]), 1)
allb, steal = (b1 - b0) / hz, (s1 - s0) / hz
other = max(allb - ours, 0)
ncpu = os.cpu_count()
print(f"\nMachine during the run: {allb:.0f} CPU-s busy of {ncpu * el:.0f} ({ncpu} vCPUs x {el:.0f} s), "
      f"{ours:.0f} CPU-s in the benchmark's own processes, {other:.0f} CPU-s elsewhere (other programs, "
      f"kernel threads such as ksoftirqd: {other / el:.0%} of one vCPU on average); steal {steal:.0f} s.")
if other / el > 0.15:
    print("**Something else was running**: figures that need both vCPUs at once (spinning ping-pong, "
          "request/response with spin, sockperf pp) are depressed; the physical references of the same "
          "run show by how much.")
PY
cat "$out/latest.md"
[ "$status" = 0 ] || echo "bench: some runs failed (see the notes under the table)" >&2
exit "$status"
