#!/bin/bash
# SPDX-License-Identifier: MIT
# Integration tests (pytest): the `shortcut` command and system-level checks.
# Installs what it needs when it can (root + apt-get / pip), else says what is
# missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

need_apt=()
command -v strace >/dev/null || need_apt+=(strace)
command -v nc >/dev/null || need_apt+=(netcat-openbsd)
# real programs (test_programs.py): each test skips, naming its package, if absent
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-benchmark >/dev/null || need_apt+=(redis-tools)
{ command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; } || need_apt+=(nginx)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v curl >/dev/null || need_apt+=(curl)
command -v sockperf >/dev/null || need_apt+=(sockperf)
command -v iperf3 >/dev/null || need_apt+=(iperf3)
command -v memcached >/dev/null || need_apt+=(memcached)
command -v memcslap >/dev/null || need_apt+=(libmemcached-tools)
[ -f /usr/include/liburing.h ] || need_apt+=(liburing-dev)     # test_switch.py's io_uring client
# test_install.py: pkg-config, the man page linters, the Debian package tools
command -v pkg-config >/dev/null || need_apt+=(pkgconf)
command -v mandoc >/dev/null || need_apt+=(mandoc)
command -v groff >/dev/null || need_apt+=(groff-base)
command -v man >/dev/null || need_apt+=(man-db)
command -v dpkg-buildpackage >/dev/null || need_apt+=(dpkg-dev)
command -v dh >/dev/null || need_apt+=(debhelper)
command -v lintian >/dev/null || need_apt+=(lintian)
if [ ${#need_apt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing: ${need_apt[*]}"
		# services must not start on installation (policy-rc.d), and a
		# failed install leaves the tests to skip rather than fail the run
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${need_apt[@]}" >/dev/null ||
			echo "apt-get failed; tests needing ${need_apt[*]} will skip"
		rm -f /usr/sbin/policy-rc.d
	else
		echo "missing Debian packages (tests that need them will skip): ${need_apt[*]}"
	fi
fi
# the runtimes of test_runtimes.py (postgresql, uvicorn/httpx; node, java, go,
# cargo looked for): each row skips, naming what is missing
tests/integration/runtimes/install.sh
# the applications of test_apps.py (pgbouncer, haproxy, mariadb, erlang,
# grpcio): each row skips, naming what is missing
tests/integration/apps/install.sh
if ! python3 -c 'import pytest' 2>/dev/null; then
	python3 -m pip install -q pytest
fi
# test_install.py validates `shortcut stats --prometheus` with its parser
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
	python3 -m pip install -q prometheus_client ||
		echo "pip failed (PyPI unreachable?): test_stats_prometheus will skip"
fi
exec python3 -m pytest -q tests/integration "$@"
