/* SPDX-License-Identifier: MIT */
/*
 * A connection: one slot of a link group seen from one side.  The send path
 * owns tx (this side's producer view), the receive path owns rx.
 */
#ifndef SC_CONN_H
#define SC_CONN_H

#include <time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shortcut.h"
#include "compat.h"
#include "layout.h"
#include "lock.h"
#include "ring.h"

/* local state flags (c->lflags) */
#define SC_LF_SHUT_WR   0x1u
#define SC_LF_SHUT_RD   0x2u
#define SC_LF_PEER_GONE 0x4u    /* peer process died after a clean close: EOF */
#define SC_LF_DEATH_SWITCH 0x8u /* peer died having forked (SC_SF_FORKED): read
				 * what it left, then go on over TCP */


struct sc_conn {
	struct sc_group *g;
	uint32_t slot;
	int side;
	struct sc_slot *s;
	struct sc_slot_side *me, *peer;
	struct sc_ring tx, rx;
	struct sc_lock txlock, rxlock;  /* one sender, one receiver at a time */

	struct sc_chan *own;    /* private channel, created on first wait */
	/* bound channel (own or shared; NULL: none yet) and our cell index for
	 * it in g; written under bindlock, read by wakers under the group lock */
	struct sc_chan *_Atomic chan;
	_Atomic uint32_t cell;
	/* more channels watching it (sc__chan_attachx), their cells, and
	 * their user pointers; under bindlock like chan */
	struct sc_chan *_Atomic chanx[SC_XCELLS];
	_Atomic uint32_t cellx[SC_XCELLS];
	void *userx[SC_XCELLS];
	pthread_mutex_t bindlock;

	_Atomic int err;        /* sticky -ECONNRESET / -EPROTO / -ECONNREFUSED */
	uint32_t early;         /* side 1: bytes of ours the opener put in the
				 * ring from our offer (before our first send) */
	_Atomic uint32_t lflags;
	bool nonblock, linger0;
	/* published bytes whose wake-up is held back (SC_MORE, sc_set_cork):
	 * written under txlock; the control thread reads them to end a hold
	 * after SC_CORK_MS (sc__cork_expire) */
	_Atomic bool corked;
	_Atomic uint64_t cork_ns;       /* when the hold began */
	bool cork_opt;                  /* sc_set_cork: every send holds */
	/* someone polls the connection's fd (sc_conn_fd): keep the edge
	 * interest set across data moves, so every change can signal it */
	bool polled;
	uint32_t rcvlowat;      /* SO_RCVLOWAT: a blocking receive waits for this much */
	_Atomic uint32_t sndbuf;        /* SO_SNDBUF as the program set it (0: not set) */
	int64_t lowat_want;     /* ... the amount the present wait is for */
	bool polled_out;        /* ... and wants to hear of room (POLLOUT) */
	/* sends that ran out of room (the kernel's SOCK_NOSPACE): room is an
	 * EPOLLET edge only after one; written under txlock, read relaxed */
	_Atomic uint32_t tx_nospace;
	uint32_t spin_ns[2];    /* adaptive spin budget: [0] receive, [1] send */
	uint32_t spin_misses[2];        /* consecutive spins that ended in sleep */
	bool waited[2];         /* a wait in that direction was made (spin.c) */
	void *user;
	uint64_t tag;           /* claim tag from the OPEN (interposer handshake) */
	/* single writer (under txlock / rxlock), read by stats: relaxed */
	_Atomic uint64_t bytes_sent, bytes_received, spin_hits;
	_Atomic uint64_t wakeups, sleeps;
	struct sc_conn *next;   /* listener backlog */
	/* switching back to TCP (SC_SW_*): from FROZEN on, send and receive
	 * return -SC_ESWITCHED; written under both direction locks (ASKED:
	 * by the control thread) */
	_Atomic int sw;
	/* the switch was asked by a child waiting in an epoll set of ours
	 * that has this connection (sw_req's SC_SWREQ_EPOLL) */
	_Atomic bool sw_child_set;
	/* devmem: the receiver's region our ring is framed for (txlock; set
	 * once, by sc__dm_tx_prepare) */
	struct sc_dm_peer *dm_peer;
	/* a switch's re-send of a framed ring: the bytes of the record at
	 * its cursor already re-sent (switch.c) */
	uint32_t dm_resend_off;
	/* devmem: we asked for records on our receive ring (rxlock; set by
	 * sc__dm_rx_start).  The header's framed_from is the peer's word: a
	 * framed ring we never asked for is its scribble, not devmem */
	bool dm_rx_asked;
};

enum { SC_SW_NONE, SC_SW_ASKED, SC_SW_FROZEN, SC_SW_TCP };

/*
 * A connection's own state, read by a waiter's condition (sc__rx_ready,
 * the send path's) after the seq_cst fence of sc__chan_arm_conn or
 * sc__conn_arm_edge, and changed before the wake-up that follows
 * (sc__notify_self, sc__notify_peer): seq_cst, Dekker's pattern (the
 * setter's store before its look at the cell; the waiter's arming before
 * its load of these).  Plain loads cost nothing more on x86-64.
 */
static inline int sc__conn_err(struct sc_conn *c)
{
	return atomic_load_explicit(&c->err, memory_order_seq_cst);
}

/* The sticky error, set once (0 → err); true if this call set it. */
static inline bool sc__conn_set_err(struct sc_conn *c, int err)
{
	int expected = 0;
	/* seq_cst: a waiter's condition (above) */
	return atomic_compare_exchange_strong_explicit(&c->err, &expected, err,
						       memory_order_seq_cst,
						       memory_order_seq_cst);
}

static inline uint32_t sc__conn_lflags(struct sc_conn *c)
{
	return atomic_load_explicit(&c->lflags, memory_order_seq_cst);
}

/* Or f into lflags; the flags before. */
static inline uint32_t sc__conn_add_lflags(struct sc_conn *c, uint32_t f)
{
	/* seq_cst: a waiter's condition (above) */
	return atomic_fetch_or_explicit(&c->lflags, f, memory_order_seq_cst);
}

static inline int sc__conn_sw(struct sc_conn *c)
{
	return atomic_load_explicit(&c->sw, memory_order_seq_cst);
}

/* (under both direction locks, or the compare-exchange to ASKED) */
static inline void sc__conn_set_sw(struct sc_conn *c, int sw)
{
	/* seq_cst: a waiter's condition (above) */
	atomic_store_explicit(&c->sw, sw, memory_order_seq_cst);
}

/* ASKED if it was NONE; what it was (SC_SW_NONE: this call asked). */
static inline int sc__conn_ask_sw(struct sc_conn *c)
{
	int expected = SC_SW_NONE;
	/* seq_cst: a waiter's condition (above) */
	atomic_compare_exchange_strong_explicit(&c->sw, &expected, SC_SW_ASKED,
						memory_order_seq_cst, memory_order_seq_cst);
	return expected;
}

/* The bound channel and its cell: stored with release in chan_attach and
 * chan_detach (notify.c, under bindlock), read with acquire by whoever
 * does not hold bindlock (the waiting thread, a waker under the group
 * lock), so that the channel it points to is seen set up. */
static inline struct sc_chan *sc__conn_chan(struct sc_conn *c)
{
	return atomic_load_explicit(&c->chan, memory_order_acquire);
}

static inline uint32_t sc__conn_cell(struct sc_conn *c)
{
	return atomic_load_explicit(&c->cell, memory_order_acquire);
}

/* What sc_send/sc_recv return on a connection frozen for the switch (an
 * internal code: the interposer goes on over TCP). */
#define SC_ESWITCHED 1477

/*
 * Switching a connection back to TCP, at a clean cut (the interposer's, for
 * an fd going to code without the library).  Each side in turn, holding
 * both direction locks:
 *   sc__switch_freeze  stop using the rings, publish FROZEN (our consumed
 *                      cursor is final), send SWITCH so that the peer does
 *                      the same, and wake our own waiters;
 *   sc__switch_range   once the peer is frozen (or gone): the bytes of our
 *                      ring it never read, [*from, *to) — the caller
 *                      re-sends them on TCP;
 *   sc__switch_done    publish ONTCP.
 * The connection stays allocated (calls on it fail with -SC_ESWITCHED)
 * until sc__switch_release.
 */
void sc__switch_freeze(struct sc_conn *c);
/* 1 and the range once the peer is frozen or gone, 0 while it is not. */
int sc__switch_range(struct sc_conn *c, uint64_t *from, uint64_t *to);
void sc__switch_done(struct sc_conn *c);
void sc__switch_release(struct sc_conn *c);

/* sc_conn_fd for a poller: arm the fd for input changes, and for room
 * only if want_out; returns the fd or -errno. */
int sc__conn_poll_arm(struct sc_conn *c, bool want_out);
/* The same for a caller about to sleep on that fd itself (poll, select):
 * a shared channel's token is armed too, as a blocked call arms it, so
 * that the next change signals the fd even while the channel's own
 * waiter (an epoll set) is awake.  A wake-up datagram it leaves behind
 * is the channel owner's to drain (the interposer resets it). */
int sc__conn_poll_arm_(struct sc_conn *c, bool want_out, bool sleeper);
/* A quiet OPEN (docs/interposer.md §3).  A client waiting for its OPEN
 * while it spins sets a word of its offer's (in the run directory) from 0
 * to SPIN with its tag, and back when it stops.  An opener whose group
 * the client's process has joined swaps exactly that for the slot's name
 * (OPEN, the slot, the group id's low 54 bits) instead of sending the
 * OPEN: no message, so no wake-up of the client's control thread, and no
 * system call on either side.  One compare-and-swap on each side decides
 * which way the OPEN goes: never both, never none; the tag, that it is
 * this connection's (an entry the claimer freed may be another
 * namespace's offer by the time a late client spins). */
#define SC_QUIET_SPIN   1u      /* kinds: the word's low two bits */
#define SC_QUIET_OPEN   2u
#define SC_QUIET_GID    ((1ull << 54) - 1)
static inline uint64_t sc__quiet_spin(uint64_t tag)
{
	return tag << 8 | SC_QUIET_SPIN;        /* (tags: 56 bits) */
}
static inline uint64_t sc__quiet_word(uint64_t group_id, uint32_t slot)
{
	return (group_id & SC_QUIET_GID) << 10 | (uint64_t)(slot & 0xff) << 2 | SC_QUIET_OPEN;
}
static inline bool sc__quiet_open(uint64_t w)
{
	return (w & 3) == SC_QUIET_OPEN;
}

/* sc_connect with a claim tag carried in the OPEN message, and the peer's
 * first bytes (early, elen ≤ SC_EARLY_MAX: from its offer) put in the
 * receiving ring before the OPEN tells it so; a new link group's segment
 * no larger than max_seg (0: any; -ENOMEM if one slot does not fit).
 * peer_ident: the identity of the process listening at path (its group's
 * peer_ident).  quiet (NULL: none): the waiting client's word; *quietly
 * says whether the OPEN went there (the client then frees its offer). */
int sc__connect_tagged(const char *path, uint64_t tag, uint64_t peer_ident,
		       const uint8_t *early, uint32_t elen, uint64_t max_seg, int flags,
		       _Atomic uint64_t *quiet, bool *quietly, struct sc_conn **out);
/* Create the local half of slot s in g (group locked). */
int sc__conn_new(struct sc_group *g, uint32_t slot, struct sc_conn **out);
/* Record a peer violation on c: sticky -EPROTO, counted. */
int sc__conn_proto_error(struct sc_conn *c);
/* Refuse/abort a connection that was never handed to the user and free it;
 * the caller holds no lock. */
void sc__conn_refuse(struct sc_conn *c);
/* Group lock held: the peer process is dead (EOF or a reset, as TCP would
 * tell it); our waiters wake.  Also for a peer that died having forked
 * (SC_LF_DEATH_SWITCH) once its kernel connection has ended: no child goes
 * on with it. */
void sc__conn_peer_dead(struct sc_conn *c);

/* sc_close in two steps: the ending told to the peer (who reads what we
 * sent, then EOF: true; false for a reset, or a connection that had
 * failed), then, later, our slot let go.  Between them the connection's
 * send ring stays as it was: a peer that switches to TCP after our close
 * gets what it never read re-sent from it (linger.c). */
bool sc__close_begin(struct sc_conn *c);
void sc__conn_release(struct sc_conn *c);
/* Publish our side flags (private copy first). */
void sc__conn_set_flags(struct sc_conn *c, uint32_t f);

#endif
