#!/bin/sh
# SPDX-License-Identifier: MIT
# Specs from the 2026-11-22 review, not met yet (not run by make test): each
# prints what it saw on kernel TCP, then under `shortcut run`; compare by eye
# (they print timings, so they are not transcript-exact oracles).
#   tests/preload/pending/review/run1.sh NAME      (from the repository root)
#   t_two_sets_spin     the second set of a connection busy-loops while the first is awake
#                       (met: the second set has a channel of its own; prints CPU time)
#   t_fork_spin         a set shared across fork spins while the other process has not drained
#                       (met since the child's wait switches the connections to TCP; kept
#                       as a check: it prints CPU time)
# (t_poll_after_epoll, t_lowat_timeo_ep and t_first_set_idle are met:
# tests/preload/sem_epoll_then_poll.c, sem_epoll_lowat_timeo.c, sem_epoll_second_set.c;
# t_kid_data: sem_epoll_kid_data.c)
set -u
n=$1
B=${B:-build}
OUT=$(mktemp -d)
cc -iquote tests/preload -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -O2 -pthread \
	-o "$OUT/$n" "tests/preload/pending/review/$n.c" || exit 1
echo "== kernel"; timeout -s KILL 30 "$OUT/$n"; echo "rc=$?"
rd=$(mktemp -d)
echo "== shortcut"; SHORTCUT_RUNDIR=$rd timeout -s KILL 30 "$B/shortcut" run "$OUT/$n"; echo "rc=$?"
SHORTCUT_RUNDIR=$rd "$B/shortcut" stats --json 2>&1 | grep -o '"conns_accelerated": *[0-9]*'
rm -rf "$rd" "$OUT"
