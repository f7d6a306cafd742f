#!/bin/bash
# SPDX-License-Identifier: MIT
# What tests/integration/test_runtimes.py needs, installed when it can be
# (root + apt-get, pip); otherwise says what is missing (those rows skip,
# naming it).  Called by tests/integration/run.sh.
#   Debian: postgresql (initdb, postgres, pgbench), nodejs,
#           default-jdk-headless (java, javac), golang-go, curl
#   pip:    runtimes/python/requirements.txt (uvicorn, httpx)
#   cargo:  rustup's (~/.cargo/bin); Debian's is too old for tokio, so it is
#           only looked for.  Its crates come from crates.io at the first
#           build (Cargo.lock is committed; --locked).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

have() { command -v "$1" >/dev/null 2>&1; }
need_apt=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 ||
	need_apt+=(postgresql postgresql-client)
have node || need_apt+=(nodejs)
{ have java && have javac; } || need_apt+=(default-jdk-headless)
{ have go || [ -x /usr/local/go/bin/go ]; } || need_apt+=(golang-go)
have curl || need_apt+=(curl)

if [ ${#need_apt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && have apt-get; then
		echo "runtimes: installing ${need_apt[*]}"
		# services must not start on installation (the postgresql package
		# would start a cluster); keep a policy-rc.d that is already there
		own_policy=0
		if [ ! -e /usr/sbin/policy-rc.d ]; then
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
			own_policy=1
		fi
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${need_apt[@]}" >/dev/null ||
			echo "runtimes: apt-get failed; rows needing ${need_apt[*]} will skip"
		[ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
	else
		echo "runtimes: missing Debian packages (their rows will skip): ${need_apt[*]}"
	fi
fi

if ! python3 -c 'import uvicorn, httpx' 2>/dev/null; then
	echo "runtimes: pip install -r $here/python/requirements.txt"
	python3 -m pip install -q -r "$here/python/requirements.txt" ||
		echo "runtimes: pip failed; the uvicorn row will skip"
fi

{ have cargo || [ -x "$HOME/.cargo/bin/cargo" ]; } ||
	echo "runtimes: cargo not found (rustup, ~/.cargo/bin); the tokio rows will skip"
exit 0
