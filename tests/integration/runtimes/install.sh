#!/bin/bash
# SPDX-License-Identifier: MIT
# What tests/integration/test_runtimes.py needs, installed when it can be
# (root + apt-get, pip); otherwise says what is missing (those rows skip,
# naming it).  Called by tests/integration/run.sh.
#   Debian: postgresql (initdb, postgres, pgbench), nodejs,
#           default-jdk-headless (java, javac), golang-go, golang-1.19-go, curl
#   Go:     the toolchains of test_go.py besides the machine's own go:
#           /usr/lib/go-1.19 (bookworm's golang-1.19-go); go 1.21, 1.22 and
#           1.23 from bookworm-backports, unpacked (apt-get download,
#           dpkg-deb -x) into build/runtimes/toolchains/ with a private
#           package list, the system's apt sources left alone; go1.27.3
#           fetched by the go command from the Go module proxy
#           (GOTOOLCHAIN) into build/runtimes/go/path.  Each one that cannot
#           be had is named, and its rows skip.
#   pip:    runtimes/python/requirements.txt (uvicorn, httpx)
#   cargo:  rustup's (~/.cargo/bin); Debian's is too old for tokio, so it is
#           only looked for.  Its crates come from crates.io at the first
#           build (Cargo.lock is committed; --locked).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$here/../../.." && pwd)/build"

have() { command -v "$1" >/dev/null 2>&1; }
need_apt=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 ||
	need_apt+=(postgresql postgresql-client)
have node || need_apt+=(nodejs)
{ have java && have javac; } || need_apt+=(default-jdk-headless)
{ have go || [ -x /usr/local/go/bin/go ]; } || need_apt+=(golang-go)
[ -x /usr/lib/go-1.19/bin/go ] || need_apt+=(golang-1.19-go)
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

# Go from bookworm-backports, unpacked into build/ (no root needed, nothing
# installed system-wide); a failure only makes those rows skip
tc="$build/runtimes/toolchains"
bpo=()
for v in 1.21 1.22 1.23; do
	[ -x "$tc/usr/lib/go-$v/bin/go" ] || bpo+=("golang-$v-go" "golang-$v-src")
done
if [ ${#bpo[@]} -gt 0 ] && have apt-get && have dpkg-deb; then
	echo "runtimes: unpacking ${bpo[*]} (bookworm-backports) into $tc"
	a="$tc/apt"
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/debs"
	echo 'deb http://deb.debian.org/debian bookworm-backports main' > "$a/sources.list"
	opt=(-o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	     -o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o APT::Sandbox::User=root)
	if timeout 300 apt-get -qq "${opt[@]}" update >/dev/null 2>&1 &&
		(cd "$a/debs" && timeout 600 apt-get -qq "${opt[@]}" download "${bpo[@]}" >/dev/null 2>&1); then
		for d in "$a"/debs/*.deb; do dpkg-deb -x "$d" "$tc"; done
	else
		echo "runtimes: bookworm-backports unreachable; the go 1.21-1.23 rows will skip"
	fi
	rm -rf "$a"
fi
# go1.27.3 from the Go module proxy, by the go command (it needs a go >= 1.21)
gonew=""
for g in "$(command -v go)" /usr/local/go/bin/go "$tc"/usr/lib/go-1.23/bin/go; do
	[ -x "$g" ] && GOTOOLCHAIN=local "$g" env GOVERSION 2>/dev/null | grep -qE '^go1\.(2[1-9]|[3-9][0-9])' &&
		{ gonew="$g"; break; }
done
if [ -n "$gonew" ]; then
	mkdir -p "$build/runtimes/go/path"
	(cd "$build/runtimes/go" && GOPATH="$build/runtimes/go/path" GOFLAGS=-modcacherw GOTOOLCHAIN=go1.27.3 \
		timeout 300 "$gonew" version >/dev/null 2>&1) ||
		echo "runtimes: go1.27.3 not fetched from the Go module proxy; its rows will skip"
else
	echo "runtimes: no go >= 1.21 to fetch go1.27.3 with; its rows will skip"
fi

{ have cargo || [ -x "$HOME/.cargo/bin/cargo" ]; } ||
	echo "runtimes: cargo not found (rustup, ~/.cargo/bin); the tokio rows will skip"
exit 0
