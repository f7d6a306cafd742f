#!/bin/bash
# SPDX-License-Identifier: MIT
# Many cores (seed 002): N servers' worth of work and N client connections,
# N = 1, 2, 4, ... up to the CPUs present, kernel TCP against shortcut
# (both ends under `shortcut run`), alternating, medians of the
# repetitions, the ratio at every N and shortcut's own scaling
# (throughput at N / (N x throughput at 1)).  Workloads:
#   nginx:     worker_processes N, `wrk -tN -cN` (one keep-alive connection
#              per client thread), a small static file;
#   redis:     N redis-server processes, one `redis-benchmark -c 1 -t get`
#              against each at once (redis serves a connection on one
#              thread: N servers is how it uses N cores), requests/s summed;
#   go_rr:     N pairs of bench/go (a goroutine per connection echoing with
#              io.Copy; the client's 100 B request/response), ops/s summed;
#   go_c_rr:   the same Go client against bench/echo.c, its C twin;
#   go_stream: N Go pairs streaming 64 KiB writes, GB/s summed.
# The Go workloads need build/bench/gobench and build/bench/echo (bench/run.sh
# builds them); without them they are left out.  Every shortcut run checks
# `shortcut stats` (each client connection accelerated), every run the
# client's own verdict (no socket or HTTP errors, every request answered).
#   bench/scaling.sh [--reps R] [--secs S] [--max N] [--ns "N ..."] [--only "W ..."] [--json FILE]
# Markdown on stdout.  SC_BUNDLE=DIR runs the programs from a bundle made by
# bench/scaling-bundle.sh (bin/, lib/ with its own loader: a machine without
# them installed, or with another C library).
set -uo pipefail
cd "$(dirname "$0")/.."
reps=5
secs=3
max=$(nproc)
json=
only=
nlist=
while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift ;;
	--secs) secs=$2; shift ;;
	--max) max=$2; shift ;;
	--json) json=$2; shift ;;
	--only) only=$2; shift ;;
	--ns) nlist=$2; shift ;;
	*) echo "usage: bench/scaling.sh [--reps R] [--secs S] [--max N] [--ns \"N ...\"] [--only \"W ...\"] [--json FILE]" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "${SC_BUNDLE:-}" ]; then
	B=$(cd "$SC_BUNDLE" && pwd)
	# the bundle's own loader and libraries: the same C library as the
	# preloaded libshortcut.so, whatever the host has (the loader runs
	# shortcut too: it finds the library beside /proc/self/exe, lib/)
	# a Go program is run as itself: through the loader its /proc/self/exe
	# and program headers would be the loader's, and its funnel not found
	# (the bundle's gobench asks for the loader at /tmp/scb/lib)
	ln -sfn "$B" /tmp/scb
	prog() { case $1 in gobench) echo "$B/bin/gobench" ;;
		 *) echo "$B/lib/ld-linux-x86-64.so.2 --library-path $B/lib $B/bin/$1" ;; esac; }
else
	prog() { case $1 in shortcut) echo "$PWD/build/shortcut" ;;
		 gobench|echo) echo "$PWD/build/bench/$1" ;;
		 *) command -v "$1" 2>/dev/null || echo "/usr/sbin/$1" ;; esac; }
fi
have() { local p; for p in "$@"; do set -- $(prog "$p"); [ -x "$1" ] || return 1; done; }
have shortcut || { echo "scaling: shortcut not found ($(prog shortcut))" >&2; exit 1; }
if [ -z "$only" ]; then
	only="nginx redis"
	have gobench echo && only+=" go_rr go_c_rr go_stream" ||
		echo "scaling: no build/bench/gobench or echo (bench/run.sh builds them): no Go rows" >&2
fi
for w in $only; do
	case $w in
	nginx) need=(nginx wrk) ;; redis) need=(redis-server redis-benchmark) ;;
	go_rr|go_stream) need=(gobench) ;; go_c_rr) need=(gobench echo) ;;
	*) echo "scaling: no workload $w (nginx redis go_rr go_c_rr go_stream)" >&2; exit 2 ;;
	esac
	have "${need[@]}" || { echo "scaling: $w needs ${need[*]}, not found" >&2; exit 1; }
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

# N pairs of bench/go's kind: N servers, then N clients at once for secs
gopairs_run() {  # variant N client server mode size field -> the field summed
	local v=$1 n=$2 client=$3 server=$4 mode=$5 size=$6 field=$7 d i pids=() cl=() total
	d="$tmp/go-$v-$n-$RANDOM"
	mkdir -p "$d"
	export SHORTCUT_RUNDIR="$d/rd"
	for i in $(seq 0 $((n - 1))); do
		run_v "$v" "$server" server tcp 127.0.0.1:0 >"$d/addr$i" 2>"$d/srv$i.log" &
		pids+=($!)
	done
	for i in $(seq 0 $((n - 1))); do
		for _ in $(seq 500); do grep -q : "$d/addr$i" 2>/dev/null && break; sleep 0.01; done
		grep -q : "$d/addr$i" || { echo "$server $i did not start: $(tail -2 "$d/srv$i.log")" >&2; kill -KILL "${pids[@]}"; return 1; }
	done
	for i in $(seq 0 $((n - 1))); do
		TMO=$((secs + 30)) run_v "$v" "$client" "$mode" tcp "$(head -1 "$d/addr$i")" "$secs" "$size" \
			>"$d/client$i.out" 2>&1 &
		cl+=($!)
	done
	wait "${cl[@]}"
	kill -KILL "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
	total=0
	for i in $(seq 0 $((n - 1))); do
		r=$(sed -n "s/.*\"$field\": *\([0-9.e+]*\).*/\1/p" "$d/client$i.out")
		[ -n "$r" ] || { echo "$client $mode $i: $(tail -2 "$d/client$i.out")" >&2; return 1; }
		total=$(awk -v a="$total" -v b="$r" 'BEGIN {print a + b}')
	done
	[ "$v" = tcp ] || check_accel "$d/rd" "$((2 * n))" || return 1
	echo "$total"
}
go_rr_run() { gopairs_run "$1" "$2" gobench gobench rr 100 ops_per_s; }
go_c_rr_run() { gopairs_run "$1" "$2" gobench echo rr 100 ops_per_s; }
go_stream_run() { gopairs_run "$1" "$2" gobench gobench stream 65536 gbytes_per_s; }

median() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

ns=()
n=1
while [ "$n" -le "$max" ]; do ns+=("$n"); n=$((n * 2)); done
[ "${ns[-1]}" = "$max" ] || ns+=("$max")
# --ns: those N only (the scaling column then wants N = 1 among them)
[ -n "$nlist" ] && read -ra ns <<< "$nlist"
echo "scaling: N = ${ns[*]}, $reps repetitions of $secs s" >&2
declare -A S   # S[workload-variant-N] = samples, one a line
fail=0
for n in "${ns[@]}"; do
	for r in $(seq "$reps"); do
		# alternate which transport goes first
		order=(tcp shortcut); [ $((r % 2)) = 0 ] && order=(shortcut tcp)
		for w in $only; do
			for v in "${order[@]}"; do
				x=$(${w}_run "$v" "$n") || { echo "FAILED: $w $v N=$n" >&2; fail=1; continue; }
				S[$w-$v-$n]+="$x"$'\n'
				echo "  $w N=$n $v: $x" >&2
			done
		done
	done
done

med() { printf '%s' "${S[$1]:-}" | grep . | median; }
unit() { case $1 in go_stream) echo "GB/s" ;; go_*) echo "round trips/s" ;; *) echo "requests/s" ;; esac; }
echo "## Many cores: N workers, N client connections ($(nproc) CPUs, $(uname -r))"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); medians of $reps alternating runs of $secs s."
echo
echo "| workload | N | TCP | shortcut | ratio | shortcut scaling |"
echo "|---|---|---|---|---|---|"
for w in $only; do
	s1=$(med "$w-shortcut-1")
	for n in "${ns[@]}"; do
		awk -v w="$w" -v u="$(unit "$w")" -v n="$n" -v t="$(med "$w-tcp-$n")" \
		    -v s="$(med "$w-shortcut-$n")" -v s1="$s1" 'BEGIN {
			f = (u == "GB/s") ? "%.2f" : "%.0f"
			printf "| %s (%s) | %d | " f " | " f " | %.2fx | %.2f |\n", w, u, n, t, s,
				(t > 0 ? s / t : 0), (s1 > 0 ? s / (n * s1) : 0) }'
	done
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
