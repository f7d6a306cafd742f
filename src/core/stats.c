/* SPDX-License-Identifier: MIT */
/* The process's counters (stats.h): a leaf, which every layer counts into. */
#include <string.h>

#include "stats.h"

static struct sc_counters local;
struct sc_counters *sc__statp = &local;

const char *const sc__fallback_names[SC_FB_MAX] = {
#define SC_COUNTER(...)
#define SC_FALLBACK(reason, name, comment) [reason] = name,
#include "counters.def"
};

void sc__stats_move(struct sc_counters *to)
{
	_Atomic uint64_t *src = (_Atomic uint64_t *)sc__statp, *dst = (_Atomic uint64_t *)to;

	for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
		atomic_fetch_add_explicit(&dst[i], atomic_load_explicit(&src[i], memory_order_relaxed),
					  memory_order_relaxed);
	sc__statp = to;
}
