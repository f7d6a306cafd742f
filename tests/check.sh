#!/bin/sh
# SPDX-License-Identifier: MIT
# One test of any kind, by name (make check T=NAME [SAN=asan|tsan]):
#   test_ring, tests/core/test_ring.c     a unit test: built and run (plain;
#                                         SAN=asan or SAN=tsan: that build)
#   test_halfclose:shut_rd                one scenario of a unit test (or
#                                         several: test_ring:wrap,geometry;
#                                         build/t/test_ring --list names them)
#   sem_dup, setup/sem_dup, a path        a preload oracle program: kernel TCP
#                                         vs `shortcut run` (SAN=asan: the
#                                         interposer built with ASan+UBSan)
#   setup, epoll, ...                     a family of oracle programs
#   test_no_harm, test_no_harm.py,        an integration test file, or one test
#   test_no_harm.py::test_marked_syn_flood_no_stall    of it (pytest; -k works
#                                         through PYTEST_ADDOPTS)
# A name that is both a unit test and an integration test file is refused
# (none is today); say tests/core/NAME.c or NAME.py.
#   tests/check.sh NAME [SAN]     (MAKE from the environment; the integration
#                                 tests use build/ whatever B says)
set -eu
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
t=${1:-}
san=${2:-}

if [ -z "$t" ]; then
	echo "usage: make check T=NAME [SAN=asan|tsan]  (see tests/README.md)" >&2
	exit 2
fi
case "$san" in
"" | asan | tsan) ;;
*) echo "check: SAN=$san: asan or tsan" >&2; exit 2 ;;
esac

unit() {
	case "$san" in
	"") exec $MAKE --no-print-directory test-unit TESTS="$1" ;;
	*) exec $MAKE --no-print-directory "test-$san" TESTS="$1" ;;
	esac
}
preload() {
	case "$san" in
	"") exec $MAKE --no-print-directory test-preload SEM="$1" ;;
	asan) exec $MAKE --no-print-directory test-preload-asan SEM="$1" ;;
	*) echo "check: the oracle programs have no $san build (SAN=asan)" >&2; exit 2 ;;
	esac
}
pytest() {
	[ -z "$san" ] || { echo "check: integration tests have no $san build" >&2; exit 2; }
	$MAKE --no-print-directory -s all
	python3 -c 'import pytest' 2>/dev/null || {
		echo "check: pytest missing (python3 -m pip install pytest, or tests/integration/run.sh)" >&2
		exit 2
	}
	exec python3 -m pytest -q "tests/integration/$1"
}

# an integration test: a file, or a node of one (FILE.py::TEST)
case "$t" in
*.py | *.py::*)
	f=${t%%::*}
	f=${f##*/}
	[ -f "tests/integration/$f" ] || { echo "check: no tests/integration/$f" >&2; exit 2; }
	pytest "$f${t#"${t%%::*}"}"
	;;
esac

# a unit test's scenarios: PROGRAM:SCENARIO[,SCENARIO...]
scen=
case "$t" in
*:*)
	scen=${t#*:}
	t=${t%%:*}
	[ -n "$scen" ] || { echo "check: $t: which scenario? (build/t/$t --list)" >&2; exit 2; }
	;;
esac

name=${t%.c}
base=${name##*/}
is_unit=
is_py=
[ -f "tests/core/$base.c" ] && case "$base" in test_*) is_unit=1 ;; esac
[ -f "tests/integration/$base.py" ] && is_py=1
if [ -n "$scen" ]; then
	[ -n "$is_unit" ] || {
		echo "check: $t:$scen: a scenario of a unit test (tests/core/test_*.c:NAME);" \
			"no tests/core/$base.c" >&2
		exit 2
	}
	unit "$base:$scen"
fi
if [ -n "$is_unit" ] && [ -n "$is_py" ]; then
	case "$t" in
	*.c | */*) is_py= ;;
	*) echo "check: $t is a unit test (tests/core/$base.c) and an integration test file" \
		"(tests/integration/$base.py): say tests/core/$base.c or $base.py" >&2; exit 2 ;;
	esac
fi
if [ -n "$is_unit" ]; then
	unit "$base"
elif [ -n "$is_py" ]; then
	pytest "$base.py"
elif ls tests/preload/*/"$base.c" >/dev/null 2>&1; then
	preload "$base"
elif [ -d "tests/preload/${name#tests/preload/}" ] && [ "${name#tests/preload/}" != . ]; then
	preload "${name#tests/preload/}"
fi
echo "check: no test named $t (a unit test tests/core/test_*.c, an oracle program" \
	"tests/preload/*/sem_*.c or family, or tests/integration/test_*.py[::TEST])" >&2
exit 2
