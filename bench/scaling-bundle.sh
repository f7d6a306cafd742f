#!/bin/bash
# SPDX-License-Identifier: MIT
# A bundle for bench/scaling.sh on another machine (one lent for a scaling
# run, with nothing installed and no network): nginx, wrk, redis-server,
# redis-benchmark, shortcut and libshortcut.so with every library they
# load and the loader itself, so they run with this machine's C library
# whatever that machine has; with Go here, bench/go and bench/echo.c too
# (gobench linked to ask for the bundle's loader at /tmp/scb/lib, which
# scaling.sh links to the bundle: a Go program run through the loader
# would not be found to be one).
#   bench/scaling-bundle.sh DIR     then there: SC_BUNDLE=DIR bench/scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
d=${1:?usage: bench/scaling-bundle.sh DIR}
rm -rf "$d" && mkdir -p "$d/bin" "$d/lib" && d=$(cd "$d" && pwd)
bins=(build/shortcut)
for p in nginx wrk redis-server redis-benchmark; do
	b=$(command -v "$p" || echo "/usr/sbin/$p")
	[ -x "$b" ] || { echo "scaling-bundle: $p not installed" >&2; exit 1; }
	bins+=("$b")
done
if command -v go >/dev/null && [ -x build/bench/echo ]; then
	(cd bench/go && CGO_ENABLED=1 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off \
		GOCACHE="$PWD/../../build/bench/gocache" go build \
		-ldflags "-I /tmp/scb/lib/ld-linux-x86-64.so.2 -r /tmp/scb/lib" -o "$d/gobench" .)
	bins+=("$d/gobench" build/bench/echo)
fi
for b in "${bins[@]}" build/libshortcut.so; do
	[[ $b == *.so ]] || cp -L "$b" "$d/bin/"
	ldd "$b" | awk '/=> \// {print $3} /^\t\/lib/ {print $1}' | while read -r l; do
		cp -Ln "$l" "$d/lib/"
	done
done
rm -f "$d/gobench"
# shortcut run looks for the library beside its binary, and run through
# the loader, beside the loader
cp -L build/libshortcut.so "$d/bin/" && cp -L build/libshortcut.so "$d/lib/"
du -sh "$d" >&2
