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

#define API __attribute__((visibility("default")))

/* Wake the consumer if it armed itself (after sc__ring_publish's fence). */
static void wake_rx(struct sc_conn *c)
{
	struct sc_ring_hdr *h = c->tx.h;

	c->corked = false;
	if (atomic_load_explicit(&h->rx_armed, memory_order_relaxed) &&
	    atomic_exchange_explicit(&h->rx_armed, 0, memory_order_acq_rel))
		sc__notify_peer(c);
}

/* Why sending is impossible now, or 0. */
static int tx_error(struct sc_conn *c)
{
	uint32_t pf = sc__peer_flags(c);        /* may record -EPROTO: read first */
	int e = atomic_load_explicit(&c->err, memory_order_relaxed);

	if (e)
		return e;
	if (pf & SC_SF_REFUSED)
		return -ECONNREFUSED;
	if (pf & SC_SF_ABORT)
		return sc__conn_reset(c);
	if ((pf & SC_SF_CLOSED) || (atomic_load(&c->lflags) & SC_LF_PEER_GONE))
		return -EPIPE;
	return 0;
}

/*
 * Ready to send again: any free space.  Not a larger threshold: the consumer
 * clears tx_blocked when it publishes, so a sleeper that went back to sleep
 * on "not enough" would never be woken by the next publication.  How often
 * the consumer publishes is what batches the wake-ups (SMC's update rule).
 */
static bool tx_ready(struct sc_conn *c)
{
	return tx_error(c) || sc__ring_space(&c->tx, 1) != 0;
}

static ssize_t send_iov_(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags)
{
	bool nb = (flags & SC_NONBLOCK) || c->nonblock;
	size_t total = 0, done = 0;
	int rc = 0;

	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	pthread_mutex_lock(&c->txlock);
	if (atomic_load(&c->lflags) & SC_LF_SHUT_WR) {
		rc = -EPIPE;
		goto out;
	}
	while (done < total) {
		if ((rc = tx_error(c)))
			break;
		int64_t space = sc__ring_space(&c->tx, total - done);
		if (space < 0) {
			rc = sc__conn_proto_error(c);
			break;
		}
		if (space > 0) {
			size_t n = (uint64_t)space < total - done ? (size_t)space : total - done;
			done += sc__ring_put(&c->tx, iov, iovcnt, done, n);
			sc__ring_publish(&c->tx);
			if (!(flags & SC_MORE) || done < total)
				wake_rx(c);
			else
				c->corked = true;
			continue;
		}
		if (nb) {
			if (sc__conn_arm_edge(c, true, tx_ready))
				continue;
			rc = -EAGAIN;
			break;
		}
		if ((rc = sc__conn_wait(c, true, tx_ready)))
			break;
	}
	if (done > 0 && (flags & SC_MORE) && done < total)
		c->corked = false;
	sc__counter_add(&c->bytes_sent, done);
out:
	pthread_mutex_unlock(&c->txlock);
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
	pthread_mutex_lock(&c->txlock);
	if (c->corked)
		wake_rx(c);
	pthread_mutex_unlock(&c->txlock);
	return 0;
}
