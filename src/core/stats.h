/* SPDX-License-Identifier: MIT */
#ifndef SC_STATS_H
#define SC_STATS_H

#include <stdatomic.h>
#include "shortcut.h"

/* Why a TCP connection of an accelerated process stayed on TCP
 * (counters.def). */
enum sc_fallback {
#define SC_COUNTER(...)
#define SC_FALLBACK(reason, name, comment) reason,
#include "counters.def"
	SC_FB_MAX = 12          /* in the stats file format: room for one more */
};
extern const char *const sc__fallback_names[SC_FB_MAX];

/* Process-wide counters (counters.def); relaxed atomics: totals, not
 * synchronisation.  Under the interposer they live in the process's stats
 * file in the run directory, where `shortcut stats` reads them. */
struct sc_counters {
#define SC_COUNTER(field, ...) _Atomic uint64_t field;
#define SC_FALLBACK_ARRAY _Atomic uint64_t fallback[SC_FB_MAX];
#include "counters.def"
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
