#!/bin/bash
# SPDX-License-Identifier: MIT
# Run test programs, each in its own process with a time limit.
#   tests/run-tests.sh DIR TEST...      e.g. tests/run-tests.sh build/t test_stream
# TEST is a program (all its scenarios) or PROGRAM:SCENARIO[,SCENARIO...]
# (those only), e.g. test_halfclose:shut_rd; `DIR/PROGRAM --list` names them.
# Exit status 0 = pass, 77 = skip, anything else = fail.
# SC_TEST_SANITIZER=asan|tsan selects sanitizer runtime options.
set -u

if [ $# -lt 2 ]; then
	echo "usage: $0 DIR TEST..." >&2
	exit 2
fi
dir=$1
shift
limit=${SC_TEST_TIMEOUT:-120}

san=${SC_TEST_SANITIZER:-}
case "$san" in
asan)
	export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
	;;
tsan)
	export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1 atexit_sleep_ms=0}"
	;;
"")
	;;
*)
	echo "$0: unknown SC_TEST_SANITIZER=$san (expected asan or tsan)" >&2
	exit 2
	;;
esac

echo "=== shortcut tests: $dir (sanitizer: ${san:-none}, timeout ${limit}s) ==="

pass=0
fail=0
skip=0
failed=()
for t in "$@"; do
	name=${t##*/}
	prog=$dir/${name%%:*}
	scen=()
	case $name in
	*:*) IFS=, read -r -a scen <<<"${name#*:}" ;;
	esac
	if [ ! -x "$prog" ]; then
		echo "FAIL $name (not found: $prog)"
		fail=$((fail + 1))
		failed+=("$name")
		continue
	fi
	echo "--- $name"
	start=$(date +%s%N)
	timeout -k 10 "$limit" "$prog" "${scen[@]}"
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	case $rc in
	0)
		echo "PASS $name"
		pass=$((pass + 1))
		;;
	77)
		echo "SKIP $name"
		skip=$((skip + 1))
		;;
	*)
		if [ $rc -eq 124 ]; then
			echo "FAIL $name (exit $rc: timed out after ${limit}s)"
		elif [ $rc -eq 2 ]; then
			echo "FAIL $name (exit 2: no such scenario? $prog --list names them)"
		else
			echo "FAIL $name (exit $rc)"
		fi
		fail=$((fail + 1))
		failed+=("$name")
		;;
	esac
	echo "    ($name took ${ms} ms)"
done

echo "$pass passed, $fail failed, $skip skipped"
if [ $fail -ne 0 ]; then
	echo "failed: ${failed[*]}"
	exit 1
fi
exit 0
