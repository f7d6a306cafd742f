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

/* A per-connection counter with one writer: no locked instruction on the
 * data path (a global atomic add per call measurably slowed ping-pong). */
static inline void sc__counter_add(_Atomic uint64_t *ctr, uint64_t n)
{
	atomic_store_explicit(ctr, atomic_load_explicit(ctr, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

struct sc_conn;
/* Fold a closing connection's counters into the process totals. */
void sc__stats_retire(struct sc_conn *c);
/* Add the counters of live connections (link.c walks them). */
void sc__stats_add_live(struct sc_stats *st);

#endif
