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
 *  - the waits of a connection's set-up (a client's for its OPEN, the
 *    acceptor's for the client's spin, a blocking accept) are short when
 *    the peer is on a CPU and long when it must be woken, nothing between:
 *    a budget halved at each miss made every long one a miss, and a few
 *    in a row (a moment of noise) stopped the spins for good, the OPENs
 *    going as messages in a third of the connections.  So such a class
 *    spins the whole budget while 12 of its last 16 verdicts were hits,
 *    and otherwise not at all but for a probe of the whole budget every
 *    PROBE_EVERY-th wait, whose hit makes it spin again;
 *  - nothing spins on a crowded machine: the spinner would hold a core
 *    the peer may be waiting for.  Crowded is the kernel's CPU pressure
 *    (/proc/pressure/cpu): some thread waited for a CPU more than a fifth
 *    of the time since the last sample.  Where that file cannot be read,
 *    more runnable threads than the CPUs we may run on (/proc/loadavg).
 *    Sampled at most every CROWD_MS by whichever waiter asks first.  Not
 *    the instant count first: a thread woken for a few microseconds (our
 *    own control thread, taking the previous connection's message) made
 *    a third runnable one on two CPUs and stopped the spins of 10 ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "spin.h"
#include "stats.h"
#include "sys.h"

#define CROWD_MS 10u
#define CROWD_STALL_PERMILLE 200u  /* crowded: stalled over a fifth of the time */
#define CROWD_WINDOW_MAX_US 1000000u /* an older sample says nothing of now */
#define PROBE_EVERY 32u          /* first waits between probes at budget 0 */
#define SETUP_VERDICTS 0xffffu   /* a set-up class's last 16 verdicts */
#define SETUP_HITS 12            /* ... of which hits: it spins */

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

/* A small file of /proc whole, NUL-terminated: its length, or -errno. */
static ssize_t read_proc(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = 0;
	return n;
}

/* Runnable threads on the machine now ("R/T", the fourth field of
 * /proc/loadavg, counts the reader too), or -1. */
static long runnable(void)
{
	char buf[128];
	if (read_proc("/proc/loadavg", buf, sizeof(buf)) <= 0)
		return -1;
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

int64_t sc__psi_some_us(const char *text)
{
	const char *line = text;
	while (line && strncmp(line, "some ", 5) != 0) {
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	if (!line)
		return -1;
	const char *end = strchr(line, '\n'), *t = strstr(line, " total=");
	if (!t || (end && t > end))
		return -1;
	char *e;
	errno = 0;
	unsigned long long us = strtoull(t + 7, &e, 10);
	if (e == t + 7 || errno || us > INT64_MAX)
		return -1;
	return (int64_t)us;
}

bool sc__psi_crowded(uint64_t stalled_us, uint64_t window_us)
{
	return stalled_us * 1000u > window_us * CROWD_STALL_PERMILLE;
}

static _Atomic bool psi_none;           /* no pressure file here */
static _Atomic uint64_t psi_at_us, psi_total_us;        /* the last sample */

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The CPU pressure since the last sample: 1 crowded, 0 not, -1 unknown (no
 * pressure file: a kernel without PSI or with psi=0; no sample recent
 * enough to compare with).  Samples are taken by one thread at a time
 * (sc__spin_crowded's election); a torn pair (two samplers 10 ms apart
 * overlapping) only skews one verdict. */
static int pressure_crowded(void)
{
	if (atomic_load_explicit(&psi_none, memory_order_relaxed))
		return -1;
	char buf[256];
	ssize_t n = read_proc("/proc/pressure/cpu", buf, sizeof(buf));
	int64_t total = n > 0 ? sc__psi_some_us(buf) : -1;
	if (total < 0) {
		if (n == -ENOENT || n == -EOPNOTSUPP || n >= 0)
			atomic_store_explicit(&psi_none, true, memory_order_relaxed);
		return -1;
	}
	uint64_t now = mono_us();
	uint64_t at = atomic_exchange_explicit(&psi_at_us, now, memory_order_relaxed);
	uint64_t was = atomic_exchange_explicit(&psi_total_us, (uint64_t)total,
						memory_order_relaxed);
	if (!at || now <= at || now - at > CROWD_WINDOW_MAX_US || (uint64_t)total < was)
		return -1;
	return sc__psi_crowded((uint64_t)total - was, now - at);
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
	int p = pressure_crowded();
	bool c = p >= 0 ? p : runnable() > ncpus();
	atomic_store_explicit(&crowd, c, memory_order_relaxed);
	return c;
}

/* A kind of wait the process learns a budget for, one verdict per wait:
 * ns UINT32_MAX is not set yet (the configured budget). */
static struct sc_spin_class first_waits[2] = { SC_SPIN_CLASS_INIT, SC_SPIN_CLASS_INIT };

static bool setup_spins(uint32_t hits)
{
	return __builtin_popcount(hits & SETUP_VERDICTS) >= SETUP_HITS;
}

static uint32_t setup_budget(struct sc_spin_class *k)
{
	if (setup_spins(atomic_load_explicit(&k->hits, memory_order_relaxed)) ||
	    atomic_fetch_add_explicit(&k->count, 1, memory_order_relaxed) % PROBE_EVERY == 0)
		return sc__cfg.spin_ns;
	return 0;
}

/* A hit while the class does not spin (a probe's, or a spin begun before
 * it stopped): spinning pays again, the history starts afresh. */
static uint32_t setup_done(struct sc_spin_class *k, bool hit)
{
	uint32_t h = atomic_load_explicit(&k->hits, memory_order_relaxed), n;
	do
		n = hit && !setup_spins(h) ? SETUP_VERDICTS : ((h << 1) | hit) & SETUP_VERDICTS;
	while (!atomic_compare_exchange_weak_explicit(&k->hits, &h, n, memory_order_relaxed,
						      memory_order_relaxed));
	return setup_spins(n) ? sc__cfg.spin_ns : 0;
}

uint32_t sc__spin_class_budget(struct sc_spin_class *k)
{
	if (!sc__cfg.spin_ns)
		return 0;
	if (k->setup)
		return setup_budget(k);
	uint32_t b = atomic_load_explicit(&k->ns, memory_order_relaxed);
	if (b == UINT32_MAX)
		b = sc__cfg.spin_ns;
	if (!b && atomic_fetch_add_explicit(&k->count, 1, memory_order_relaxed) % PROBE_EVERY == 0)
		b = sc__cfg.spin_ns / 8 ? sc__cfg.spin_ns / 8 : 1;
	return b;
}

uint32_t sc__spin_class_done(struct sc_spin_class *k, uint32_t budget, bool hit)
{
	if (k->setup)
		return setup_done(k, hit);
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
