#!/bin/bash
# SPDX-License-Identifier: MIT
# The layers point one way (make check-layers, part of make test):
#  - the core (build/obj/core) calls nothing defined by the run directory's
#    or the interposer's objects, and the run directory nothing of the
#    interposer's;
#  - neither calls a libc function the interposer defines (calls.h): inside
#    a preloaded process that call would come back into the interposer (the
#    syscall() hang of an earlier milestone); they make their own system
#    calls (src/core/sys.h);
#  - the shared library exports sc_* and the calls of calls.h, nothing else:
#    sc_* in the version node SHORTCUT_<major>, the calls in the base
#    version (a named node would stop the loader from binding a program's
#    recv@GLIBC_2.2.5 to ours: the Makefile says why).
#   tests/check-layers.sh BUILD_DIR
set -u
B=${1:-build}
fail=0
intercepted=$(sort -u "$B/calls.list")
defined() { nm --defined-only "$@" | awk '$2 ~ /^[TDBRCV]$/ {print $3}' | sort -u; }
undef() { nm -u "$@" | awk 'NF == 2 {print $2}' | sort -u; }
core_u=$(undef "$B"/obj/core/*.o)
rundir_u=$(undef "$B"/obj/rundir/*.o)
rundir_d=$(defined "$B"/obj/rundir/*.o)
ip_d=$(defined "$B"/obj/interposer/*.o)
# label, names used, names it must not use
check() {
	local bad
	bad=$(comm -12 <(printf '%s\n' "$2") <(printf '%s\n' "$3"))
	if [ -n "$bad" ]; then
		echo "check-layers: $1:" $bad
		fail=1
	fi
}
check "the core calls the run directory" "$core_u" "$rundir_d"
check "the core calls the interposer" "$core_u" "$ip_d"
check "the run directory calls the interposer" "$rundir_u" "$ip_d"
check "the core calls an intercepted libc name" "$core_u" "$intercepted"
check "the run directory calls an intercepted libc name" "$rundir_u" "$intercepted"
# exports: exactly the list, each defined (nm prints name@@VERSION)
exported=$(nm -D --defined-only "$B/libshortcut.so" | awk '$2 ~ /^[TW]$/ {sub(/@.*/, "", $3); print $3}' | sort -u)
missing=$(comm -23 <(printf '%s\n' "$intercepted") <(printf '%s\n' "$exported"))
extra=$(comm -13 <(printf '%s\n' "$intercepted") <(printf '%s\n' "$exported") | grep -v '^sc_')
[ -z "$missing" ] || { echo "check-layers: listed in calls.h, not exported:" $missing; fail=1; }
[ -z "$extra" ] || { echo "check-layers: exported, not in calls.h:" $extra; fail=1; }
# versions: objdump -T ends each line with VERSION NAME
node="SHORTCUT_$(cut -d. -f1 "$(dirname "$0")/../VERSION")"
wrong=$(objdump -T "$B/libshortcut.so" | awk -v node="$node" '$3 == "DF" && $4 != "*UND*" {
	v = $(NF - 1); n = $NF
	if (n ~ /^sc_/ ? v != node : v != "Base") print n "(" v ")" }')
[ -z "$wrong" ] || { echo "check-layers: sc_* must be in $node, the calls in Base:" $wrong; fail=1; }
if [ $fail = 0 ]; then
	echo "check-layers: core -> nothing above; rundir -> core; $(printf '%s\n' "$intercepted" | wc -l) calls exported (base version), none used below the interposer; sc_* in $node"
fi
exit $fail
