/* SPDX-License-Identifier: MIT */
/* Shared between the send path (tx.c), the receive path (rx.c) and conn.c. */
#ifndef SC_TXRX_H
#define SC_TXRX_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "layout.h"

struct sc_conn;

/* The peer's SC_SF_* flags, validated (garbage counts as an abort). */
uint32_t sc__peer_flags(struct sc_conn *c);
/* Block until cond holds: spin, arm, sleep.  0 or -errno. */
int sc__conn_wait(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *));
/* The same, for "a receive (tx: a send) would not block", and with a
 * CLOCK_MONOTONIC deadline (UINT64_MAX: none); takes the direction's
 * lock.  0 when ready, -ETIMEDOUT, -EINTR (never restarted: the socket
 * timeouts' rule), or another -errno. */
int sc__conn_wait_ready(struct sc_conn *c, bool tx, uint64_t deadline_ns);
/* ... until want bytes are there to read, or anything ends the wait */
int sc__conn_wait_avail(struct sc_conn *c, int64_t want, uint64_t deadline_ns);
bool sc__rx_lowat_ready(struct sc_conn *c);     /* c->lowat_want bytes, or the end */
bool sc__rx_ready(struct sc_conn *c);
bool sc__tx_ready(struct sc_conn *c);
/* Held wake-ups (SC_MORE, sc_set_cork) end after this long, as the kernel's
 * probe timer sends corked bytes after TCP_RTO_MIN. */
#define SC_CORK_MS 200u
void sc__cork_expire(struct sc_conn *c, uint64_t now);
/* txlock held: publish held bytes (the caller wakes the peer, or is about
 * to); true if there were any or a wake-up was held. */
bool sc__tx_flush_locked(struct sc_conn *c);
void sc__cork_note(void);       /* link.c: a hold began; the control thread ticks */
/* The send window (bytes) and the free space within it. */
#define SC_WIN_MIN 4096u
#define SC_WIN_RCV_DEFAULT 65536u      /* a fresh kernel socket's window */
uint32_t sc__tx_win(struct sc_conn *c);
int64_t sc__tx_space(struct sc_conn *c, uint64_t want);
/*
 * Where a send's bytes come from: the caller's buffers (iov), or a reader
 * (rd: splice from a pipe).  rd(arg, v, n) runs under txlock with room in
 * the ring for every byte of v (we are the ring's only producer: the room
 * can only grow meanwhile); it reads at most that, never waiting, and
 * returns the count, 0 when it has nothing now (the send ends there), or
 * -errno.  end: what it returned when it filled no devmem chunk.
 */
struct sc_src {
	const struct iovec *iov;
	int iovcnt;
	ssize_t (*rd)(void *arg, const struct iovec *v, int n);
	void *arg;
	int end;
};
/* A send of at most len bytes from a reader: as sc_sendv (flags, waits,
 * window, holds), ending where the reader has nothing more. */
ssize_t sc__send_from(struct sc_conn *c, struct sc_src *src, size_t len, int flags);
/* Where a receive's bytes go instead of the caller's buffers: a writer
 * (splice into a pipe).  wr(arg, v, n) runs under rxlock with v the ring's
 * readable bytes (at most the length asked); it takes what it can without
 * waiting and returns the count (> 0: consumed), or -errno (-EAGAIN: no
 * room). */
struct sc_dst {
	ssize_t (*wr)(void *arg, const struct iovec *v, int n);
	void *arg;
};
/* A receive of at most len bytes into a writer: as sc_recvv (flags, waits,
 * the end, resets; not SO_RCVLOWAT, which splice ignores). */
ssize_t sc__recv_to(struct sc_conn *c, const struct sc_dst *dst, size_t len, int flags);
/* Nonblocking: request an edge wake-up; true if cond holds after all. */
bool sc__conn_arm_edge(struct sc_conn *c, bool tx, bool (*cond)(struct sc_conn *));
/* The peer reset c: record it (sticky, counted once); -ECONNRESET. */
int sc__conn_reset(struct sc_conn *c);
/* Data moved: drop the edge interest set by an earlier EAGAIN (only the
 * owner of the flag calls this). */
static inline void sc__disarm_edge(_Atomic uint32_t *flag)
{
	if (atomic_load_explicit(flag, memory_order_relaxed) & SC_ARM_EDGE)
		atomic_fetch_and_explicit(flag, ~SC_ARM_EDGE, memory_order_relaxed);
}
/* Make sure c has a channel to be woken on (its own by default). */
int sc__conn_channel(struct sc_conn *c);

/* Devmem on a connection (dmpath.c; devmem.h) */
struct sc_dm_rx;
struct sc_dm_frag;
void sc__dm_tx_prepare(struct sc_conn *c);              /* txlock */
bool sc__dm_tx_ready(struct sc_conn *c);                /* tx.c */
ssize_t sc__dm_send_one(struct sc_conn *c, struct sc_src *src, size_t skip, size_t len,
			uint32_t *seq);                 /* txlock */
void sc__dm_wait(struct sc_conn *c, uint32_t seq);      /* txlock */
int sc__dm_rx_start(struct sc_conn *c, struct sc_dm_rx *rx);    /* rxlock */
void sc__dm_rx_end(struct sc_conn *c, struct sc_dm_rx *rx);
/* Tokens came back for c's receiver: a sender waiting for a chunk hears it. */
void sc__dm_space_freed(struct sc_conn *c);
ssize_t sc__recv_devmem(struct sc_conn *c, struct sc_dm_rx *rx, const struct iovec *iov,
			int iovcnt, struct sc_dm_frag *frags, int max, int *nfrags,
			size_t *linear, int flags);
ssize_t sc__dm_recv_records(struct sc_conn *c, struct sc_dm_rx *rx, int64_t avail,
			    size_t budget, struct sc_dm_frag *out, int max, int *n);

#endif
