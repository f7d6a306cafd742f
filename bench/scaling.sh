#!/bin/bash
# SPDX-License-Identifier: MIT
# Many cores (seed 002): nginx and redis with N workers and N client
# connections, N = 1, 2, 4, ... up to the CPUs present, kernel TCP against
# shortcut (both ends under `shortcut run`), alternating, medians of the
# repetitions, the ratio at every N and shortcut's own scaling
# (throughput at N / (N x throughput at 1)).
#   nginx: worker_processes N, `wrk -tN -cN` (one keep-alive connection per
#          client thread), a small static file;
#   redis: N redis-server processes, one `redis-benchmark -c 1 -t get`
#          against each at once (redis serves a connection on one thread:
#          N servers is how it uses N cores), requests/s summed.
# Every shortcut run checks `shortcut stats` (each client connection
# accelerated), every run the client's own verdict (no socket or HTTP
# errors, every request answered).
#   bench/scaling.sh [--reps R] [--secs S] [--max N] [--json FILE]
# Markdown on stdout.  SC_BUNDLE=DIR runs the programs from a bundle made by
# bench/scaling-bundle.sh (bin/, lib/ with its own loader: a machine without
# them installed, or with another C library).
set -uo pipefail
cd "$(dirname "$0")/.."
reps=5
secs=3
max=$(nproc)
json=
while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift ;;
	--secs) secs=$2; shift ;;
	--max) max=$2; shift ;;
	--json) json=$2; shift ;;
	*) echo "usage: bench/scaling.sh [--reps R] [--secs S] [--max N] [--json FILE]" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "${SC_BUNDLE:-}" ]; then
	B=$(cd "$SC_BUNDLE" && pwd)
	# the bundle's own loader and libraries: the same C library as the
	# preloaded libshortcut.so, whatever the host has (the loader runs
	# shortcut too: it finds the library beside /proc/self/exe, lib/)
	prog() { echo "$B/lib/ld-linux-x86-64.so.2 --library-path $B/lib $B/bin/$1"; }
else
	prog() { case $1 in shortcut) echo "$PWD/build/shortcut" ;;
		 *) command -v "$1" 2>/dev/null || echo "/usr/sbin/$1" ;; esac; }
fi
for p in shortcut nginx wrk redis-server redis-benchmark; do
	set -- $(prog $p)
	[ -x "$1" ] || { echo "scaling: $p not found ($1)" >&2; exit 1; }
done
read -ra SC <<< "$(prog shortcut)"
tmp=$(mktemp -d)
cleanup() { pkill -KILL -f "$tmp/" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
user=$(id -un)
ulimit -n 65536 2>/dev/null || true

wait_port() {  # port: until something accepts there (5 s)
	local i
	for i in $(seq 500); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.01
	done
	return 1
}
# run a program, under shortcut run for the shortcut variant
run_v() {  # variant prog args...
	local v=$1 pr pre=()
	read -ra pr <<< "$(prog "$2")"
	shift 2
	# a client's bound (TMO seconds): a stuck run fails, the bench goes on
	[ -n "${TMO:-}" ] && pre=(timeout -k 5 "$TMO")
	# exec: a background run's pid is the program's (a non-interactive
	# shell's background job ignores SIGQUIT and SIGINT)
	if [ "$v" = shortcut ]; then
		exec "${pre[@]}" "${SC[@]}" run -- "${pr[@]}" "$@"
	else
		exec "${pre[@]}" "${pr[@]}" "$@"
	fi
}
# every client connection of a shortcut run must have gone on shared memory
check_accel() {  # rundir minimum
	local n
	n=$(SHORTCUT_RUNDIR=$1 "${SC[@]}" stats --json | sed -n 's/.*"conns_accelerated": \([0-9]*\).*/\1/p')
	[ "${n:-0}" -ge "$2" ] || { echo "accelerated ${n:-0} < $2" >&2; return 1; }
}

nginx_run() {  # variant N -> requests/s on stdout
	local v=$1 n=$2 d="$tmp/ng-$v-$n-$RANDOM" port=$((20000 + RANDOM % 20000)) out pid
	mkdir -p "$d/html" && head -c 612 /dev/zero | tr '\0' x > "$d/html/index.html"
	cat > "$d/nginx.conf" <<EOF
$( [ "$(id -u)" = 0 ] && echo "user $user;" )
worker_processes $n;
worker_rlimit_nofile 65536;
pid $d/nginx.pid;
error_log $d/error.log;
events { worker_connections 4096; }
http {
  access_log off; sendfile on; keepalive_requests 100000000; keepalive_timeout 65;
  client_body_temp_path $d; proxy_temp_path $d; fastcgi_temp_path $d;
  uwsgi_temp_path $d; scgi_temp_path $d;
  server { listen 127.0.0.1:$port backlog=4096 reuseport; root $d/html; }
}
EOF
	export SHORTCUT_RUNDIR="$d/rd"
	run_v "$v" nginx -p "$d" -c "$d/nginx.conf" -g 'daemon off;' >"$d/nginx.out" 2>&1 &
	pid=$!
	wait_port "$port" || { echo "nginx did not start: $(tail -3 "$d/error.log" "$d/nginx.out")" >&2; kill -KILL $pid; return 1; }
	out=$(TMO=$((secs + 30)) run_v "$v" wrk -t"$n" -c"$n" -d"${secs}s" "http://127.0.0.1:$port/index.html" 2>&1)
	kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
	if echo "$out" | grep -q "Socket errors\|Non-2xx"; then echo "wrk: $out" >&2; return 1; fi
	[ "$v" = tcp ] || check_accel "$d/rd" "$n" || return 1
	echo "$out" | awk '/^Requests\/sec/ {print $2}'
}

redis_run() {  # variant N -> requests/s (sum) on stdout
	local v=$1 n=$2 d="$tmp/rd-$v-$n-$RANDOM" base=$((20000 + RANDOM % 20000)) i pids=() total reqs
	mkdir -p "$d"
	export SHORTCUT_RUNDIR="$d/rd"
	for i in $(seq 0 $((n - 1))); do
		run_v "$v" redis-server --port $((base + i)) --save '' --appendonly no --dir "$d" \
			>"$d/srv$i.log" 2>&1 &
		pids+=($!)
	done
	for i in $(seq 0 $((n - 1))); do
		wait_port $((base + i)) || { echo "redis $i did not start" >&2; kill -KILL "${pids[@]}"; return 1; }
	done
	# about secs seconds of kernel TCP at ~40,000 requests/s per pair
	reqs=$((secs * 40000))
	local cl=()
	for i in $(seq 0 $((n - 1))); do
		TMO=$((secs * 10 + 30)) run_v "$v" redis-benchmark -p $((base + i)) -c 1 -n $reqs -t get -d 64 -q --csv \
			>"$d/bench$i.out" 2>&1 &
		cl+=($!)
	done
	wait "${cl[@]}"
	kill -TERM "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
	total=0
	for i in $(seq 0 $((n - 1))); do
		r=$(sed -n 's/^"GET","\([0-9.]*\)".*/\1/p' "$d/bench$i.out")
		[ -n "$r" ] || { echo "redis-benchmark $i: $(tail -2 "$d/bench$i.out")" >&2; return 1; }
		total=$(awk -v a="$total" -v b="$r" 'BEGIN {print a + b}')
	done
	[ "$v" = tcp ] || check_accel "$d/rd" "$n" || return 1
	echo "$total"
}

median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

ns=()
n=1
while [ "$n" -le "$max" ]; do ns+=("$n"); n=$((n * 2)); done
[ "${ns[-1]}" = "$max" ] || ns+=("$max")
echo "scaling: N = ${ns[*]}, $reps repetitions of $secs s" >&2
declare -A S   # S[workload-variant-N] = samples, one a line
fail=0
for n in "${ns[@]}"; do
	for r in $(seq "$reps"); do
		# alternate which transport goes first
		order=(tcp shortcut); [ $((r % 2)) = 0 ] && order=(shortcut tcp)
		for w in nginx redis; do
			for v in "${order[@]}"; do
				x=$(${w}_run "$v" "$n") || { echo "FAILED: $w $v N=$n" >&2; fail=1; continue; }
				S[$w-$v-$n]+="$x"$'\n'
				echo "  $w N=$n $v: $x" >&2
			done
		done
	done
done

med() { printf '%s' "${S[$1]:-}" | grep . | median; }
echo "## Many cores: N workers, N client connections ($(nproc) CPUs, $(uname -r))"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); medians of $reps alternating runs of $secs s; requests/s."
echo
echo "| N | nginx TCP | nginx shortcut | ratio | shortcut scaling | redis TCP | redis shortcut | ratio | shortcut scaling |"
echo "|---|---|---|---|---|---|---|---|---|"
ng1=$(med nginx-shortcut-1); rd1=$(med redis-shortcut-1)
for n in "${ns[@]}"; do
	awk -v n="$n" -v nt="$(med nginx-tcp-$n)" -v ns="$(med nginx-shortcut-$n)" -v n1="$ng1" \
	    -v rt="$(med redis-tcp-$n)" -v rs="$(med redis-shortcut-$n)" -v r1="$rd1" 'BEGIN {
		printf "| %d | %.0f | %.0f | %.2fx | %.2f | %.0f | %.0f | %.2fx | %.2f |\n",
			n, nt, ns, (nt > 0 ? ns / nt : 0), (n1 > 0 ? ns / (n * n1) : 0),
			rt, rs, (rt > 0 ? rs / rt : 0), (r1 > 0 ? rs / (n * r1) : 0) }'
done
echo
echo "Ratio: shortcut / kernel TCP at that N (goal >= 2x). Scaling: shortcut's throughput at N / (N x its throughput at 1) (1.00 = linear)."
if [ -n "$json" ]; then
	{
		echo "{\"cpus\": $(nproc), \"reps\": $reps, \"secs\": $secs, \"samples\": {"
		first=1
		for k in "${!S[@]}"; do
			[ $first = 1 ] || echo ","
			first=0
			printf '"%s": [%s]' "$k" "$(printf '%s' "${S[$k]}" | grep . | paste -sd,)"
		done
		echo "}}"
	} > "$json"
fi
exit $fail
