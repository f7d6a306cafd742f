/* SPDX-License-Identifier: MIT */
/*
 * The waker's side of the wake-up protocol (notify.c has the sleeper's and
 * the channels): a connection's state changed, so set its slot's ready bit
 * in the cell that watches it and, if the cell's owner armed it, take the
 * one-shot token and wake the owner (a futex, or a datagram on the cell's
 * wake socket); for our own waiters, whatever the token says.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rawsys.h"
#include "conn.h"
#include "link.h"
#include "notify.h"
#include "stats.h"
#include "sys.h"

static void set_ready(struct sc_cell *cell, uint32_t slot)
{
	_Atomic uint64_t *w = &cell->ready[slot >> 6];
	uint64_t bit = 1ull << (slot & 63);

	/* load first: a bit already set (a busy connection) costs no write */
	if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(w, bit, memory_order_release);
	/* orders the bit (and the caller's earlier cursor store) before the
	 * armed check below; pairs with the sleeper's arm-then-check */
	atomic_thread_fence(memory_order_seq_cst);
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val)
{
	/* shared (not FUTEX_PRIVATE): the word lives in a MAP_SHARED segment
	 * and the sleeper is another process */
	return SC_SYSCALL(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* Wake every thread sleeping on cell (notify.h). */
void sc__cell_futex_wake(struct sc_cell *cell)
{
	atomic_fetch_add_explicit(&cell->wake_seq, 1, memory_order_release);
	futex(&cell->wake_seq, FUTEX_WAKE, INT32_MAX);
}

/* Take an armed flag whose value was v: true if we won it. */
static bool take(struct sc_cell *cell, uint32_t v)
{
	return atomic_compare_exchange_strong_explicit(&cell->armed, &v, 0,
						       memory_order_acq_rel,
						       memory_order_relaxed);
}

/* Wake a peer's channel through its wake socket: never blocks, never
 * raises SIGPIPE; a full socket is already readable. */
static void wake_peer_socket(int fd)
{
	char b = 1;
	int saved = errno;

	if (send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* EAGAIN: already signalled; others: the peer is gone */
	}
	errno = saved;
}

/* Wake the peer's cell idx for c (see sc__notify_peer). */
static int wake_peer_cell(struct sc_conn *c, uint32_t idx)
{
	struct sc_group *g = c->g;

	if (idx == SC_CELL_NONE)
		return 0;       /* the peer has no waiting context yet */
	if (idx >= SC_MAX_CELLS)
		return sc__conn_proto_error(c);
	struct sc_cell *cell = &g->peer_cells[idx];
	set_ready(cell, c->slot);
	uint32_t v = atomic_load_explicit(&cell->armed, memory_order_relaxed);
	if (v == SC_ARM_FUTEX) {
		if (!take(cell, v))
			return 0;
		sc__cell_futex_wake(cell);
	} else if (v == SC_ARM_POLL) {
		/* find the wake socket before taking the flag: a wake-up
		 * taken but not delivered would be lost (the peer's own
		 * hang-up handling relies on the flag still being there) */
		uint32_t gen = atomic_load_explicit(&cell->wake_gen, memory_order_acquire);
		int ws = sc__group_peer_wake(g, idx, gen);
		if (ws < 0)
			return sc__group_dead(g) ? -ECONNRESET :
			       sc__conn_proto_error(c);
		if (!take(cell, v))
			return 0;
		wake_peer_socket(ws);
		/* blocked calls of the peer's on this cell sleep on wake_seq
		 * (the CAS above ordered this load after the token) */
		if (atomic_load_explicit(&cell->futex_waiters, memory_order_relaxed))
			sc__cell_futex_wake(cell);
	} else {
		return 0;       /* not armed (or garbage: only the peer suffers) */
	}
	atomic_fetch_add_explicit(&c->wakeups, 1, memory_order_relaxed);
	SC_STAT_ADD(wakeups_sent, 1);
	return 0;
}

int sc__notify_peer(struct sc_conn *c)
{
	/* acquire: pairs with the peer's release store in chan_attach */
	uint32_t idx = atomic_load_explicit(&c->peer->cell, memory_order_acquire);
	int rc = wake_peer_cell(c, idx);
	for (int i = 0; i < SC_XCELLS && rc == 0; i++) {
		uint32_t x = atomic_load_explicit(&c->peer->cellx[i], memory_order_acquire);
		if (x != SC_CELL_NONE && x != idx)
			rc = wake_peer_cell(c, x);
	}
	return rc;
}

static void notify_self_cell(struct sc_conn *c, uint32_t idx);

void sc__notify_self(struct sc_conn *c)
{
	uint32_t cell = sc__conn_cell(c);
	notify_self_cell(c, cell);
	for (int i = 0; i < SC_XCELLS; i++) {
		uint32_t x = atomic_load_explicit(&c->cellx[i], memory_order_relaxed);
		if (x != SC_CELL_NONE && x != cell)
			notify_self_cell(c, x);
	}
}

static void notify_self_cell(struct sc_conn *c, uint32_t idx)
{
	struct sc_group *g = c->g;

	if (idx == SC_CELL_NONE)
		return;
	struct sc_cell *cell = &g->my_cells[idx];
	set_ready(cell, c->slot);
	/* Our own waiters are woken whatever the cell's token says: the cell
	 * lives in the segment, where the peer may have zeroed the token
	 * before it died, and a local event (that death above all) must
	 * never depend on what the peer wrote.  Local events are rare, so the
	 * wake-up calls are made every time; the token is taken so that a
	 * poller re-arming finds it used and drains its fd.  The channel
	 * pointer is stable while the group lock (held by the caller) is. */
	atomic_exchange_explicit(&cell->armed, 0, memory_order_acq_rel);
	sc__cell_futex_wake(cell);
	if (g->cell_chan[idx])
		sc__chan_signal(g->cell_chan[idx]);
}
