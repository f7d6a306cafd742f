/* SPDX-License-Identifier: MIT */
#ifndef SC_SPIN_H
#define SC_SPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct sc_conn;

/* How long c's wait in direction tx spins before it sleeps (ns, 0: not at
 * all), and what came of it: spin.c says how it is learned. */
uint32_t sc__spin_budget(struct sc_conn *c, bool tx);
void sc__spin_done(struct sc_conn *c, bool tx, uint32_t budget, bool hit);
/* A kind of wait whose budget the process learns, one verdict per wait:
 * the budget to spin now (not judged for crowding), and the outcome, which
 * returns the budget learned.  Two ways to learn (spin.c):
 * SC_SPIN_CLASS_INIT halves the budget after a miss and doubles it after a
 * hit (a connection's first wait, an epoll set's); SC_SPIN_SETUP_INIT
 * spins the whole budget or not at all, by the share of hits among the
 * last verdicts (the waits of a connection's set-up: the client's for its
 * OPEN, the acceptor's for the client's spin, a blocking accept). */
struct sc_spin_class {
	_Atomic uint32_t ns;
	_Atomic uint32_t count;
	_Atomic uint32_t hits;  /* set-up: the last 16 verdicts, a bit each */
	bool setup;
};
#define SC_SPIN_CLASS_INIT { UINT32_MAX, 0, 0, false }
#define SC_SPIN_SETUP_INIT { UINT32_MAX, 0, 0xffff, true }
uint32_t sc__spin_class_budget(struct sc_spin_class *k);
uint32_t sc__spin_class_done(struct sc_spin_class *k, uint32_t budget, bool hit);
/* The machine is crowded: a spin would hold a core another thread waits
 * for (sampled; spin.c says how). */
bool sc__spin_crowded(void);
/* The "some" line's total of /proc/pressure/cpu text (microseconds some
 * thread waited for a CPU), or -1; and the verdict on a window's share. */
int64_t sc__psi_some_us(const char *text);
bool sc__psi_crowded(uint64_t stalled_us, uint64_t window_us);

#endif
