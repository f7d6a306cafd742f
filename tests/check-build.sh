#!/bin/bash
# SPDX-License-Identifier: MIT
# The build, two more ways (make check-build, part of make test): with clang
# (-Werror, as gcc), and with the system-call path that is not x86-64's
# (src/core/rawsys.h: libc's syscall()), so that neither can rot unseen.
# Installs clang with apt-get if it can; says so and skips clang if not.
set -eu
cd "$(dirname "$0")/.."
if ! command -v clang >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "check-build: installing clang"
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends clang >/dev/null; } || true
	fi
fi
if command -v clang >/dev/null; then
	make -s B=build/clang CC=clang all
	echo "check-build: clang -Werror: ok ($(clang --version | head -1))"
else
	echo "check-build: clang missing (Debian package clang): not built with clang"
fi
make -s B=build/generic CFLAGS="-O2 -g -DSC_RAWSYS_GENERIC" all
echo "check-build: the generic system-call path: ok"
