#!/bin/sh
# SPDX-License-Identifier: MIT
# make fuzz (FUZZ_SECONDS per harness, default 60) and make fuzz-quick (a few
# seconds, in make test): build each tests/fuzz/fuzz_NAME.c with clang's
# libFuzzer, ASan and UBSan, and run it from its seed corpus
# (tests/fuzz/corpus/NAME) plus what earlier runs found (build/fuzz/corpus-NAME).
# A crash leaves its input in build/fuzz/crash-* and fails the run; replay it
# with build/fuzz/fuzz_NAME build/fuzz/crash-...  An input that runs longer
# than 10 s is a hang (timeout-*) and fails the run too.
# A harness is built with the core's sources; one that needs more names them
# in a line of its own, ` * Built with: src/rundir cli/statsread.c` (a
# folder: its .c files; a layer above the core only with what it depends
# on, as check-layers has it).
# FUZZ=NAME runs that harness only (make fuzz FUZZ=board FUZZ_SECONDS=600).
# Without clang's fuzzer runtime (Debian: libclang-rt-14-dev) it says so and skips.
set -e
B=${1:-build}
SECONDS_EACH=${FUZZ_SECONDS:-60}
CC=${FUZZ_CC:-clang}
mkdir -p "$B/fuzz"
# clang and its fuzzer runtime: installed with apt-get when we can
if [ "$CC" = clang ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
   { ! command -v clang >/dev/null ||
     ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; }; then
	v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
	echo "fuzz: installing clang and libclang-rt-${v:-14}-dev"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends clang "libclang-rt-${v:-14}-dev" >/dev/null; } || true
fi
for src in tests/fuzz/fuzz_${FUZZ:-*}.c; do
	[ -e "$src" ] || { echo "fuzz: no harness $src"; exit 2; }
	name=$(basename "$src" .c)
	short=${name#fuzz_}
	bin="$B/fuzz/$name"
	# the core's sources compiled in (libc calls, as the sanitizer tests),
	# and those the harness names
	more=
	for f in $(sed -n 's/^ \* Built with: //p' "$src"); do
		if [ -d "$f" ]; then more="$more $f/*.c"; else more="$more $f"; fi
	done
	if ! $CC -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter -g -O1 \
		-pthread -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-DSC_VERSION='"fuzz"' -Iinclude -Isrc/core -Isrc/rundir -Icli -o "$bin" "$src" \
		src/core/*.c $more 2>"$B/fuzz/$name.build.log"; then
		# a compiler without the fuzzer runtime skips; a harness that
		# does not compile (an interface changed under it) fails
		if printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }\n' |
		   $CC -fsanitize=fuzzer -x c -o "$B/fuzz/probe" - 2>/dev/null; then
			cat "$B/fuzz/$name.build.log"
			echo "fuzz: FAIL $name: it does not build ($B/fuzz/$name.build.log)"
			exit 1
		fi
		echo "fuzz: SKIP $name: $CC cannot build a libFuzzer harness" \
		     "($B/fuzz/$name.build.log; Debian: apt-get install clang libclang-rt-14-dev)"
		continue
	fi
	mkdir -p "$B/fuzz/corpus-$short"
	"$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -print_final_stats=1 \
		-artifact_prefix="$B/fuzz/" \
		"$B/fuzz/corpus-$short" "tests/fuzz/corpus/$short" >"$B/fuzz/$name.log" 2>&1 || {
		tail -40 "$B/fuzz/$name.log"
		echo "fuzz: FAIL $name (log: $B/fuzz/$name.log)"
		exit 1
	}
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz/$name.log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$B/fuzz/$name.log")
	cov=$(grep -o 'cov: [0-9]*' "$B/fuzz/$name.log" | tail -1)
	echo "fuzz: PASS $name: $runs executions in ${SECONDS_EACH}s ($rate/s), $cov, 0 crashes"
done
