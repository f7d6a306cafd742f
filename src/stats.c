/* SPDX-License-Identifier: MIT */
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
}
