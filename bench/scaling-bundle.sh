#!/bin/bash
# SPDX-License-Identifier: MIT
# A bundle for bench/scaling.sh on another machine (one lent for a scaling
# run, with nothing installed and no network): nginx, wrk, redis-server,
# redis-benchmark, shortcut and libshortcut.so with every library they
# load and the loader itself, so they run with this machine's C library
# whatever that machine has.
#   bench/scaling-bundle.sh DIR     then there: SC_BUNDLE=DIR bench/scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
d=${1:?usage: bench/scaling-bundle.sh DIR}
rm -rf "$d" && mkdir -p "$d/bin" "$d/lib"
bins=(build/shortcut)
for p in nginx wrk redis-server redis-benchmark; do
	b=$(command -v "$p" || echo "/usr/sbin/$p")
	[ -x "$b" ] || { echo "scaling-bundle: $p not installed" >&2; exit 1; }
	bins+=("$b")
done
for b in "${bins[@]}" build/libshortcut.so; do
	[[ $b == *.so ]] || cp -L "$b" "$d/bin/"
	ldd "$b" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r l; do
		cp -Ln "$l" "$d/lib/"
	done
done
# shortcut run looks for the library beside its binary, and run through
# the loader, beside the loader
cp -L build/libshortcut.so "$d/bin/" && cp -L build/libshortcut.so "$d/lib/"
du -sh "$d" >&2
