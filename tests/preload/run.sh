#!/bin/sh
# SPDX-License-Identifier: MIT
# Preload oracle tests: every tests/preload/<family>/sem_*.c runs once on
# kernel TCP and once under `shortcut run`; the two transcripts must be
# identical and (unless the source says `// expect: tcp`) the run's stats
# must show both ends accelerated (conns_accelerated >= 2); `// expect:
# switched N` also wants N connection halves switched back to TCP
# (conns_switched_to_tcp).
#
# `// expect: xfail REASON` marks a known gap: the program runs all the
# same; if shortcut fails it (its exit, its transcript, its stats) it is
# reported XFAIL and does not fail the run; if it passes it is reported
# XPASS and fails the run (the gap is closed: remove the marker).  A program
# that does not compile, or fails on kernel TCP, fails whatever its marker.
#
# `// env: NAME=VALUE ...` sets those variables for the run under shortcut
# (settings such as SHORTCUT_RMEM; the kernel TCP run has none).
#
# The helpers (common.c, epoll_common.c, spawn_common.c, exec_common.c) are
# compiled once into BUILD_DIR/preload/libsem.a, which every program links
# with.
#
#   tests/preload/run.sh BUILD_DIR [NAME...]
# NAME: a program (sem_dup, sem_dup.c, setup/sem_dup, a path to it) or a
# family (setup, epoll, ...: all its programs); none: every program.
#   e.g.  tests/preload/run.sh build sem_dup      tests/preload/run.sh build epoll
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

# the programs: every family's, or those named
if [ $# -gt 0 ]; then
	SRCS=
	for n in "$@"; do
		n=${n%.c}
		if [ -d "$HERE/${n#tests/preload/}" ]; then        # a family
			found=$(ls "$HERE/${n#tests/preload/}"/sem_*.c 2>/dev/null)
		else
			found=$(ls "$HERE"/*/"$(basename "$n")".c 2>/dev/null)
		fi
		if [ -z "$found" ]; then
			echo "run.sh: no program or family $n in $HERE" >&2
			exit 2
		fi
		SRCS="$SRCS $found"
	done
else
	SRCS=$(ls "$HERE"/*/sem_*.c)
fi
# names are unique across families (the binaries share one directory)
dup=$(ls "$HERE"/*/sem_*.c | sed 's|.*/||' | sort | uniq -d)
if [ -n "$dup" ]; then
	echo "run.sh: a name in two families: $dup" >&2
	exit 2
fi

# the helpers, once
LIB=$OUT/libsem.a
rm -f "$LIB"
HELPERS="common epoll_common spawn_common exec_common"
for c in $HELPERS; do
	$CC $CFLAGS_SEM -c -o "$OUT/$c.o" "$HERE/$c.c" || { echo "run.sh: $c.c does not compile" >&2; exit 1; }
done
ar rcs "$LIB" $(for c in $HELPERS; do echo "$OUT/$c.o"; done) || exit 1

pass=0
fail=0
xfail=0
failed=
xfailed=
for src in $SRCS; do
	name=$(basename "$src" .c)
	family=$(basename "$(dirname "$src")")
	bin=$OUT/$name
	why=
	hard=           # a failure no marker excuses
	if ! $CC $CFLAGS_SEM -o "$bin" "$src" "$LIB" 2>"$bin.cc.err"; then
		why="does not compile"
		hard=1
		cat "$bin.cc.err"
	else
		# kernel TCP: no interposer, no shortcut settings
		env -u LD_PRELOAD timeout -s KILL "$LIMIT" "$bin" >"$bin.tcp.out" 2>"$bin.tcp.err"
		rc_tcp=$?
		rundir=$(mktemp -d)
		vars=$(sed -n 's|^// env: *||p' "$src" | head -n 1)
		if [ -n "${SC_PRELOAD:-}" ]; then
			# a sanitizer build of the interposer: its runtime first
			env $vars SHORTCUT_RUNDIR="$rundir" LD_PRELOAD="$SC_PRELOAD" \
				timeout -s KILL "$LIMIT" "$bin" >"$bin.shm.out" 2>"$bin.shm.err"
		else
			env $vars SHORTCUT_RUNDIR="$rundir" timeout -s KILL "$LIMIT" \
				"$SHORTCUT" run "$bin" >"$bin.shm.out" 2>"$bin.shm.err"
		fi
		rc_shm=$?
		stats=$(SHORTCUT_RUNDIR=$rundir "$SHORTCUT" stats --json 2>&1)
		rm -rf "$rundir"
		accel=$(printf '%s\n' "$stats" | sed -n 's/.*"conns_accelerated": *\([0-9][0-9]*\).*/\1/p')
		switched=$(printf '%s\n' "$stats" | sed -n 's/.*"conns_switched_to_tcp": *\([0-9][0-9]*\).*/\1/p')
		if [ $rc_tcp -ne 0 ]; then
			why="exit $rc_tcp on kernel TCP"
			hard=1
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
	xf=$(sed -n 's|^// expect: xfail *||p' "$src" | head -n 1)
	if grep -q '^// expect: xfail' "$src" && [ -z "$xf" ]; then
		xf="(no reason given)"
	fi
	if [ -n "$xf" ] && [ -z "$hard" ]; then
		if [ -n "$why" ]; then
			echo "XFAIL $family/$name: $xf ($why)"
			xfail=$((xfail + 1))
			xfailed="$xfailed $name"
		else
			echo "XPASS $family/$name: passes, yet marked '// expect: xfail $xf': the gap is closed, remove the marker"
			fail=$((fail + 1))
			failed="$failed $name"
		fi
	elif [ -z "$why" ]; then
		echo "PASS $family/$name"
		pass=$((pass + 1))
	else
		echo "FAIL $family/$name: $why"
		fail=$((fail + 1))
		failed="$failed $name"
	fi
done
echo "$pass passed, $fail failed, $xfail expected failures${failed:+ (failed:$failed)}${xfailed:+ (xfail:$xfailed)}"
[ $fail -eq 0 ]
