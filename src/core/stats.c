/* SPDX-License-Identifier: MIT */
/* The process's counters (stats.h): a leaf, which every layer counts into. */
#include <string.h>

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
	[SC_FB_SHORT] = "short_connections",
	[SC_FB_SWITCHED] = "switched_to_tcp",
};

void sc__stats_move(struct sc_counters *to)
{
	_Atomic uint64_t *src = (_Atomic uint64_t *)sc__statp, *dst = (_Atomic uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		atomic_fetch_add_explicit(&dst[i], atomic_load_explicit(&src[i], memory_order_relaxed),
					  memory_order_relaxed);
	sc__statp = to;
}
