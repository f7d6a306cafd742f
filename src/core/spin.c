/* SPDX-License-Identifier: MIT */
/*
 * How long a wait spins before it sleeps (docs/design.md, "Spinning").
 *
 * A spin pays when the peer answers within it on a core of its own: the
 * wait then costs no system call and no wake-up.  It costs a core for its
 * length otherwise, so:
 *  - a connection's budget per direction adapts (doubling on a hit, halved
 *    after four misses in a row, with a floor a busy stream recovers from);
 *  - a connection's first wait in a direction has no history: it takes the
 *    budget this process's earlier first waits learned (a server waiting
 *    for the request of a connection it just accepted, a client for the
 *    first response: short connections are all first waits), with a small
 *    probe now and then once that budget fell to nothing;
 *  - nothing spins while the machine has more runnable threads than the
 *    CPUs we may run on: the spinner would hold a core the peer may be
 *    waiting for.  The count is the kernel's (/proc/loadavg), sampled at
 *    most every CROWD_MS by whichever waiter asks first.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "spin.h"
#include "stats.h"
#include "sys.h"

#define CROWD_MS 10u
#define PROBE_EVERY 32u          /* first waits between probes at budget 0 */

static uint64_t coarse_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int ncpus(void)
{
	static _Atomic int n;
	int v = atomic_load_explicit(&n, memory_order_relaxed);
	if (!v) {
		cpu_set_t set;
		v = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
		if (v <= 0)
			v = 1 << 20;    /* unknown: never judged crowded */
		atomic_store_explicit(&n, v, memory_order_relaxed);
	}
	return v;
}

/* Runnable threads on the machine now ("R/T", the fourth field of
 * /proc/loadavg, counts the reader too), or -1. */
static long runnable(void)
{
	char buf[128];
	int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = buf;
	for (int field = 0; field < 3; field++) {
		while (*p && *p != ' ')
			p++;
		while (*p == ' ')
			p++;
	}
	char *end;
	long r = strtol(p, &end, 10);
	return end != p && *end == '/' ? r : -1;
}

static _Atomic uint64_t crowd_at;       /* coarse ms of the last sample (0: none) */
static _Atomic bool crowd;

bool sc__spin_crowded(void)
{
	uint64_t now = coarse_ms(), at = atomic_load_explicit(&crowd_at, memory_order_relaxed);
	if (at && now - at < CROWD_MS)
		return atomic_load_explicit(&crowd, memory_order_relaxed);
	/* one sampler; the others take the last verdict */
	/* relaxed: it elects a sampler, and publishes nothing (the verdict
	 * is read relaxed: a stale one costs a spin or a sleep) */
	if (!atomic_compare_exchange_strong_explicit(&crowd_at, &at, now ? now : 1,
						     memory_order_relaxed, memory_order_relaxed))
		return atomic_load_explicit(&crowd, memory_order_relaxed);
	long r = runnable();
	bool c = r > ncpus();
	atomic_store_explicit(&crowd, c, memory_order_relaxed);
	return c;
}

/* A kind of wait the process learns a budget for, one verdict per wait:
 * ns UINT32_MAX is not set yet (the configured budget). */
static struct sc_spin_class first_waits[2] = { SC_SPIN_CLASS_INIT, SC_SPIN_CLASS_INIT };

uint32_t sc__spin_class_budget(struct sc_spin_class *k)
{
	if (!sc__cfg.spin_ns)
		return 0;
	uint32_t b = atomic_load_explicit(&k->ns, memory_order_relaxed);
	if (b == UINT32_MAX)
		b = sc__cfg.spin_ns;
	if (!b && atomic_fetch_add_explicit(&k->count, 1, memory_order_relaxed) % PROBE_EVERY == 0)
		b = sc__cfg.spin_ns / 8 ? sc__cfg.spin_ns / 8 : 1;
	return b;
}

uint32_t sc__spin_class_done(struct sc_spin_class *k, uint32_t budget, bool hit)
{
	uint32_t max = sc__cfg.spin_ns, floor = max / 16, b = budget;
	if (hit)
		b = b * 2 > max ? max : b * 2 < floor ? floor : b * 2;
	else
		b = b / 2 < floor ? 0 : b / 2;
	atomic_store_explicit(&k->ns, b, memory_order_relaxed);
	return b;
}

uint32_t sc__spin_budget(struct sc_conn *c, bool tx)
{
	uint32_t b;
	if (!sc__cfg.spin_ns)
		return 0;
	if (c->waited[tx])
		b = c->spin_ns[tx];
	else
		b = sc__spin_class_budget(&first_waits[tx]);
	if (b && sc__spin_crowded()) {
		SC_STAT_ADD(spins_crowded, 1);
		b = 0;
	}
	return b;
}

void sc__spin_done(struct sc_conn *c, bool tx, uint32_t budget, bool hit)
{
	uint32_t max = sc__cfg.spin_ns, floor = max / 16;
	bool first = !c->waited[tx];
	c->waited[tx] = true;
	if (!budget)
		return;
	if (first) {
		/* one verdict per connection: the process's next ones start
		 * from it, and this one goes on from what the process knows */
		uint32_t b = sc__spin_class_done(&first_waits[tx], budget, hit);
		c->spin_ns[tx] = b ? b : floor;
		return;
	}
	uint32_t *spin = &c->spin_ns[tx];
	if (hit) {
		c->spin_misses[tx] = 0;
		if (*spin < max)
			*spin = *spin * 2 > max ? max : *spin * 2;
		return;
	}
	/* the peer keeps being slower than our budget: spin less, but not for
	 * one hiccup (a preempted peer), and keep a floor so a busy stream
	 * recovers */
	if (++c->spin_misses[tx] >= 4 && *spin > floor) {
		*spin /= 2;
		c->spin_misses[tx] = 0;
	}
}
