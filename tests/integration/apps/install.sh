#!/bin/bash
# SPDX-License-Identifier: MIT
# What tests/integration/test_apps.py needs from Debian and PyPI, installed
# when it can be (root + apt-get, pip); otherwise says what is missing (those
# rows skip, naming it).  Called by tests/integration/run.sh after
# runtimes/install.sh (which brings postgresql, nodejs, the JDK, curl).
#   Debian: pgbouncer, haproxy, mariadb-server + mariadb-client (mariadbd,
#           mariadb-install-db, mariadb-slap), erlang-base (erl, erlc),
#           maven (mvn: the Netty jars), npm (the ws package)
#   pip:    apps/python/requirements.txt (grpcio)
# The rest is fetched by the test that needs it at its first run and cached
# in build/apps/: Netty from Maven Central (mvn dependency:copy), ws from the
# npm registry (npm ci, package-lock.json committed), the axum and reqwest
# crates from crates.io (cargo --locked, runtimes/rust).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
need_apt=()
have pgbouncer || need_apt+=(pgbouncer)
have haproxy || need_apt+=(haproxy)
have mariadbd || need_apt+=(mariadb-server)
have mariadb-slap || need_apt+=(mariadb-client)
{ have erl && have erlc; } || need_apt+=(erlang-base)
have mvn || need_apt+=(maven)
have npm || need_apt+=(npm)

if [ ${#need_apt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && have apt-get; then
		echo "apps: installing ${need_apt[*]}"
		# services must not start on installation (mariadb-server,
		# pgbouncer, haproxy would); keep a policy-rc.d already there
		own_policy=0
		if [ ! -e /usr/sbin/policy-rc.d ]; then
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
			own_policy=1
		fi
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${need_apt[@]}" >/dev/null ||
			echo "apps: apt-get failed; rows needing ${need_apt[*]} will skip"
		[ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
	else
		echo "apps: missing Debian packages (their rows will skip): ${need_apt[*]}"
	fi
fi

if ! python3 -c 'import grpc' 2>/dev/null; then
	echo "apps: pip install -r $here/python/requirements.txt"
	python3 -m pip install -q -r "$here/python/requirements.txt" ||
		echo "apps: pip failed; the grpc row will skip"
fi
exit 0
