#!/bin/bash
# SPDX-License-Identifier: MIT
# make deb: the Debian package shortcut_VERSION_ARCH.deb, in BUILD/deb/.
#   dist/mkdeb.sh [BUILD_DIR]
# Builds from a copy of the sources (BUILD/deb/shortcut-VERSION/, with
# dist/debian/ as its debian/), so the tree stays clean and dpkg-buildpackage
# can put its results beside the copy; debian/changelog is made from
# CHANGELOG.md (the version is VERSION's, the maintainer debian/control's).
# Then lintian, which must report no error.  Needs dpkg-dev, debhelper and
# lintian (tests/integration/run.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
V=$(cat VERSION)
for tool in dpkg-buildpackage dh lintian; do
	command -v $tool >/dev/null ||
		{ echo "mkdeb: $tool missing (Debian packages dpkg-dev, debhelper, lintian)" >&2; exit 1; }
done
top=$(sed -n 's/^## \([^ ]*\) — .*/\1/p' CHANGELOG.md | head -1)
[ "$top" = "$V" ] ||
	{ echo "mkdeb: CHANGELOG.md's newest entry is '$top', VERSION says $V: add its entry" >&2; exit 1; }

out=$B/deb
stage=$out/shortcut-$V
rm -rf "$out"
mkdir -p "$stage"
tar -c Makefile VERSION CHANGELOG.md README.md include src cli man dist | tar -x -C "$stage"
cp -r dist/debian "$stage/debian"

# CHANGELOG.md's entries ("## VERSION — DATE", then paragraphs and "- "
# items) as debian/changelog entries, one "*" item each; two releases of
# one day are 23:59 and 23:58 (UTC)
maint=$(sed -n 's/^Maintainer: //p' dist/debian/control)
awk -v maint="$maint" '
function flush(   n, w, i, line, pre) {
	if (item == "")
		return
	n = split(item, w, " ")
	line = "  *"
	for (i = 1; i <= n; i++) {
		if (length(line) + 1 + length(w[i]) > 78 && line !~ /^ *\*?$/) {
			print line
			line = "   "
		}
		line = line " " w[i]
	}
	print line
	item = ""
}
function footer(   cmd, d) {
	flush()
	cmd = "LC_ALL=C date -u -R -d \"" date " " hhmm "\""
	cmd | getline d
	close(cmd)
	printf "\n -- %s  %s\n", maint, d
}
/^## / {
	if (ver != "") {
		footer()
		print ""
	}
	ver = $2; date = $4
	# entries of one day (newest first) get earlier times going down,
	# as dpkg wants every entry newer than the one below it
	m = 1439 - seen[date]++
	hhmm = sprintf("%02d:%02d", int(m / 60), m % 60)
	printf "shortcut (%s) unstable; urgency=medium\n\n", ver
	next
}
ver == "" { next }
/^$/ { flush(); next }
/^- / { flush(); item = substr($0, 3); next }
{ sub(/^ +/, ""); item = item == "" ? $0 : item " " $0 }
END { if (ver != "") footer() }
' CHANGELOG.md > "$stage/debian/changelog"

# -b: binary only; -us -uc: unsigned; the results go to $out
(cd "$stage" && dpkg-buildpackage -b -us -uc -j"$(nproc)")
deb=$out/shortcut_${V}_$(dpkg-architecture -qDEB_HOST_ARCH).deb
[ -f "$deb" ] || { echo "mkdeb: $deb not built" >&2; exit 1; }
echo "mkdeb: lintian $deb"
lintian --fail-on error --display-level '>=warning' "$deb"
echo "mkdeb: $deb"
