/* SPDX-License-Identifier: MIT */
/*
 * The per-direction connection lock.  Taken on every send and receive, so it
 * must be cheap: one exchange to take it, a plain release store to drop it
 * (glibc's mutex costs a locked instruction each way — half of a ping-pong's
 * CPU time in profiles).  Nobody sleeps while holding it (the wait path drops
 * it around the sleep, as the kernel drops the socket lock in
 * sk_wait_event), so a contender spins briefly and then yields.
 */
#ifndef SC_LOCK_H
#define SC_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "compat.h"

struct sc_lock {
	_Atomic uint32_t v;     /* 0 free, 1 held */
};

static inline void sc__lock_slow(struct sc_lock *l)
{
	for (unsigned i = 0;; i++) {
		if (!atomic_load_explicit(&l->v, memory_order_relaxed) &&
		    !atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
			return;
		if (i < 1000)
			sc__cpu_relax();
		else
			sched_yield();
	}
}

static inline void sc__lock(struct sc_lock *l)
{
	if (atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
		sc__lock_slow(l);
}

static inline bool sc__trylock(struct sc_lock *l)
{
	return !atomic_load_explicit(&l->v, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&l->v, 1, memory_order_acquire);
}

static inline void sc__unlock(struct sc_lock *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* Unlock and full barrier in one locked instruction (the send path needs
 * both: its producer-cursor store must be ordered before its rx_armed load). */
static inline void sc__unlock_fence(struct sc_lock *l)
{
	atomic_exchange_explicit(&l->v, 0, memory_order_seq_cst);
}

#endif
