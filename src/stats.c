/* SPDX-License-Identifier: MIT */
#include "conn.h"
#include "stats.h"

struct sc_counters sc__stats;

#define GET(f) st->f = atomic_load_explicit(&sc__stats.f, memory_order_relaxed)

__attribute__((visibility("default")))
void sc_stats_get(struct sc_stats *st)
{
	GET(conns_opened); GET(conns_closed); GET(conns_aborted); GET(conns_refused);
	GET(proto_errors); GET(groups_created); GET(groups_joined);
	GET(bytes_sent); GET(bytes_received); GET(wakeups_sent); GET(sleeps);
	GET(spin_hits);
	sc__stats_add_live(st);
}

void sc__stats_retire(struct sc_conn *c)
{
	SC_STAT_ADD(bytes_sent, atomic_load_explicit(&c->bytes_sent, memory_order_relaxed));
	SC_STAT_ADD(bytes_received, atomic_load_explicit(&c->bytes_received, memory_order_relaxed));
	SC_STAT_ADD(spin_hits, atomic_load_explicit(&c->spin_hits, memory_order_relaxed));
}
