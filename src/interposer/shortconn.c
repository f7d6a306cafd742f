/* SPDX-License-Identifier: MIT */
/*
 * Short connections stay on TCP.
 *
 * An accelerated connection is also a kernel TCP connection (its
 * handshake, its close), plus the offer, the claim and the OPEN: a
 * connection that carries one request and its answer costs more CPU on
 * shared memory than on TCP alone (docs/profile.md), and a program that
 * opens one per request (HTTP/1.0, PHP, pgbench -C, health checks) would
 * run slower under shortcut.  So a client learns, per destination port,
 * whether its connections pay: one whose data calls on shared memory were
 * fewer than SHORT_CALLS and moved less than SHORT_BYTES when it closed
 * was short.  After SHORT_STREAK short ones in a row to a port, the next
 * connections there stay on TCP (fallback `short_connections`); now and
 * then one goes on shared memory again to probe: a long one puts the port
 * back on shared memory, a short one doubles the wait before the next
 * probe (8 connections, up to SKIP_MAX).
 *
 * Where they go on TCP (SHORTCUT_SHORT_TCP=1, the default): where shared
 * memory loses.  A lone client and a server that answers from its own
 * process, on a machine with CPUs to spare, both spin for each other and
 * beat TCP even for one exchange (1.08x in `make bench`); on a crowded
 * machine (threads waiting for CPUs: no spinning, 8 clients 0.73x),
 * without spinning (SHORTCUT_SPIN_US=0), or against a server that forks a
 * process per connection (each child builds its link group: 0.78x) they
 * lose.  So a learnt port's connection goes on TCP when one of those
 * holds at its connect().  SHORTCUT_SHORT_TCP=2: always, once learnt;
 * 0: never (every connection accelerated).
 *
 * Ports in TIME_WAIT: a client's close on shared memory is the passive
 * one (linger.c), as over kernel TCP, so short connections need no rule
 * of their own; those that still close first are counted (tw_room).
 *
 * Per process and lock-free (a fork child inherits what its parent learnt):
 * a small table of ports, each entry two atomic words.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "config.h"
#include "spin.h"
#include "interposer.h"

#define SHORT_SLOTS  64
#define SHORT_PROBE  4          /* entries looked at for a port */
#define SHORT_CALLS  8
#define SHORT_BYTES  (64u << 10)
#define SHORT_STREAK 4
#define SKIP_FIRST   8
#define SKIP_MAX     1024

/* an entry: bit 63 used, bits 32..62 connections left to put on TCP,
 * 24..31 level (0: learning; n: the n-th wait), 16..23 short streak,
 * 0..15 the port */
#define E_USED    (1ull << 63)
#define E_SKIP(v) ((uint32_t)((v) >> 32) & 0x7fffffffu)
#define E_LEVEL(v) ((uint32_t)((v) >> 24) & 0xffu)
#define E_STREAK(v) ((uint32_t)((v) >> 16) & 0xffu)
#define E_PORT(v) ((uint16_t)(v))
#define E_MAKE(port, streak, level, skip) \
	(E_USED | (uint64_t)(skip) << 32 | (uint64_t)(level) << 24 | \
	 (uint64_t)(streak) << 16 | (port))

static _Atomic uint64_t tab[SHORT_SLOTS];
/* beside each entry: the peer processes of its port's last 4 short
 * connections (a server's workers take turns), and how many short ones in
 * a row had a peer none of them had: 2 or more, a server that forks a
 * process per connection */
static _Atomic uint64_t recent[SHORT_SLOTS][4];     /* identities */
static _Atomic uint32_t fresh[SHORT_SLOTS];

static void forget_peers(size_t i)
{
	for (int k = 0; k < 4; k++)
		atomic_store_explicit(&recent[i][k], 0, memory_order_relaxed);
	atomic_store_explicit(&fresh[i], 0, memory_order_relaxed);
}

static unsigned slot_hash(uint16_t port)
{
	return (port * 40503u) >> 7;
}

/* port's entry, or (make) a new one for it (taking a free entry, else
 * the port's first: what another port learnt is forgotten); NULL if none */
static _Atomic uint64_t *entry(uint16_t port, bool make)
{
	unsigned h = slot_hash(port);
	for (unsigned i = 0; i < SHORT_PROBE; i++) {
		_Atomic uint64_t *e = &tab[(h + i) % SHORT_SLOTS];
		uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
		if ((v & E_USED) && E_PORT(v) == port)
			return e;
	}
	if (!make)
		return NULL;
	for (unsigned i = 0; i < SHORT_PROBE; i++) {
		_Atomic uint64_t *e = &tab[(h + i) % SHORT_SLOTS];
		uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
		if (!(v & E_USED) &&
		    /* seq_cst (kept): an entry is one word; relaxed would likely do */
		    atomic_compare_exchange_strong_explicit(e, &v, E_MAKE(port, 0, 0, 0),
		    		memory_order_seq_cst, memory_order_seq_cst)) {
			forget_peers((size_t)(e - tab));
			return e;
		}
	}
	_Atomic uint64_t *e = &tab[h % SHORT_SLOTS];
	/* seq_cst (kept): as above */
	atomic_store_explicit(e, E_MAKE(port, 0, 0, 0), memory_order_seq_cst);
	forget_peers((size_t)(e - tab));
	return e;
}

/* A setting of our network namespace's, /proc/sys/net/ipv4/name: its
 * two numbers (the second 0 if it has one), false if unreadable. */
static bool net_sysctl(const char *name, unsigned *a, unsigned *b)
{
	char path[96], buf[64];
	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = R(read)(fd, buf, sizeof(buf) - 1);
	R(close)(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	*b = 0;
	return sscanf(buf, "%u %u", a, b) >= 1;
}

/* net.ipv4.tcp_tw_reuse of our network namespace, read once: 0, 1 or 2
 * (its default, and what an unreadable one is taken for). */
static int tw_reuse(void)
{
	static _Atomic int v = -1;      /* (relaxed: any reader's value is the same) */
	int r = atomic_load_explicit(&v, memory_order_relaxed);
	if (r >= 0)
		return r;
	unsigned x, unused;
	r = net_sysctl("tcp_tw_reuse", &x, &unused) && x <= 2 ? (int)x : 2;
	atomic_store_explicit(&v, r, memory_order_relaxed);
	return r;
}

/* May the kernel give a new connection to dst a port in TIME_WAIT? */
bool tw_reusable(const struct sc_addr16 *dst)
{
	int r = tw_reuse();
	return r == 1 || (r == 2 && sc__addr_is_loopback(dst));
}

/* The ephemeral ports of our network namespace (ip_local_port_range),
 * read once; Linux's default range where it cannot be read. */
static uint32_t ephemeral_ports(void)
{
	static _Atomic uint32_t v;      /* (relaxed: any reader's value is the same) */
	uint32_t r = atomic_load_explicit(&v, memory_order_relaxed);
	if (r)
		return r;
	unsigned lo, hi;
	r = net_sysctl("ip_local_port_range", &lo, &hi) && hi >= lo && hi < 65536 ?
	    hi - lo + 1 : 60999 - 32768 + 1;
	atomic_store_explicit(&v, r, memory_order_relaxed);
	return r;
}

/* Ports in TIME_WAIT a client keeps, where the kernel does not reuse
 * them: a client's close on shared memory is the passive one (linger.c),
 * but one whose server did not close in time, or that could not wait,
 * closes first and keeps its port for a minute.  A client opening
 * connections there faster than the ports last would run out of them
 * (EADDRNOTAVAIL: docs/limits.md).  So those closes are counted against
 * the ports: a quarter of them at once and a quarter a minute after that;
 * past that, new connections to such a destination go on TCP (`limits`)
 * until the rate is back under it.  A generic cell rate, one atomic word:
 * the time (us) by which what was spent is paid back. */
static _Atomic uint64_t tw_tat;

static uint64_t tw_interval(void)
{
	return 240000000ull / ephemeral_ports();        /* us a port stays taken, per port */
}

bool tw_room(const struct sc_addr16 *dst)
{
	if (tw_reusable(dst))
		return true;
	uint64_t tol = tw_interval() * (ephemeral_ports() / 4);
	/* (relaxed: a rate, not an order) */
	uint64_t t = atomic_load_explicit(&tw_tat, memory_order_relaxed);
	return t <= sc__now_ns() / 1000 + tol;
}

void tw_spent(void)
{
	uint64_t iv = tw_interval(), now = sc__now_ns() / 1000;
	/* (relaxed: as above; the compare-exchange adds each once) */
	uint64_t t = atomic_load_explicit(&tw_tat, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&tw_tat, &t, (t > now ? t : now) + iv,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* Shared memory loses for short connections to this entry's port now? */
static bool short_loses(_Atomic uint64_t *e)
{
	if (sc__cfg.short_tcp == 2 || !sc__cfg.spin_ns)
		return true;
	if (atomic_load_explicit(&fresh[e - tab], memory_order_relaxed) >= 2)
		return true;
	return sc__spin_crowded();
}

bool short_skip(uint16_t port)
{
	if (!sc__cfg.short_tcp)
		return false;
	_Atomic uint64_t *e = entry(port, false);
	if (!e)
		return false;
	uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
	if (!(v & E_USED) || E_PORT(v) != port || !E_SKIP(v) || !short_loses(e))
		return false;
	do {
		if (!(v & E_USED) || E_PORT(v) != port || !E_SKIP(v))
			return false;
	/* seq_cst (kept): as in short_entry */
	} while (!atomic_compare_exchange_weak_explicit(e, &v, v - (1ull << 32),
			memory_order_seq_cst, memory_order_seq_cst));
	return true;
}

void short_learn(uint16_t port, uint64_t calls, uint64_t bytes, uint64_t peer)
{
	if (!sc__cfg.short_tcp || !port)
		return;
	bool is_short = calls < SHORT_CALLS && bytes < SHORT_BYTES;
	_Atomic uint64_t *e = entry(port, is_short);  /* a long one: nothing to learn */
	if (!e)
		return;
	if (is_short && peer) {
		/* a short connection's peer: one of the last 4 (a worker
		 * of the server's), or a process never seen (a child forked
		 * for it, when that happens twice in a row) */
		size_t i = (size_t)(e - tab);
		bool seen = false, any = false;
		for (int k = 0; k < 4; k++) {
			uint64_t p = atomic_load_explicit(&recent[i][k], memory_order_relaxed);
			seen |= p == peer;
			any |= p != 0;
		}
		if (seen) {
			atomic_store_explicit(&fresh[i], 0, memory_order_relaxed);
		} else {
			if (any && atomic_load_explicit(&fresh[i], memory_order_relaxed) < 255)
				atomic_fetch_add_explicit(&fresh[i], 1, memory_order_relaxed);
			for (int k = 3; k > 0; k--)
				atomic_store_explicit(&recent[i][k],
						      atomic_load_explicit(&recent[i][k - 1],
									   memory_order_relaxed),
						      memory_order_relaxed);
			atomic_store_explicit(&recent[i][0], peer, memory_order_relaxed);
		}
	}
	uint64_t v = atomic_load_explicit(e, memory_order_relaxed), nv;
	uint32_t level;
	do {
		if (!(v & E_USED) || E_PORT(v) != port)
			return;                 /* taken by another port meanwhile */
		uint32_t streak = E_STREAK(v), skip = E_SKIP(v);
		level = E_LEVEL(v);
		if (!is_short) {
			streak = level = skip = 0;
		} else if (level) {             /* a probe (or one opened before) */
			if (level < 8)
				level++;
			skip = SKIP_FIRST << (level - 1);
		} else if (++streak >= SHORT_STREAK) {
			streak = 0;
			level = 1;
			skip = SKIP_FIRST;
		}
		nv = E_MAKE(port, streak, level, skip > SKIP_MAX ? SKIP_MAX : skip);
	/* seq_cst (kept): as in short_entry */
	} while (!atomic_compare_exchange_weak_explicit(e, &v, nv,
			memory_order_seq_cst, memory_order_seq_cst));
	if (E_LEVEL(nv) == 1 && !E_LEVEL(v))
		LOG(1, "connections to port %u close after a short exchange: the next ones "
		    "go on TCP where shared memory loses for them (a crowded machine, no "
		    "spinning, a server forking per connection), probing now and then "
		    "(SHORTCUT_SHORT_TCP=0: accelerate all)", port);
	else if (!E_LEVEL(nv) && E_LEVEL(v))
		LOG(1, "connections to port %u carry more now: back on shared memory", port);
}
