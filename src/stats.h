/* SPDX-License-Identifier: MIT */
#ifndef SC_STATS_H
#define SC_STATS_H

#include <stdatomic.h>
#include "shortcut.h"

/* Process-wide counters; relaxed atomics: totals, not synchronisation. */
struct sc_counters {
	_Atomic uint64_t conns_opened, conns_closed, conns_aborted, conns_refused;
	_Atomic uint64_t proto_errors, groups_created, groups_joined;
	_Atomic uint64_t bytes_sent, bytes_received, wakeups_sent, sleeps, spin_hits;
};
extern struct sc_counters sc__stats;

#define SC_STAT_ADD(field, n) \
	atomic_fetch_add_explicit(&sc__stats.field, (n), memory_order_relaxed)

#endif
