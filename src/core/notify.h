/* SPDX-License-Identifier: MIT */
/*
 * Completion channels: how a waiting side is woken.  A channel has, for
 * every link group where it has connections, one cell in the segment
 * (layout.h), and when it is polled a pollable fd.  Wakers set the
 * connection's bit in the cell and make a wake-up call (futex, or the wake
 * socket) only if the owner armed the cell before sleeping.
 */
#ifndef SC_NOTIFY_H
#define SC_NOTIFY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct sc_group;
struct sc_conn;
struct sc_cell;

struct sc_chan_cell {
	struct sc_group *g;
	uint32_t idx;           /* cell index in g's segment, owner side */
	uint32_t nconns;        /* connections of g bound through this cell */
	int rfd;                /* our end of this cell's wake socket, or -1 */
	bool retake;            /* its token re-armed by rearm_all, to drain */
	bool clean;             /* its token taken, and that datagram read (drain_known) */
};

/*
 * A channel that is polled has a pollable fd: an epoll set over one wake
 * socket per link group (a SOCK_DGRAM socketpair: the peer holds the other
 * end, and only that group's peer does) plus a local eventfd.  Nothing the
 * peer can do to its end (fill it, shut it, change its flags) blocks us or
 * touches another group's wake-ups: we read ours with MSG_DONTWAIT.
 */
struct sc_chan {
	int pfd;                /* pollable fd (epoll); -1 until needed (private) */
	int lfd;                /* eventfd for local wake-ups, in pfd's set */
	bool private_;          /* a connection's own channel */
	pthread_mutex_t lock;   /* cells[] */
	struct sc_chan_cell *cells;
	int ncells, cap;
	int nidle;              /* cells with no connection, kept (notify.c) */
	_Atomic int ncells_seen;        /* ncells, for a reader without the lock */
	/* quiet while quiet_at == epoch: every cell was armed (SC_ARM_POLL)
	 * with the fd reset and a collect after that found nothing, so a ready
	 * bit set since then signals the fd.  epoch moves whenever that may
	 * stop being true: a cell added, a token armed for a futex sleep, the
	 * fd drained by anyone but the arming itself. */
	_Atomic uint32_t epoch, quiet_at;
	_Atomic bool lsig;      /* lfd may be signalled (drained without a look) */
};

int sc__chan_new(bool private_, struct sc_chan **out);
void sc__chan_free(struct sc_chan *ch);
/* In a child after fork: drop our copy of a parent's channel (close the
 * child's copies of its fds, free the memory; the cells are the parent's). */
void sc__chan_abandon(struct sc_chan *ch);

/* Bind c (whose group lock the caller does NOT hold) to ch; -errno. */
int sc__chan_attach(struct sc_chan *ch, struct sc_conn *c);
/* Undo sc__chan_attach; the caller holds no group lock. */
void sc__chan_detach(struct sc_chan *ch, struct sc_conn *c);
/* The same for c's extra channel number i (< SC_XCELLS: another waiting
 * context watching c; the peer wakes every one; c's blocked calls use the
 * first).  bindlock held. */
int sc__chan_attachx(struct sc_chan *ch, struct sc_conn *c, int i);
/* sc_chan_bind; quiet: the caller looks at the connection's present state
 * itself (an epoll set's registration, checked at its next wait), so a
 * connection with something to report wakes nobody now (a system call or
 * two and a wait's round less per new connection of an epoll server) */
int sc__chan_bind(struct sc_conn *c, struct sc_chan *ch, bool quiet);
void sc__chan_detachx(struct sc_chan *ch, struct sc_conn *c, int i);
/* Which extra channel of c ch is, or -1. */
int sc__chan_xindex(struct sc_conn *c, struct sc_chan *ch);
/* A group is going away: forget its cells (caller holds the group lock). */
void sc__chan_forget_group(struct sc_chan *ch, struct sc_group *g);

/* Wake every thread of ours sleeping on cell's wake sequence (wake.c). */
void sc__cell_futex_wake(struct sc_cell *cell);
/* Wake the peer's waiter for connection c: set its ready bit and write the
 * peer if it armed that cell.  0 or -EPROTO (wake.c). */
int sc__notify_peer(struct sc_conn *c);
/* Same for our own side (a local event such as the peer's death). */
void sc__notify_self(struct sc_conn *c);

/* Give ch its pollable fd (a private channel gets one only when polled)
 * and a wake socket in every group it has a cell in. */
int sc__chan_ensure_pfd(struct sc_chan *ch);

/* Arm c's cell (SC_ARM_FUTEX or SC_ARM_POLL) before sleeping, full barrier
 * included; the caller re-checks its condition afterwards.  Returns the
 * cell's wake sequence as it was before arming. */
uint32_t sc__chan_arm_conn(struct sc_conn *c, uint32_t mode);
/* Sleep in futex_wait on c's cell until a wake-up after seq (the value
 * sc__chan_arm_conn returned), or the CLOCK_MONOTONIC deadline (ns;
 * UINT64_MAX: none): 0, -ETIMEDOUT or -EINTR. */
int sc__conn_sleep(struct sc_cell *cell, uint32_t seq, uint64_t deadline_ns);
/* Nonblocking caller about to report EAGAIN on a polled connection: reset
 * the fd if a wake-up was delivered, and arm it again. */
void sc__chan_rearm_poll(struct sc_conn *c);
/* Sleep on the channel's pollable fd until signalled or timeout (ms, -1 forever);
 * returns 0, -ETIMEDOUT or -EINTR. */
int sc__chan_sleep(struct sc_chan *ch, int timeout_ms);
/* The connections of ch that became ready since the last collect, without
 * arming its cells: a caller that is not about to sleep leaves them as they
 * are, so that wakers make no system call (the interposer's epoll_wait
 * arms only when it will sleep, through sc_chan_wait). */
int sc__chan_collect(struct sc_chan *ch, struct sc_conn **out, int n);
/* Make the channel's fd readable (its local eventfd), or reset that: the
 * interposer keeps a nested epoll set readable while it has ready entries. */
void sc__chan_signal(struct sc_chan *ch);
void sc__chan_unsignal(struct sc_chan *ch);
/* Arm every cell of ch without resetting its fd (it stays readable, and
 * the next wake-up signals it again); whether its fd is readable now. */
void sc__chan_arm_keep(struct sc_chan *ch);
bool sc__chan_readable(struct sc_chan *ch);
/* Reset the channel's fd: empty its wake sockets and local eventfd. */
void sc__chan_reset(struct sc_chan *ch);
/* Whether ch is quiet (see struct sc_chan): nothing became ready since its
 * last arming but what signals its fd, so a caller that watches that fd
 * (an epoll set's cookie) may skip the collect.  How many cells it has. */
bool sc__chan_quiet(struct sc_chan *ch);
int sc__chan_cells(struct sc_chan *ch);

#endif
