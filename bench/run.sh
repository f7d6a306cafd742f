#!/bin/bash
# SPDX-License-Identifier: MIT
# make bench: the side-by-side benchmark of the connection core (kernel TCP,
# Unix socket, shortcut, physical references), medians of several runs,
# written to bench/results/latest.md and printed.
#   bench/run.sh [--reps N]      (default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=7
[ "${1:-}" = "--reps" ] && reps=$2
ireps=$(( reps < 5 ? reps : 5 ))
out=bench/results
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # name, perf arguments...
	local name=$1
	shift
	echo "running: shortcut perf $* --reps $reps" >&2
	build/shortcut perf "$@" --reps "$reps" --json > "$tmp/$name.json"
}
run pp_spin pingpong --size 64
run pp_nospin pingpong --size 64 --spin-us 0
run st_spin stream --size 65536
run st_nospin stream --size 65536 --spin-us 0
python3 - "$tmp" "$reps" > "$out/latest.md" <<'PY'
import json, sys, os, platform, datetime
d, reps = sys.argv[1], sys.argv[2]
def load(n): return json.load(open(os.path.join(d, n + ".json")))
rows = [("ping-pong 64 B, spinning (round trip, µs; lower is better)", "pp_spin", "rtt_us", "shm"),
        ("ping-pong 64 B, no spin (round trip, µs)", "pp_nospin", "rtt_us", None),
        ("stream 64 KiB messages, spinning (GB/s; higher is better)", "st_spin", "gbytes_per_s", "memcpy"),
        ("stream 64 KiB messages, no spin (GB/s)", "st_nospin", "gbytes_per_s", None)]
print(f"# shortcut perf — {datetime.date.today()}, {os.cpu_count()} CPUs, {platform.machine()}, medians of {reps} runs\n")
print("| workload | kernel TCP | Unix socket | shortcut | shortcut vs TCP | shortcut vs Unix | physical reference |")
print("|---|---|---|---|---|---|---|")
for title, name, key, ref in rows:
    r = {x["transport"]: x for x in load(name)["results"]}
    s = r["shortcut"]
    refs = ""
    if ref and ref in r:
        refs = f"{ref} {r[ref][key]:.3g} (shortcut = {s[key] / r[ref][key]:.2f}x)"
    print(f"| {title} | {r['tcp'][key]:.3g} | {r['unix'][key]:.3g} | {s[key]:.3g} | "
          f"{s['ratio_to_tcp']:.3g}x | {s['ratio_to_unix']:.3g}x | {refs} |")
print("\nRatios are shortcut's figure divided by the other transport's (for round trips, lower is faster).")
PY
# unmodified programs through the interposer (shortcut run), same machine
{
	echo
	echo "## Unmodified programs: kernel TCP vs \`shortcut run\`"
	echo
	python3 bench/interposed.py build "$ireps"
} >> "$out/latest.md"
cat "$out/latest.md"
