/* SPDX-License-Identifier: MIT */
/*
 * Short connections stay on TCP (issue 12).
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
 * probe (8 connections, up to SKIP_MAX).  SHORTCUT_SHORT_TCP=0 accelerates
 * every connection.
 *
 * Per process and lock-free (a fork child inherits what its parent learnt):
 * a small table of ports, each entry one atomic word.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
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
		    atomic_compare_exchange_strong(e, &v, E_MAKE(port, 0, 0, 0)))
			return e;
	}
	_Atomic uint64_t *e = &tab[h % SHORT_SLOTS];
	atomic_store(e, E_MAKE(port, 0, 0, 0));
	return e;
}

bool short_skip(uint16_t port)
{
	if (!sc__cfg.short_tcp)
		return false;
	_Atomic uint64_t *e = entry(port, false);
	if (!e)
		return false;
	uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
	do {
		if (!(v & E_USED) || E_PORT(v) != port || !E_SKIP(v))
			return false;
	} while (!atomic_compare_exchange_weak(e, &v, v - (1ull << 32)));
	return true;
}

void short_learn(uint16_t port, uint32_t calls, uint64_t bytes)
{
	if (!sc__cfg.short_tcp || !port)
		return;
	bool is_short = calls < SHORT_CALLS && bytes < SHORT_BYTES;
	_Atomic uint64_t *e = entry(port, is_short);  /* a long one: nothing to learn */
	if (!e)
		return;
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
	} while (!atomic_compare_exchange_weak(e, &v, nv));
	if (E_LEVEL(nv) == 1 && !E_LEVEL(v))
		LOG(1, "connections to port %u close after a short exchange: the next ones "
		    "stay on TCP, probing now and then (SHORTCUT_SHORT_TCP=0: accelerate all)",
		    port);
	else if (!E_LEVEL(nv) && E_LEVEL(v))
		LOG(1, "connections to port %u carry more now: back on shared memory", port);
}
