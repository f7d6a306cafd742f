/* SPDX-License-Identifier: MIT */
#ifndef SC_STATS_H
#define SC_STATS_H

#include <stdatomic.h>
#include "shortcut.h"

/* Why a TCP connection of an accelerated process stayed on TCP (like SMC's
 * decline codes).  Names are stable: `shortcut stats` prints them. */
enum sc_fallback {
	SC_FB_DISABLED,         /* SHORTCUT_DISABLE */
	SC_FB_NO_LISTENER,      /* client: no accelerated listener at that address */
	SC_FB_PEER_PLAIN,       /* the peer is not accelerated */
	SC_FB_CLAIM_TIMEOUT,    /* client: nobody claimed the offer in time */
	SC_FB_UNSUPPORTED,      /* an option shared memory cannot honour */
	SC_FB_LIMITS,           /* offer table, connection or fd limits */
	SC_FB_NOMEM,            /* out of memory */
	SC_FB_RENDEZVOUS,       /* the peer's rendezvous failed */
	SC_FB_PEER_CLOSED,      /* server: the client closed before the set-up */
	SC_FB_SWITCHED,         /* accelerated, then switched back to TCP (exec,
				 * SCM_RIGHTS, `shortcut off`...): counted here
				 * only, not in conns_fallback */
	SC_FB_SHORT,            /* client: its connections to that port were short
				 * (shortconn.c) */
	SC_FB_MAX = 12
};
extern const char *const sc__fallback_names[SC_FB_MAX];

/* Process-wide counters; relaxed atomics: totals, not synchronisation.
 * Under the interposer they live in the process's stats file in the run
 * directory, where `shortcut stats` reads them. */
struct sc_counters {
	_Atomic uint64_t conns_opened, conns_closed, conns_aborted, conns_refused;
	_Atomic uint64_t proto_errors, groups_created, groups_joined;
	_Atomic uint64_t bytes_sent, bytes_received, wakeups_sent, sleeps, spin_hits;
	_Atomic uint64_t conns_accelerated, conns_fallback;
	_Atomic uint64_t bytes_tcp_sent, bytes_tcp_received;
	_Atomic uint64_t fallback[SC_FB_MAX];
	/* device memory (devmem.c): bindings and fragments outstanding are
	 * levels (a dead process's are none), the rest counts */
	_Atomic uint64_t dm_bindings, dm_bytes_in, dm_frags, dm_frags_out, dm_waits;
	_Atomic uint64_t spins_crowded;         /* waits that did not spin: crowded (spin.c) */
};
extern struct sc_counters *sc__statp;

#define SC_STAT_ADD(field, n) \
	atomic_fetch_add_explicit(&sc__statp->field, (n), memory_order_relaxed)

static inline void sc__stat_fallback(enum sc_fallback why)
{
	SC_STAT_ADD(conns_fallback, 1);
	SC_STAT_ADD(fallback[why], 1);
}

/* A per-connection counter with one writer: no locked instruction on the
 * data path (a global atomic add per call measurably slowed ping-pong). */
static inline void sc__counter_add(_Atomic uint64_t *ctr, uint64_t n)
{
	atomic_store_explicit(ctr, atomic_load_explicit(ctr, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Move the counters to new storage (e.g. a shared file); copies what was
 * counted so far.  Not thread safe against concurrent counting of the
 * same field: called at start-up. */
void sc__stats_move(struct sc_counters *to);


#endif
