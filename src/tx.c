/* SPDX-License-Identifier: MIT */
/*
 * Send path (smc_tx.c's job): copy from the caller's buffers straight into
 * the peer's receive ring, publish the producer cursor, and wake the peer
 * only if it announced that it sleeps.
 */
#include <errno.h>
#include <limits.h>

#include "conn.h"
#include "notify.h"
#include "stats.h"
#include "txrx.h"
#include "sys.h"

#define API __attribute__((visibility("default")))

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
	if ((atomic_load(&c->lflags) & SC_LF_DEATH_SWITCH) &&
	    atomic_load_explicit(&c->rx.h->prod, memory_order_acquire) ==
	    atomic_load_explicit(&c->s->consumed[c->side].rx_consumed, memory_order_relaxed))
		return -SC_ESWITCHED;
	if (pf & SC_SF_REFUSED)
		return -ECONNREFUSED;
	if (pf & SC_SF_ABORT)
		return sc__conn_reset(c);
	if ((pf & SC_SF_CLOSED) || (atomic_load(&c->lflags) & SC_LF_PEER_GONE) ||
	    (pf & (SC_SF_RD_DONE | SC_SF_WR_DONE)) == (SC_SF_RD_DONE | SC_SF_WR_DONE))
		return -EPIPE;
	return 0;
}

/*
 * The bytes we may have in the peer's ring: all of it, unless both our send
 * buffer and the peer's receive buffer were set (SO_SNDBUF, SO_RCVBUF), as a
 * kernel TCP sender holds about its send buffer and the receiver's window
 * (the kernel grows either one that was not set well past any ring).
 */
uint32_t sc__tx_win(struct sc_conn *c)
{
	uint32_t r = atomic_load_explicit(&c->peer->rcvbuf, memory_order_relaxed);
	if (!c->sndbuf || !r)
		return c->tx.size;
	uint64_t w = (uint64_t)c->sndbuf + r;
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
	return tx_error(c) || sc__tx_space(c, 1) != 0;
}

static ssize_t send_iov_(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	bool nb = (flags & SC_NONBLOCK) || c->nonblock;
	size_t total = 0, done = 0;
	bool wake = false;      /* published bytes the consumer may wait for */
	int rc = 0;

	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	sc__lock(&c->txlock);
	if (atomic_load(&c->lflags) & SC_LF_SHUT_WR) {
		rc = -EPIPE;
		goto out;
	}
	while (done < total) {
		if ((rc = tx_error(c)))
			break;
		int64_t space = sc__tx_space(c, total - done);
		if (space < 0) {
			rc = sc__conn_proto_error(c);
			break;
		}
		if (space > 0) {
			size_t n = (uint64_t)space < total - done ? (size_t)space : total - done;
			done += sc__ring_put(&c->tx, iov, iovcnt, done, n);
			sc__ring_publish(&c->tx);
			wake = true;
			if (!c->polled_out)
				sc__disarm_edge(&c->tx.h->tx_blocked);
			continue;
		}
		/* full: whatever corking asked, the consumer must hear of what
		 * is there before we wait for it to make room */
		if (wake || c->corked) {
			atomic_thread_fence(memory_order_seq_cst);
			wake_rx(c);
			wake = c->corked = false;
		}
		if (nb) {
			if (sc__conn_arm_edge(c, true, sc__tx_ready))
				continue;
			rc = -EAGAIN;
			break;
		}
		if ((rc = sc__conn_wait(c, true, sc__tx_ready)))
			break;
	}
	if (wake && (flags & SC_MORE) && done == total) {
		c->corked = true;       /* SC_MORE: hold the wake-up back */
		wake = false;
	} else if (wake) {
		c->corked = false;
	}
	sc__counter_add(&c->bytes_sent, done);
out:
	unlock_and_wake(c, wake);
	if (done)
		return (ssize_t)done;
	return total ? rc : (rc == -EAGAIN ? 0 : rc);
}

/* Public entry points keep errno as they found it. */
static ssize_t send_iov(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	int saved = errno;
	ssize_t n = send_iov_(c, iov, iovcnt, flags);

	errno = saved;
	return n;
}

API ssize_t sc_send(struct sc_conn *c, const void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	return send_iov(c, &iov, 1, flags);
}

API ssize_t sc_sendv(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	return send_iov(c, iov, iovcnt, flags);
}

API int sc_flush(struct sc_conn *c)
{
	int saved = errno;

	sc__lock(&c->txlock);
	bool corked = c->corked;
	c->corked = false;
	unlock_and_wake(c, corked);
	errno = saved;
	return 0;
}
