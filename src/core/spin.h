/* SPDX-License-Identifier: MIT */
#ifndef SC_SPIN_H
#define SC_SPIN_H

#include <stdbool.h>
#include <stdint.h>

struct sc_conn;

/* How long c's wait in direction tx spins before it sleeps (ns, 0: not at
 * all), and what came of it: spin.c says how it is learned. */
uint32_t sc__spin_budget(struct sc_conn *c, bool tx);
void sc__spin_done(struct sc_conn *c, bool tx, uint32_t budget, bool hit);
/* More runnable threads on the machine than CPUs for us (sampled). */
bool sc__spin_crowded(void);

#endif
