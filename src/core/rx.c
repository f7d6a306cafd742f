/* SPDX-License-Identifier: MIT */
/*
 * Receive path (smc_rx.c's job): copy out of our ring, publish the consumer
 * cursor lazily (SMC's update rule), report end of stream and resets the way
 * TCP does.
 */
#include <errno.h>
#include <limits.h>

#include "conn.h"
#include "devmem.h"
#include "notify.h"
#include "stats.h"
#include "txrx.h"
#include "sys.h"


bool sc__rx_ready(struct sc_conn *c)
{
	return sc__ring_avail(&c->rx) != 0 || sc__conn_err(c) ||
	       atomic_load_explicit(&c->sw, memory_order_relaxed) >= SC_SW_FROZEN ||
	       (sc__peer_flags(c) & (SC_SF_WR_DONE | SC_SF_CLOSED | SC_SF_ABORT | SC_SF_FROZEN)) ||
	       (sc__conn_lflags(c) & (SC_LF_PEER_GONE | SC_LF_SHUT_RD | SC_LF_DEATH_SWITCH));
}

/* SO_RCVLOWAT: enough bytes, or anything that ends the wait */
bool sc__rx_lowat_ready(struct sc_conn *c)
{
	int64_t av = sc__ring_avail(&c->rx);
	return av >= c->lowat_want || av < 0 || sc__conn_err(c) ||
	       atomic_load_explicit(&c->sw, memory_order_relaxed) >= SC_SW_FROZEN ||
	       (sc__peer_flags(c) & (SC_SF_WR_DONE | SC_SF_CLOSED | SC_SF_ABORT | SC_SF_FROZEN)) ||
	       (sc__conn_lflags(c) & (SC_LF_PEER_GONE | SC_LF_SHUT_RD | SC_LF_DEATH_SWITCH));
}

/* Ring empty: 0 for end of stream, -errno for an error, 1 to keep going. */
static int rx_empty_state(struct sc_conn *c)
{
	uint32_t pf = sc__peer_flags(c);        /* may record -EPROTO: read first */
	int e = atomic_load_explicit(&c->err, memory_order_relaxed);

	if (e)
		return e;
	if (pf & SC_SF_REFUSED)
		return -ECONNREFUSED;
	if (pf & SC_SF_ABORT)
		return sc__conn_reset(c);
	if ((pf & SC_SF_FROZEN) || (sc__conn_lflags(c) & SC_LF_DEATH_SWITCH))
		return -SC_ESWITCHED;   /* the peer went back to TCP: so do we */
	if ((pf & (SC_SF_WR_DONE | SC_SF_CLOSED)) || (sc__conn_lflags(c) & SC_LF_PEER_GONE)) {
		/* the flag was stored after the last cursor: look again */
		int64_t av = sc__ring_avail(&c->rx);
		if (av < 0)
			return sc__conn_proto_error(c);
		return av ? 1 : 0;
	}
	if (sc__conn_lflags(c) & SC_LF_SHUT_RD)
		return 0;
	return 1;
}

/* A devmem receive's fragments and its linear bytes (sc_recv_devmem). */
struct dm_out {
	struct sc_dm_rx *rx;
	struct sc_dm_frag *frags;
	int max, n;
	size_t linear;
};

/* The writer takes up to n of the ring's bytes at cons: the count
 * (consumed), or -errno. */
static ssize_t get_written(struct sc_conn *c, const struct sc_dst *dst, size_t n)
{
	struct iovec v[2];
	int nv = sc__ring_span(&c->rx, c->rx.cons, n, v);
	ssize_t k = dst->wr(dst->arg, v, nv);
	if (k == 0)
		return -EAGAIN;         /* (a writer says so itself) */
	if (k > 0)
		c->rx.cons += (uint64_t)k;
	return k;
}

/* Bytes left the ring: where cons moved (not a peek), the peer learns of
 * the room (woken if it waits for it); the edge is disarmed unless the
 * connection is polled. */
static inline void rx_taken(struct sc_conn *c, bool moved)
{
	if (moved) {
		atomic_store_explicit(&c->s->consumed[c->side].rx_consumed, c->rx.cons,
				      memory_order_relaxed);
		if (sc__ring_update_cons(&c->rx, false))
			sc__notify_peer(c);
	}
	if (!c->polled)
		sc__disarm_edge(&c->rx.h->rx_armed);
}

/* Wait for want bytes in the ring (or the stream's end, or a switch): 0
 * or the wait's -errno.  A wake-up is only a hint: look again after each. */
static int rx_wait_for(struct sc_conn *c, int64_t want)
{
	int rc = 0;
	c->lowat_want = want;
	while (!rc && !sc__rx_lowat_ready(c) && sc__conn_sw(c) < SC_SW_FROZEN)
		rc = sc__conn_wait(c, false, sc__rx_lowat_ready);
	return rc;
}

/* Before a blocking receive of total bytes, as TCP: SO_RCVLOWAT's
 * min(mark, len) is enough if it is there now, else only the full mark
 * (or the end) wakes the reader; a waiting peek goes on past what it saw
 * until the whole length is there (tcp_recvmsg).  0 or -errno. */
static int rx_prewait(struct sc_conn *c, size_t total, int flags, bool nb, bool to_dst)
{
	bool peek = flags & SC_PEEK;
	int64_t cap = (int64_t)c->rx.size;
	if (c->rcvlowat > 1 && !nb && !peek && !(flags & SC_WAITALL) && !to_dst) {
		int64_t want = (int64_t)(c->rcvlowat < total ? c->rcvlowat : total);
		if (sc__ring_avail(&c->rx) < (want < cap ? want : cap))
			return rx_wait_for(c, c->rcvlowat < cap ? c->rcvlowat : cap);
	}
	if (peek && (flags & SC_WAITALL) && !nb) {
		int64_t want = (int64_t)total < cap ? (int64_t)total : cap;
		if (sc__ring_avail(&c->rx) < want)
			return rx_wait_for(c, want);
	}
	return 0;
}

/* How much of n bytes to copy before the ring's room is released: a
 * quarter of the ring at most.  A copy of a message as large as the ring
 * released it all at its end, so a sender waiting for room (asleep, at
 * SHORTCUT_SPIN_US=0) wrote nothing meanwhile: a stream of 1 MiB messages
 * with 1 MiB rings ran at 0.83x kernel TCP, 2.9x with 4 MiB rings.
 * Released in parts, the sender fills what the reader has emptied while
 * it copies the rest. */
static size_t rx_part(const struct sc_conn *c, size_t n)
{
	size_t q = c->rx.size / 4;
	return n > q && q ? q : n;
}

/* n of the ring's bytes into iov, after the done bytes a previous round
 * put there: how many. */
static size_t rx_copy(struct sc_conn *c, const struct iovec *iov, int iovcnt, size_t done,
		      size_t n, bool peek)
{
	if (!done)
		return sc__ring_get(&c->rx, iov, iovcnt, n, peek);
	struct iovec rest[IOV_MAX];
	int k = sc__iov_rest(iov, iovcnt, done, rest);
	return sc__ring_get(&c->rx, rest, k, n, peek);
}

/* The ring holds records (device memory: payload in our region): their
 * fragments go out through dm, into *done.  The kernel reads device
 * memory without MSG_SOCK_DEVMEM as a fault (a short read if something
 * was copied).  0 or -errno. */
static int rx_records(struct sc_conn *c, struct dm_out *dm, int64_t av, size_t total,
		      size_t *done, bool peek)
{
	if (!dm || peek)
		return *done ? 0 : dm ? -EINVAL : -EFAULT;
	ssize_t k = sc__dm_recv_records(c, dm->rx, av, total - *done, dm->frags, dm->max, &dm->n);
	if (k < 0)
		return k == -EPROTO ? sc__conn_proto_error(c) : (int)k;
	*done += (size_t)k;
	rx_taken(c, true);
	return 0;
}

/* A receive into iov, or (dst: total bytes at most) into a writer.  One
 * piece: the loop's rounds (records, a writer, a copy, an empty ring that
 * ends, waits or arms) share what was done, the error and rxlock, as
 * tcp_recvmsg_locked's loop does; each round's work is its own function. */
static ssize_t recv_iov_(struct sc_conn *c, const struct iovec *iov, int iovcnt,
			 const struct sc_dst *dst, size_t total, int flags, struct dm_out *dm)
{
	bool nb = (flags & SC_NONBLOCK) || c->nonblock;
	bool peek = flags & SC_PEEK;
	bool waitall = (flags & SC_WAITALL) && !peek;
	size_t done = 0;
	int rc = 0;

	if (!dst) {
		total = 0;
		for (int i = 0; i < iovcnt; i++) {
			if (iov[i].iov_len > SSIZE_MAX - total)
				return -EINVAL;
			total += iov[i].iov_len;
		}
	}
	if (!total)
		return 0;
	sc__lock(&c->rxlock);
	if ((dm && (rc = sc__dm_rx_start(c, dm->rx)) < 0) ||
	    (rc = rx_prewait(c, total, flags, nb, dst != NULL)))
		goto out;
	for (;;) {
		if (atomic_load_explicit(&c->sw, memory_order_relaxed) >= SC_SW_FROZEN) {
			rc = -SC_ESWITCHED;     /* the rest comes over TCP */
			break;
		}
		int64_t av = sc__ring_avail(&c->rx);
		if (av < 0) {
			rc = sc__conn_proto_error(c);
			break;
		}
		uint64_t ff = av > 0 ? atomic_load_explicit(&c->rx.h->framed_from,
							    memory_order_acquire) : 0;
		if (ff && !c->dm_rx_asked) {
			/* records we never asked for: the peer's scribble */
			rc = sc__conn_proto_error(c);
			break;
		}
		if (ff && c->rx.cons >= ff - 1) {
			rc = rx_records(c, dm, av, total, &done, peek);
			break;
		}
		if (ff && (uint64_t)av > ff - 1 - c->rx.cons)
			av = (int64_t)(ff - 1 - c->rx.cons);    /* plain bytes first */
		size_t n = (uint64_t)av < total - done ? (size_t)av : total - done;
		if (av > 0 && dst) {
			ssize_t k = get_written(c, dst, n);
			if (k < 0) {
				rc = (int)k;
				break;
			}
			done += (size_t)k;
			rx_taken(c, true);
			break;
		}
		if (av > 0) {
			size_t part = peek ? n : rx_part(c, n);
			done += rx_copy(c, iov, iovcnt, done, part, peek);
			if (dm)
				dm->linear = done;
			rx_taken(c, !peek);
			if (part < n)
				continue;       /* the rest of what was there */
			if (done == total || !waitall)
				break;
			continue;
		}
		rc = rx_empty_state(c);
		if (rc <= 0)
			break;
		rc = 0;
		if (done && !waitall)
			break;
		if (nb) {
			if (sc__conn_arm_edge(c, false, sc__rx_ready))
				continue;
			rc = -EAGAIN;
			break;
		}
		if ((rc = sc__conn_wait(c, false, sc__rx_ready)))
			break;
	}
out:
	if (!peek)
		sc__counter_add(&c->bytes_received, done);
	sc__unlock(&c->rxlock);
	if (done)
		return (ssize_t)done;
	return rc;
}

/* Public entry points keep errno as they found it. */
static ssize_t recv_iov(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	int saved = errno;
	ssize_t n = recv_iov_(c, iov, iovcnt, NULL, 0, flags, NULL);

	errno = saved;
	return n;
}

ssize_t sc__recv_to(struct sc_conn *c, const struct sc_dst *dst, size_t len, int flags)
{
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	int saved = errno;
	ssize_t n = recv_iov_(c, NULL, 0, dst, len, flags & ~(SC_PEEK | SC_WAITALL), NULL);

	errno = saved;
	return n;
}

SC_API ssize_t sc_recv(struct sc_conn *c, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	return recv_iov(c, &iov, 1, flags);
}

SC_API ssize_t sc_recvv(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	return recv_iov(c, iov, iovcnt, flags);
}

/* Devmem: what the plain bytes before the records fill of iov (copied:
 * *linear), then records as fragments (at most max).  The byte count is
 * both.  EFAULT if plain receives meet records; EPROTO if a record is not
 * the sender's to write. */
ssize_t sc__recv_devmem(struct sc_conn *c, struct sc_dm_rx *rx, const struct iovec *iov,
			      int iovcnt, struct sc_dm_frag *frags, int max, int *nfrags,
			      size_t *linear, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX || !rx || max < 1)
		return -EINVAL;
	struct dm_out dm = { .rx = rx, .frags = frags, .max = max };
	int saved = errno;
	ssize_t n = recv_iov_(c, iov, iovcnt, NULL, 0, flags & ~SC_PEEK, &dm);
	errno = saved;
	*nfrags = dm.n;
	*linear = dm.linear;
	return n;
}
