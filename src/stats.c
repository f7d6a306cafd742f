/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "conn.h"
#include "stats.h"

static struct sc_counters local;
struct sc_counters *sc__statp = &local;

const char *const sc__fallback_names[SC_FB_MAX] = {
	[SC_FB_DISABLED] = "disabled",
	[SC_FB_NO_LISTENER] = "no_listener",
	[SC_FB_PEER_PLAIN] = "peer_not_accelerated",
	[SC_FB_CLAIM_TIMEOUT] = "claim_timeout",
	[SC_FB_UNSUPPORTED] = "unsupported_option",
	[SC_FB_LIMITS] = "limits",
	[SC_FB_NOMEM] = "no_memory",
	[SC_FB_RENDEZVOUS] = "rendezvous_failed",
	[SC_FB_PEER_CLOSED] = "peer_closed_first",
	[SC_FB_SWITCHED] = "switched_to_tcp",
};

#define GET(f) st->f = atomic_load_explicit(&sc__statp->f, memory_order_relaxed)

__attribute__((visibility("default")))
void sc_stats_get(struct sc_stats *st)
{
	memset(st, 0, sizeof(*st));
	GET(conns_opened); GET(conns_closed); GET(conns_aborted); GET(conns_refused);
	GET(proto_errors); GET(groups_created); GET(groups_joined);
	GET(bytes_sent); GET(bytes_received); GET(wakeups_sent); GET(sleeps);
	GET(spin_hits); GET(conns_accelerated); GET(conns_fallback);
	GET(bytes_tcp_sent); GET(bytes_tcp_received);
	sc__stats_add_live(st);
}

void sc__stats_move(struct sc_counters *to)
{
	_Atomic uint64_t *src = (_Atomic uint64_t *)sc__statp, *dst = (_Atomic uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		atomic_fetch_add_explicit(&dst[i], atomic_load_explicit(&src[i], memory_order_relaxed),
					  memory_order_relaxed);
	sc__statp = to;
}

void sc__stats_retire(struct sc_conn *c)
{
	SC_STAT_ADD(bytes_sent, atomic_load_explicit(&c->bytes_sent, memory_order_relaxed));
	SC_STAT_ADD(bytes_received, atomic_load_explicit(&c->bytes_received, memory_order_relaxed));
	SC_STAT_ADD(spin_hits, atomic_load_explicit(&c->spin_hits, memory_order_relaxed));
}
