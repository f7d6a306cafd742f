#!/bin/sh
# SPDX-License-Identifier: MIT
# Preload oracle tests: every tests/preload/sem_*.c runs once on kernel TCP
# and once under `shortcut run`; the two transcripts must be identical and
# (unless the source says `// expect: tcp`) the run's stats must show both
# ends accelerated (conns_accelerated >= 2); `// expect: switched N` also
# wants N connection halves switched back to TCP (conns_switched_to_tcp).
#
#   tests/preload/run.sh BUILD_DIR [NAME...]     e.g.  tests/preload/run.sh build sem_dup
# SC_PRELOAD=... replaces `shortcut run` with that LD_PRELOAD list (the
# sanitizer build: make test-preload-asan).
set -u

BUILD=${1:-build}
[ $# -gt 0 ] && shift
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$BUILD" && pwd) || { echo "run.sh: no build directory" >&2; exit 1; }
SHORTCUT=$BUILD/shortcut
OUT=$BUILD/preload
CC=${CC:-cc}
CFLAGS_SEM="-iquote $HERE -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -pthread"
LIMIT=${SEM_TIMEOUT:-30}

[ -x "$SHORTCUT" ] || { echo "run.sh: $SHORTCUT missing (make first)" >&2; exit 1; }
mkdir -p "$OUT"

if [ $# -gt 0 ]; then
	SRCS=
	for n in "$@"; do SRCS="$SRCS $HERE/${n%.c}.c"; done
else
	SRCS=$(ls "$HERE"/sem_*.c)
fi

pass=0
fail=0
failed=
for src in $SRCS; do
	name=$(basename "$src" .c)
	bin=$OUT/$name
	why=
	if ! $CC $CFLAGS_SEM -o "$bin" "$src" 2>"$bin.cc.err"; then
		why="does not compile"
		cat "$bin.cc.err"
	else
		# kernel TCP: no interposer, no shortcut settings
		env -u LD_PRELOAD timeout -s KILL "$LIMIT" "$bin" >"$bin.tcp.out" 2>"$bin.tcp.err"
		rc_tcp=$?
		rundir=$(mktemp -d)
		if [ -n "${SC_PRELOAD:-}" ]; then
			# a sanitizer build of the interposer: its runtime first
			SHORTCUT_RUNDIR=$rundir LD_PRELOAD=$SC_PRELOAD timeout -s KILL "$LIMIT" \
				"$bin" >"$bin.shm.out" 2>"$bin.shm.err"
		else
			SHORTCUT_RUNDIR=$rundir timeout -s KILL "$LIMIT" "$SHORTCUT" run "$bin" \
				>"$bin.shm.out" 2>"$bin.shm.err"
		fi
		rc_shm=$?
		stats=$(SHORTCUT_RUNDIR=$rundir "$SHORTCUT" stats --json 2>&1)
		rm -rf "$rundir"
		accel=$(printf '%s\n' "$stats" | sed -n 's/.*"conns_accelerated": *\([0-9][0-9]*\).*/\1/p')
		switched=$(printf '%s\n' "$stats" | sed -n 's/.*"conns_switched_to_tcp": *\([0-9][0-9]*\).*/\1/p')
		if [ $rc_tcp -ne 0 ]; then
			why="exit $rc_tcp on kernel TCP"
			sed 's/^/  tcp stderr: /' "$bin.tcp.err"
		elif [ $rc_shm -ne 0 ]; then
			why="exit $rc_shm under shortcut run"
			sed 's/^/  shm stderr: /' "$bin.shm.err"
		fi
		if ! cmp -s "$bin.tcp.out" "$bin.shm.out"; then
			why="${why:+$why; }transcripts differ (--- kernel TCP, +++ shortcut)"
			diff -u --label "kernel TCP" --label "shortcut" "$bin.tcp.out" "$bin.shm.out"
		fi
		if ! grep -q '^// expect: tcp' "$src" && [ "${accel:-0}" -lt 2 ]; then
			why="${why:+$why; }conns_accelerated=${accel:-?} (want >= 2): $stats"
		fi
		# `// expect: switched N`: N connection halves went back to TCP
		want_sw=$(sed -n 's|^// expect: switched \([0-9][0-9]*\).*|\1|p' "$src")
		if [ -n "$want_sw" ] && [ "${switched:-0}" -ne "$want_sw" ]; then
			why="${why:+$why; }conns_switched_to_tcp=${switched:-?} (want $want_sw): $stats"
		fi
	fi
	if [ -z "$why" ]; then
		echo "PASS $name"
		pass=$((pass + 1))
	else
		echo "FAIL $name: $why"
		fail=$((fail + 1))
		failed="$failed $name"
	fi
done
echo "$pass passed, $fail failed${failed:+ (failed:$failed)}"
[ $fail -eq 0 ]
