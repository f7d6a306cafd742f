/* SPDX-License-Identifier: MIT */
/*
 * Send path (smc_tx.c's job): copy from the caller's buffers straight into
 * the peer's receive ring, publish the producer cursor, and wake the peer
 * only if it announced that it sleeps.
 */
#include <errno.h>
#include <limits.h>

#include "conn.h"
#include "dmint.h"
#include "notify.h"
#include "stats.h"
#include "txrx.h"
#include "sys.h"


/* Wake the consumer if it waits.  The caller has put a full barrier
 * between publishing the producer cursor and this load of rx_armed: the
 * consumer does arm, barrier, load prod — one of us sees the other.  The
 * flag is the consumer's; the one-shot token is its cell's armed word. */
static void wake_rx(struct sc_conn *c)
{
	if (atomic_load_explicit(&c->tx.h->rx_armed, memory_order_relaxed))
		sc__notify_peer(c);
}

/* Drop the send lock; if bytes were published that the consumer may wait
 * for, one locked instruction both releases the lock and orders the cursor
 * store before wake_rx's load (on x86 any locked instruction is a full
 * barrier; C11 only promises that for a fence, which other machines get). */
static void unlock_and_wake(struct sc_conn *c, bool wake)
{
	if (!wake) {
		sc__unlock(&c->txlock);
		return;
	}
	sc__unlock_fence(&c->txlock);
#if !defined(__x86_64__) && !defined(__i386__)
	atomic_thread_fence(memory_order_seq_cst);
#endif
	wake_rx(c);
}

/* Why sending is impossible now, or 0. */
static int tx_error(struct sc_conn *c)
{
	uint32_t pf = sc__peer_flags(c);        /* may record -EPROTO: read first */
	int e = atomic_load_explicit(&c->err, memory_order_relaxed);

	if (e)
		return e;
	if (atomic_load_explicit(&c->sw, memory_order_relaxed) >= SC_SW_FROZEN ||
	    (pf & SC_SF_FROZEN))
		return -SC_ESWITCHED;   /* the rest goes over TCP */
	/* the peer died having forked: switch once what it left is read
	 * (until then bytes go to the ring, and the switch re-sends them) */
	if ((sc__conn_lflags(c) & SC_LF_DEATH_SWITCH) &&
	    atomic_load_explicit(&c->rx.h->prod, memory_order_acquire) ==
	    atomic_load_explicit(&c->s->consumed[c->side].rx_consumed, memory_order_relaxed))
		return -SC_ESWITCHED;
	if (pf & SC_SF_REFUSED)
		return -ECONNREFUSED;
	if (pf & SC_SF_ABORT)
		return sc__conn_reset(c);
	if ((pf & SC_SF_CLOSED) || (sc__conn_lflags(c) & SC_LF_PEER_GONE) ||
	    (pf & (SC_SF_RD_DONE | SC_SF_WR_DONE)) == (SC_SF_RD_DONE | SC_SF_WR_DONE))
		return -EPIPE;
	return 0;
}

/*
 * The bytes we may have in the peer's ring: all of it, unless our send
 * buffer was set (SO_SNDBUF): then that plus the peer's receive buffer (its
 * SO_RCVBUF, or SC_WIN_RCV_DEFAULT), as a kernel TCP sender holds about its
 * send buffer and the receiver's window.  (The kernel grows a send buffer
 * that was not set to megabytes at once, past any ring; a receive buffer
 * grows only as the reader reads.)
 */
uint32_t sc__tx_win(struct sc_conn *c)
{
	uint32_t sb = atomic_load_explicit(&c->sndbuf, memory_order_relaxed);
	if (!sb)
		return c->tx.size;
	uint32_t r = atomic_load_explicit(&c->peer->rcvbuf, memory_order_relaxed);
	uint64_t w = (uint64_t)sb + (r ? r : SC_WIN_RCV_DEFAULT);
	if (w < SC_WIN_MIN)
		w = SC_WIN_MIN;
	return w < c->tx.size ? (uint32_t)w : c->tx.size;
}

/* Free space in the peer's ring within our window (see sc__ring_space). */
int64_t sc__tx_space(struct sc_conn *c, uint64_t want)
{
	c->tx.win = sc__tx_win(c);
	return sc__ring_space(&c->tx, want);
}

/*
 * Ready to send again: any free space (the send loop takes what there is).
 * How often the consumer publishes is what batches the wake-ups (SMC's
 * update rule).
 */
bool sc__tx_ready(struct sc_conn *c)
{
	if (c->dm_peer)
		return sc__dm_tx_ready(c);
	return tx_error(c) || sc__tx_space(c, 1) != 0;
}

/* Framed (devmem): room for a record in the ring, and a free chunk. */
bool sc__dm_tx_ready(struct sc_conn *c)
{
	if (tx_error(c))
		return true;
	int64_t sp = sc__tx_space(c, sizeof(struct sc_dm_rec));
	return sp < 0 || (sp >= (int64_t)sizeof(struct sc_dm_rec) && sc__dm_any_free(c->dm_peer));
}

/* Bytes a corked sender publishes while it holds the rest back: whole
 * segments, as the kernel sends full-sized segments of a corked queue (a
 * loopback segment is about 64 KiB). */
#define CORK_SEG 65536u

/* txlock held: a send found no room (a poller's EPOLLET hears of room from
 * now on, as the kernel's SOCK_NOSPACE makes its write-space wake-up) */
static void nospace(struct sc_conn *c)
{
	atomic_store_explicit(&c->tx_nospace,
			      atomic_load_explicit(&c->tx_nospace, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* The reader's bytes into the ring's free space at prod (n of it): the
 * count; 0 or -errno (rc) when it had none. */
static size_t put_read(struct sc_conn *c, struct sc_src *src, size_t n, int *rc)
{
	struct iovec v[2];
	int nv = sc__ring_span(&c->tx, c->tx.prod, n, v);
	ssize_t k = src->rd(src->arg, v, nv);
	if (k <= 0) {
		*rc = (int)k;
		return 0;
	}
	c->tx.prod += (uint64_t)k;
	return (size_t)k;
}

/* A round of the send loop: go on (TX_GO_ON), or stop with rc (0 or
 * -errno). */
#define TX_GO_ON 1

/* The consumer must have what was published, and hear of it, before we
 * wait for it to make room (the fence: our publish before its sleeping
 * flag, against its flag before its look). */
static void tx_wake_now(struct sc_conn *c, bool *wake)
{
	atomic_thread_fence(memory_order_seq_cst);
	wake_rx(c);
	*wake = false;
}

/* No room: nonblocking, armed for the edge (then look again) or EAGAIN;
 * else wait for room (ready says when). */
static int tx_no_room(struct sc_conn *c, bool nb, bool (*ready)(struct sc_conn *))
{
	nospace(c);
	if (nb)
		return sc__conn_arm_edge(c, true, ready) ? TX_GO_ON : -EAGAIN;
	int rc = sc__conn_wait(c, true, ready);
	return rc ? rc : TX_GO_ON;
}

/* Devmem: the payload into the receiver's region, a record for it into
 * the ring; a full region (fragments the program has not returned) waits
 * for the receiver to free one. */
static int send_dm_round(struct sc_conn *c, struct sc_src *src, size_t total, size_t *done,
			 bool nb, bool *wake)
{
	uint32_t seq;
	ssize_t k = sc__dm_send_one(c, src, *done, total - *done, &seq);
	if (k == -ENODATA)
		return src->end;        /* the reader had nothing more */
	if (k > 0) {
		*done += (size_t)k;
		sc__ring_publish(&c->tx);
		*wake = true;
		if (!c->polled_out)
			sc__disarm_edge(&c->tx.h->tx_blocked);
		return TX_GO_ON;
	}
	if (k < 0 && k != -EAGAIN)
		return sc__conn_proto_error(c);
	if (*wake)
		tx_wake_now(c, wake);
	if (k == -EAGAIN && !nb) {
		nospace(c);
		/* seq_cst: our flag before our wait's look; the consumer's
		 * cursor before its load of tx_blocked (Dekker's pattern) */
		atomic_fetch_or_explicit(&c->tx.h->tx_blocked, SC_ARM_EDGE, memory_order_seq_cst);
		sc__dm_wait(c, seq);
		return TX_GO_ON;
	}
	return tx_no_room(c, nb, sc__dm_tx_ready);
}

/* Bytes into the ring's free space (published unless held back); the
 * ring full: what is there published and the consumer woken, whatever
 * corking asked, then room waited for. */
static int send_round(struct sc_conn *c, struct sc_src *src, size_t total, size_t *done,
		      bool nb, bool hold, bool *wake)
{
	int64_t space = sc__tx_space(c, total - *done);
	if (space < 0)
		return sc__conn_proto_error(c);
	if (space > 0) {
		int rc = 0;
		size_t n = (uint64_t)space < total - *done ? (size_t)space : total - *done;
		size_t k = src->rd ? put_read(c, src, n, &rc) :
				     sc__ring_put(&c->tx, src->iov, src->iovcnt, *done, n);
		if (!k)
			return rc;      /* the reader had nothing more */
		*done += k;
		if (!hold) {
			sc__ring_publish(&c->tx);
			*wake = true;
		}
		if (!c->polled_out)
			sc__disarm_edge(&c->tx.h->tx_blocked);
		return TX_GO_ON;
	}
	if (c->tx.pub != c->tx.prod) {
		sc__ring_publish(&c->tx);
		*wake = true;
	}
	if (*wake || atomic_load_explicit(&c->corked, memory_order_relaxed)) {
		tx_wake_now(c, wake);
		atomic_store_explicit(&c->corked, false, memory_order_relaxed);
	}
	return tx_no_room(c, nb, sc__tx_ready);
}

/* After a send that held bytes back (SC_MORE, the cork): whole segments
 * go, the rest waits for a send without SC_MORE, the cork's end, or
 * SC_CORK_MS from the first held byte (the kernel's probe timer sends it
 * then).  True when it began to hold bytes (the control thread ends the
 * hold). */
static bool cork_hold(struct sc_conn *c, bool *wake)
{
	uint64_t rest = (c->tx.prod - c->tx.pub) % CORK_SEG;
	if (c->tx.prod - rest != c->tx.pub)
		*wake = true;
	sc__ring_publish_to(&c->tx, c->tx.prod - rest);
	if (rest && !atomic_load_explicit(&c->corked, memory_order_relaxed)) {
		atomic_store_explicit(&c->cork_ns, sc__now_ns(), memory_order_relaxed);
		atomic_store_explicit(&c->corked, true, memory_order_release);
		return true;
	}
	if (!rest)
		atomic_store_explicit(&c->corked, false, memory_order_relaxed);
	return false;
}

/* A send of total bytes of src. */
static ssize_t send_(struct sc_conn *c, struct sc_src *src, size_t total, int flags)
{
	bool nb = (flags & SC_NONBLOCK) || c->nonblock;
	size_t done = 0;
	bool wake = false;      /* published bytes the consumer may wait for */
	bool held = false;      /* we began to hold bytes back */
	int rc = 0;

	sc__lock(&c->txlock);
	bool hold = (flags & SC_MORE) || c->cork_opt;
	if (sc__conn_lflags(c) & SC_LF_SHUT_WR) {
		rc = -EPIPE;
		goto out;
	}
	sc__dm_tx_prepare(c);
	if (c->dm_peer)
		hold = false;   /* records go whole: corking holds no devmem payload */
	while (done < total) {
		if ((rc = tx_error(c)))
			break;
		rc = c->dm_peer ? send_dm_round(c, src, total, &done, nb, &wake) :
				  send_round(c, src, total, &done, nb, hold, &wake);
		if (rc != TX_GO_ON)
			break;
		rc = 0;
	}
	if (hold && c->tx.pub != c->tx.prod)
		held = cork_hold(c, &wake);
	else if (wake)
		atomic_store_explicit(&c->corked, false, memory_order_relaxed);
	sc__counter_add(&c->bytes_sent, done);
out:
	unlock_and_wake(c, wake);
	if (held)
		sc__cork_note();        /* the control thread ends the hold */
	if (done)
		return (ssize_t)done;
	return total ? rc : (rc == -EAGAIN ? 0 : rc);
}

/* Public entry points keep errno as they found it. */
static ssize_t send_iov(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	struct sc_src src = { .iov = iov, .iovcnt = iovcnt };
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	int saved = errno;
	ssize_t n = send_(c, &src, total, flags);

	errno = saved;
	return n;
}

ssize_t sc__send_from(struct sc_conn *c, struct sc_src *src, size_t len, int flags)
{
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	int saved = errno;
	ssize_t n = send_(c, src, len, flags);

	errno = saved;
	return n;
}

SC_API ssize_t sc_send(struct sc_conn *c, const void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	return send_iov(c, &iov, 1, flags);
}

SC_API ssize_t sc_sendv(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	return send_iov(c, iov, iovcnt, flags);
}

/* txlock held: publish what is held back; true if the peer must hear of it. */
bool sc__tx_flush_locked(struct sc_conn *c)
{
	bool corked = atomic_exchange_explicit(&c->corked, false, memory_order_relaxed);
	if (c->tx.pub != c->tx.prod) {
		sc__ring_publish(&c->tx);
		corked = true;
	}
	return corked;
}

SC_API int sc_flush(struct sc_conn *c)
{
	int saved = errno;

	sc__lock(&c->txlock);
	unlock_and_wake(c, sc__tx_flush_locked(c));
	errno = saved;
	return 0;
}

SC_API void sc_set_cork(struct sc_conn *c, int on)
{
	sc__lock(&c->txlock);
	c->cork_opt = on;
	sc__unlock(&c->txlock);
	if (!on)
		sc_flush(c);
}

/* The control thread: a hold older than SC_CORK_MS ends (the peer hears of
 * the bytes).  It may not wait for txlock (a sender holding it may wait for
 * the group lock the caller holds): a busy sender is tried again later. */
void sc__cork_expire(struct sc_conn *c, uint64_t now)
{
	if (!atomic_load_explicit(&c->corked, memory_order_acquire) ||
	    now - atomic_load_explicit(&c->cork_ns, memory_order_relaxed) < SC_CORK_MS * 1000000ull)
		return;
	if (!sc__trylock(&c->txlock))
		return;
	unlock_and_wake(c, sc__tx_flush_locked(c));
}
