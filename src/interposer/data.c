/* SPDX-License-Identifier: MIT */
/*
 * The data path: the send and receive families on an accelerated socket
 * (the core's sc_sendv/sc_recvv), timeouts, MSG_* flags; the path splice
 * and sendfile (splice.c) take too.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "ring.h"
#include "rundir.h"
#include "stats.h"
#include "txrx.h"
#include "interposer.h"
#include "devmem_uapi.h"
/* ---- data --------------------------------------------------------------- */

/* Map to the library's flags; -EOPNOTSUPP for what shared memory cannot do. */
static int sc_flags(struct sc_sock *s, int flags, bool rx)
{
	int f = 0;
	if (s->nonblock || (flags & MSG_DONTWAIT))
		f |= SC_NONBLOCK;
	if (rx && (flags & MSG_PEEK))
		f |= SC_PEEK;
	if (rx && (flags & MSG_WAITALL))
		f |= SC_WAITALL;
	if (!rx && (flags & MSG_MORE))
		f |= SC_MORE;
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	return f;
}

/* The pipe had nothing more to read: a send from it ends there. */
static bool xfer_dry(const struct xfer *x)
{
	return x->pipe && x->pipe->dry;
}

/* x without its first skip bytes, in r (rest: IOV_MAX entries). */
static void xfer_rest(const struct xfer *x, size_t skip, struct xfer *r, struct iovec *rest)
{
	*r = *x;
	r->len = x->len - skip;
	if (!x->pipe) {
		r->iovcnt = sc__iov_rest(x->iov, x->iovcnt, skip, rest);
		r->iov = rest;
	}
}

/* A pending client writes: into the private buffer while it lasts. */
static ssize_t pending_send(int fd, struct sc_sock *s, const struct xfer *x, int flags)
{
	size_t done = 0, from = s->plen;

	if (x->pipe && s->plen < PBUF_CAP) {
		/* the room is known (s->lock): the pipe gives no more */
		struct iovec v = { s->pbuf + s->plen, PBUF_CAP - s->plen };
		if (v.iov_len > x->len)
			v.iov_len = x->len;
		ssize_t k = pipe_read_now(x->pipe, &v, 1);
		if (k < 0)
			return k;
		s->plen += (size_t)k;
		done = (size_t)k;
	}
	for (int i = 0; !x->pipe && i < x->iovcnt && s->plen < PBUF_CAP; i++) {
		size_t n = x->iov[i].iov_len;
		if (n > PBUF_CAP - s->plen)
			n = PBUF_CAP - s->plen;
		memcpy(s->pbuf + s->plen, x->iov[i].iov_base, n);
		s->plen += n;
		done += n;
		if (n < x->iov[i].iov_len)
			break;
	}
	if (done < x->len)
		s->pnospace++;  /* full: room is news when it comes (EPOLLET) */
	if (done)
		rec_add(&s->shm_calls, 1);
	/* the first bytes ride with the offer too, while nobody claimed it:
	 * the acceptor finds them in its ring at once (not held ones: a
	 * cork or MSG_MORE waits for more) */
	bool held = s->cork || (flags & MSG_MORE);
	if (done && s->lead == LEAD_WANT) {
		/* a listener that defers its accepts sees the connection once
		 * the stream's first byte is on TCP */
		pending_lead(fd, s, held);
	} else if (done && s->early == from && s->offer >= 0 && s->board &&
		   (!held || s->lead_held)) {
		/* (held back too while our lead byte is: the acceptor uses
		 * them only once it has that byte) */
		uint32_t lead = s->lead == LEAD_ON;
		s->early += (uint32_t)sc__offer_early(s->board, s->offer, s->tag, s->early - lead,
						      s->pbuf + from, done);
	}
	if (done && !held)
		pending_push(fd, s);    /* the end of a hold: the lead byte goes */
	return (ssize_t)done;
}

static ssize_t shm_result(ssize_t rc, int flags, bool tx)
{
	if (rc >= 0)
		return rc;
	if (tx && rc == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	errno = (int)-rc;
	return -1;
}


/* Bytes waiting in c's receive ring. */
int64_t rx_avail(struct sc_conn *c)
{
	sc__lock(&c->rxlock);
	int64_t v = sc__ring_avail(&c->rx);
	sc__unlock(&c->rxlock);
	return v;
}

/* What a receive of len bytes waits for under SO_RCVLOWAT: the low-water
 * mark, no more than len, and no more than the ring holds. */
int64_t lowat_target(struct sc_sock *s, size_t len)
{
	int64_t t = s->rcvlowat;
	if ((size_t)t > len)
		t = (int64_t)len;
	if (t > (int64_t)s->c->rx.size)
		t = (int64_t)s->c->rx.size;
	return t;
}

bool on_shared_chan(struct sc_sock *s)
{
	if (sock_mode(s) != M_SHM || !s->c)
		return false;
	struct sc_chan *ch = sc__conn_chan(s->c);
	return ch && !ch->private_;
}

/* A blocking call with SO_RCVTIMEO / SO_SNDTIMEO: wait on the connection's
 * fd until it is ready or the deadline passes (-EAGAIN, the kernel's answer
 * to a timed-out socket call). */
static int shm_wait_until(int fd, struct sc_sock *s, bool tx, uint64_t deadline)
{
	bool stale = false;     /* the wake fd stayed readable, and we are not ready */
	for (;;) {
		int wfd;
		short r = sock_revents(fd, s, tx ? POLLOUT : POLLIN, &wfd, true);
		if (r)
			return 0;
		uint64_t now = sc__now_ns();
		if (now >= deadline)
			return -EAGAIN;
		struct pollfd p = { .fd = stale ? -1 : wfd, .events = POLLIN };
		uint64_t ms = deadline == UINT64_MAX ? 0 : (deadline - now + 999999) / 1000000;
		int t = deadline == UINT64_MAX ? -1 : ms > INT_MAX ? INT_MAX : (int)ms;
		if ((stale || on_shared_chan(s)) && (t < 0 || t > SHARED_SLICE_MS))
			t = SHARED_SLICE_MS;    /* see do_poll */
		int rc = R(poll)(&p, 1, t);
		if (rc < 0 && errno == EINTR)
			return -EINTR;
		/* an epoll set's channel is reset by the set's own waiter: while
		 * it is readable for a change that does not make us ready (data
		 * below SO_RCVLOWAT), look every slice instead of spinning */
		stale = rc > 0 && on_shared_chan(s);
	}
}

/* Run one shared-memory call, honouring the socket's timeout.  As in
 * tcp_sendmsg / tcp_recvmsg the timeout bounds the call's waiting in all
 * (it does not restart with progress); a send, or a MSG_WAITALL receive,
 * that has moved some bytes when it runs out (or meets an error or the
 * end) returns that much. */
static ssize_t shm_call(int fd, struct sc_sock *s, bool tx, int f,
			ssize_t (*op)(struct sc_conn *, const struct xfer *, int),
			const struct xfer *x)
{
	uint64_t to = tx ? s->sndtimeo_ns : s->rcvtimeo_ns;
	if (!to || (f & SC_NONBLOCK))
		return op(s->c, x, f);
	/* a peek looks at the same bytes again: it never accumulates */
	bool all = tx || ((f & SC_WAITALL) && !(f & SC_PEEK));
	size_t total = x->len, done = 0;
	uint64_t deadline = sc__now_ns() + to;
	if (!tx && (f & SC_PEEK) && (f & SC_WAITALL) && total) {
		/* a waiting peek: the whole length (or the end), within the
		 * timeout; then what there is */
		int64_t want = total < s->c->rx.size ? (int64_t)total : (int64_t)s->c->rx.size;
		ssize_t rc = op(s->c, x, f | SC_NONBLOCK);
		if (rc != -EAGAIN && (rc < 0 || rc >= want || rc == 0))
			return rc;
		int w = sc__conn_wait_avail(s->c, want, deadline);
		if (w < 0 && w != -ETIMEDOUT)
			return w;
		rc = op(s->c, x, f | SC_NONBLOCK);
		return rc == -EAGAIN && w == -ETIMEDOUT ? -EAGAIN : rc;
	}
	struct iovec rest[IOV_MAX];
	for (;;) {
		struct xfer r;
		const struct xfer *v = x;
		if (done) {
			xfer_rest(x, done, &r, rest);
			v = &r;
		}
		ssize_t rc = op(s->c, v, f | SC_NONBLOCK);
		if (rc > 0) {
			done += (size_t)rc;
			if (!all || done >= total)
				return (ssize_t)done;
			continue;
		}
		if (rc == 0 && total)
			return (ssize_t)done;           /* the end */
		if (rc != -EAGAIN)
			return done ? (ssize_t)done : rc;
		/* sleep on the connection's own wake-up (as a blocking call
		 * does, whatever channel it is bound to); a signal ends a
		 * timed socket call with EINTR, as in the kernel */
		int w = sc__conn_wait_ready(s->c, tx, deadline);
		if (w == -ETIMEDOUT)
			return done ? (ssize_t)done : -EAGAIN;
		if (w < 0)
			return done ? (ssize_t)done : w;
	}
}

static ssize_t sendv_op(struct sc_conn *c, const struct xfer *x, int f)
{
	if (x->pipe) {
		struct sc_src src = { .rd = pipe_read_now, .arg = x->pipe };
		return sc__send_from(c, &src, x->len, f);
	}
	return sc_sendv(c, x->iov, x->iovcnt, f);
}

static ssize_t recvv_op(struct sc_conn *c, const struct xfer *x, int f)
{
	if (x->pipe) {
		struct sc_dst dst = { .wr = pipe_write_now, .arg = x->pipe };
		return sc__recv_to(c, &dst, x->len, f);
	}
	return sc_recvv(c, x->iov, x->iovcnt, f);
}

/* recv with MSG_TRUNC: TCP discards the bytes instead of copying them (the
 * buffer may be NULL; only the lengths count).  With MSG_PEEK it reports how
 * many there are, up to the length, and leaves them. */
static ssize_t trunc_op(struct sc_conn *c, const struct xfer *x, int f)
{
	size_t total = x->len;
	char local[16384];
	size_t cap = f & SC_PEEK ? total : sizeof(local);
	if (cap > sizeof(local) && cap > (8u << 20))
		cap = 8u << 20;         /* no ring is larger */
	char *buf = cap <= sizeof(local) ? local : malloc(cap);
	if (!buf)
		return -ENOMEM;
	ssize_t done = 0;
	while ((size_t)done < total) {
		size_t want = total - (size_t)done;
		struct iovec v = { buf, want < cap ? want : cap };
		/* the first part as asked; more only if it is there already
		 * (or WAITALL asks for all of it) */
		ssize_t rc = sc_recvv(c, &v, 1, done && !(f & SC_WAITALL) ? f | SC_NONBLOCK : f);
		if (rc <= 0) {
			if (!done)
				done = rc;
			break;
		}
		done += rc;
		if (f & SC_PEEK)
			break;
	}
	if (buf != local)
		free(buf);
	return done;
}

/* A switch back to TCP is under way on c (ours or the peer's): a blocking
 * call it cut short goes on over TCP. */
bool switching(struct sc_conn *c)
{
	return sc__conn_sw(c) != SC_SW_NONE ||
	       (atomic_load_explicit(&c->peer->flags, memory_order_acquire) & SC_SF_FROZEN) ||
	       (sc__conn_lflags(c) & SC_LF_DEATH_SWITCH);
}

/* Bytes a connection of ours moved over TCP.  One on TCP since its
 * set-up counts them in its record only (sc__rec_tcp_only: no locked add
 * per call); a switched one, or one without a record, in the process's
 * counters too. */
void tcp_count(struct sc_sock *s, bool tx, ssize_t n)
{
	if (n <= 0 || !s->counted)
		return;
	if (s->rec)
		rec_add(tx ? &s->rec->bytes_sent : &s->rec->bytes_received, n);
	if (s->rec && sc__rec_tcp_only(s->rec))
		return;
	if (tx)
		SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
	else
		SC_STAT_ADD(bytes_tcp_received, (uint64_t)n);
}

/* A call on a socket of ours on TCP (from its set-up on, or switched
 * back): the program's own call (a send after a switch's re-send,
 * tcp_gate), its bytes counted -- where the routes below would bring it,
 * without their steps: every call of a connection that stays on TCP. */
static inline ssize_t tcp_sent(struct sc_sock *s, ssize_t n)
{
	tcp_count(s, true, n);
	return n;
}

static inline ssize_t tcp_received(struct sc_sock *s, int flags, ssize_t n)
{
	if (!(flags & (MSG_PEEK | MSG_ERRQUEUE)))   /* (not the connection's bytes) */
		tcp_count(s, false, n);
	return n;
}

/* The same for n messages of v (sendmmsg, recvmmsg): their lengths. */
static int tcp_messages(struct sc_sock *s, bool tx, int flags, const struct mmsghdr *v, int n)
{
	for (int i = 0; s && i < n; i++) {
		if (tx)
			tcp_count(s, true, v[i].msg_len);
		else
			tcp_received(s, flags, v[i].msg_len);
	}
	return n;
}

/* x over TCP: tcp for the program's buffers, the kernel's splice for a
 * pipe's bytes (tx: the pipe's into fd).  cont: what is left of a call
 * that moved bytes already, which does not wait for the pipe. */
static ssize_t xfer_tcp(int fd, const struct xfer *x, int flags, tcp_fn tcp, bool tx, bool cont)
{
	if (!x->pipe)
		return tcp(fd, x->iov, x->iovcnt, flags);
	unsigned int sf = x->sflags | (cont ? SPLICE_F_NONBLOCK : 0);
	return tx ? R(splice)(x->pipe->fd, NULL, fd, NULL, x->len, sf) :
		    R(splice)(fd, NULL, x->pipe->fd, NULL, x->len, sf);
}

static ssize_t recv_tcp(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp);

/* A blocking send on TCP, after a switch's re-send (tcp_gate). */
static ssize_t send_tcp(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	tcp_gate(s);                    /* switched: after the re-send */
	ssize_t n = xfer_tcp(fd, x, flags, tcp, true, false);
	tcp_count(s, true, n);
	return n;
}

/* A pending client's bytes into its buffer (s->lock held, M_PENDING):
 * how many it took, or -errno.  A full buffer waits for the claim, as a
 * full socket buffer would (or EAGAIN). */
static ssize_t pending_take(int fd, struct sc_sock *s, const struct xfer *x, int flags, bool nb)
{
	ssize_t n = pending_send(fd, s, x, flags);
	if (n < 0)
		return n;
	if (s->rec)
		rec_add(&s->rec->bytes_sent, n);
	if (n == 0 && x->len && s->plen >= PBUF_CAP) {
		if (nb)
			return -EAGAIN;
		pending_settle(fd, s, true, -1);
	}
	return n;
}

/* A pending client's send: bytes taken, -errno, or 0 when none were and
 * they go by the route the socket has now (claimed, or TCP). */
static ssize_t send_pending(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	bool nb = s->nonblock || (flags & MSG_DONTWAIT);
	ssize_t n = 0;
	pthread_mutex_lock(&s->lock);
	if (sock_mode(s) == M_PENDING && sock_attached(s))
		pending_settle(fd, s, false, 0);
	if (sock_mode(s) == M_PENDING)
		n = nb && !pending_tcp_up(fd, s) ? -EAGAIN :    /* not connected yet */
		    pending_take(fd, s, x, flags, nb);
	/* a blocking send is not cut short by the buffer's size: wait for
	 * the claim, then send the rest */
	bool rest = n > 0 && (size_t)n < x->len && !nb && !xfer_dry(x);
	if (rest)
		pending_settle(fd, s, true, -1);
	pthread_mutex_unlock(&s->lock);
	if (rest) {
		struct iovec left[IOV_MAX];
		struct xfer r;
		xfer_rest(x, (size_t)n, &r, left);
		ssize_t more = do_send(fd, s, &r, flags, tcp);
		return more > 0 ? n + more : n;
	}
	return n;
}

/* What is left of a call cut short by a switch to TCP goes there (rc:
 * what shared memory moved). */
static ssize_t xfer_switched(int fd, struct sc_sock *s, const struct xfer *x, ssize_t rc,
			     int flags, tcp_fn tcp, bool tx)
{
	if (sock_switch(fd, s) < 0) {
		errno = ENOTCONN;
		return -1;
	}
	if (rc <= 0)
		return tx ? send_tcp(fd, s, x, flags, tcp) : recv_tcp(fd, s, x, flags, tcp);
	if (!tx && s->rec)
		rec_add(&s->rec->bytes_received, rc);
	struct iovec rest[IOV_MAX];
	struct xfer r;
	xfer_rest(x, (size_t)rc, &r, rest);
	if (tx)
		tcp_gate(s);
	ssize_t more = xfer_tcp(fd, &r, flags, tcp, tx, true);
	if (more > 0)
		tcp_count(s, tx, more);
	return rc + (more > 0 ? more : 0);
}

/* A send on a connection of ours on shared memory. */
static ssize_t send_shm(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	int f = sc_flags(s, flags, false);
	if (f < 0) {
		errno = -f;
		return -1;
	}
	size_t total = x->len;
	ssize_t rc = shm_call(fd, s, true, f, sendv_op, x);
	if (rc > 0)
		rec_add(&s->shm_calls, 1);
	if (s->rec)
		rec_add(&s->rec->bytes_sent, rc);
	if (rc == -SC_ESWITCHED || (rc > 0 && (size_t)rc < total && !(f & SC_NONBLOCK) &&
				    !xfer_dry(x) && switching(s->c)))
		return xfer_switched(fd, s, x, rc, flags, tcp, true);  /* an exec, the peer */
	if (rc == -EPIPE && !s->shut_wr && !s->sent_to_closed) {
		/* TCP: the first send to a peer that closed succeeds
		 * (the peer answers it with a reset); then EPIPE */
		s->sent_to_closed = true;
		return x->pipe ? (ssize_t)pipe_discard(x->pipe, x->len) : (ssize_t)total;
	}
	if (rc == -ECONNRESET) {
		/* reported once, as sk_err; then the socket is dead */
		if (s->err_reported)
			rc = -EPIPE;
		s->err_reported = true;
	}
	return shm_result(rc, flags, true);
}

/* The send family's one path: route, then the pending buffer, shared
 * memory or TCP. */
ssize_t do_send(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	enum sc_route rt = sock_route(fd, s);
	if (rt == RT_PENDING) {
		ssize_t n = send_pending(fd, s, x, flags, tcp);
		if (n < 0) {
			errno = (int)-n;
			return -1;
		}
		if (n > 0 || !x->len || xfer_dry(x))
			return n;
		rt = sock_where(s);
	}
	if (rt == RT_SHM && (flags & MSG_OOB)) {
		/* urgent data is TCP's: the connection goes back to it (after
		 * every byte sent before), and the kernel marks the byte */
		sock_switch(fd, s);
		rt = sock_where(s);
	}
	if (rt == RT_SHM)
		return send_shm(fd, s, x, flags, tcp);
	if (rt == RT_INHERITED && sw_request_owner(fd, s) < 0) {
		errno = ENOTCONN;       /* inherited, and its owner did not switch it */
		return -1;
	}
	return send_tcp(fd, s, x, flags, tcp);
}

static ssize_t do_sendv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			int flags, tcp_fn tcp)
{
	struct xfer x = { .iov = iov, .iovcnt = iovcnt };
	for (int i = 0; i < iovcnt; i++)
		x.len += iov[i].iov_len;
	return do_send(fd, s, &x, flags, tcp);
}

/* A receive on TCP (a peek is not counted). */
static ssize_t recv_tcp(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	ssize_t n = xfer_tcp(fd, x, flags, tcp, false, false);
	if (!(flags & MSG_PEEK))
		tcp_count(s, false, n);
	return n;
}

/* SO_RCVLOWAT with SO_RCVTIMEO (polled here): a blocking receive waits
 * for the mark first, and at the timeout takes what there is.  Returns
 * the flags to receive with, or -EINTR (a socket timeout: never
 * restarted). */
static int lowat_wait(int fd, struct sc_sock *s, size_t total, int f)
{
	uint64_t dl = sc__now_ns() + s->rcvtimeo_ns;
	int64_t want = lowat_target(s, total);
	if (rx_avail(s->c) < want)
		want = lowat_target(s, SIZE_MAX);
	while (rx_avail(s->c) < want && !switching(s->c) &&
	       !(sc_conn_events(s->c) & (SC_EV_RDHUP | SC_EV_HUP | SC_EV_ERR))) {
		int w = shm_wait_until(fd, s, false, dl);
		if (w == -EINTR)
			return -EINTR;
		if (w < 0)
			return f | SC_NONBLOCK;         /* timed out */
	}
	return f;
}

/* A receive on a connection of ours on shared memory. */
static ssize_t recv_shm(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	int f = sc_flags(s, flags, true);
	if (f < 0) {
		errno = -f;
		return -1;
	}
	size_t total = x->len;
	if (!total) {
		/* as TCP: nothing to read yet is EAGAIN, else 0 */
		if ((f & SC_NONBLOCK) && !(sc_conn_events(s->c) & (SC_EV_IN | SC_EV_ERR))) {
			errno = EAGAIN;
			return -1;
		}
		return 0;
	}
	/* SO_RCVLOWAT: the blocking receive waits in the core (splice
	 * ignores the mark) */
	s->c->rcvlowat = s->rcvlowat > 1 ? (uint32_t)s->rcvlowat : 0;
	if (s->rcvlowat > 1 && s->rcvtimeo_ns && !x->pipe &&
	    !(f & (SC_NONBLOCK | SC_WAITALL | SC_PEEK)) && (f = lowat_wait(fd, s, total, f)) < 0) {
		errno = -f;
		return -1;
	}
	ssize_t rc = shm_call(fd, s, false, f, flags & MSG_TRUNC ? trunc_op : recvv_op, x);
	if (rc > 0 && !(f & SC_PEEK))
		rec_add(&s->shm_calls, 1);
	if (rc == -SC_ESWITCHED || (rc > 0 && (size_t)rc < total && (f & SC_WAITALL) &&
				    switching(s->c)))
		/* the rest comes from TCP (what the peer had sent us is
		 * re-sent first) */
		return xfer_switched(fd, s, x, rc, flags, tcp, false);
	if (atomic_load_explicit(&nexp_sig, memory_order_relaxed) && rc > 0)
		ep_refresh_exposed();   /* a nested set may not be ready now */
	if (s->rec && !(f & SC_PEEK))
		rec_add(&s->rec->bytes_received, rc);
	if (rc == -ECONNRESET) {
		if (s->err_reported)
			rc = 0;
		s->err_reported = true;
	}
	return shm_result(rc, flags, false);
}

/* The receive family's one path: route, then shared memory or TCP (a
 * pending client waits for its claim first). */
ssize_t do_recv(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp)
{
	enum sc_route rt = sock_route(fd, s);
	if (rt == RT_PENDING) {
		pthread_mutex_lock(&s->lock);
		int rc = pending_settle(fd, s, !(s->nonblock || (flags & MSG_DONTWAIT)), -1);
		pthread_mutex_unlock(&s->lock);
		if (rc == -EAGAIN) {
			errno = EAGAIN;
			return -1;
		}
		rt = sock_where(s);
	}
	if (rt == RT_SHM && (flags & MSG_OOB)) {
		/* a connection on shared memory has no urgent byte (a sender
		 * of one switches to TCP first): the kernel's answer is
		 * EINVAL, unless the peer's switch is under way */
		if (!switching(s->c)) {
			errno = EINVAL;
			return -1;
		}
		sock_switch(fd, s);
		rt = sock_where(s);
	}
	if (rt == RT_SHM)
		return recv_shm(fd, s, x, flags, tcp);
	if (rt == RT_INHERITED && sw_request_owner(fd, s) < 0) {
		errno = ENOTCONN;
		return -1;
	}
	return recv_tcp(fd, s, x, flags, tcp);
}

static ssize_t do_recvv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			int flags, tcp_fn tcp)
{
	struct xfer x = { .iov = iov, .iovcnt = iovcnt };
	for (int i = 0; i < iovcnt; i++)
		x.len += iov[i].iov_len;
	return do_recv(fd, s, &x, flags, tcp);
}

/* On TCP, the call the program made when it had one buffer (a message
 * header or a vector costs the kernel a copy and a check more). */
ssize_t tcp_sendv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt == 1)
		return R(sendto)(fd, iov[0].iov_base, iov[0].iov_len, flags, NULL, 0);
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	return R(sendmsg)(fd, &m, flags);
}
ssize_t tcp_recvv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt == 1)
		return R(recvfrom)(fd, iov[0].iov_base, iov[0].iov_len, flags, NULL, NULL);
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	return R(recvmsg)(fd, &m, flags);
}
static ssize_t tcp_writev(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt == 1)
		return R(write)(fd, iov[0].iov_base, iov[0].iov_len);
	return R(writev)(fd, iov, iovcnt);
}
static ssize_t tcp_readv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt == 1)
		return R(read)(fd, iov[0].iov_base, iov[0].iov_len);
	return R(readv)(fd, iov, iovcnt);
}

/* A send on a generic netlink socket of the program's (netlink.c). */
static ssize_t nl_send(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
		       socklen_t tolen)
{
	struct iovec v = { (void *)buf, len };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &v,
			    .msg_iovlen = 1 };
	return nl_sendmsg(fd, &m, flags);
}

static ssize_t nl_recv(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
		       socklen_t *fromlen)
{
	struct iovec v = { buf, len };
	struct msghdr m = { .msg_name = from, .msg_namelen = fromlen ? *fromlen : 0,
			    .msg_iov = &v, .msg_iovlen = 1 };
	ssize_t n = nl_recvmsg(fd, &m, flags);
	if (n >= 0 && from && fromlen)
		*fromlen = m.msg_namelen;
	return n;
}

SC_API ssize_t write(int fd, const void *buf, size_t len)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_send(fd, buf, len, 0, NULL, 0);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (!s)
		return R(write)(fd, buf, len);
	if (sock_mode(s) == M_TCP) {
		tcp_gate(s);
		return tcp_sent(s, R(write)(fd, buf, len));
	}
	struct iovec v = { (void *)buf, len };
	return do_sendv(fd, s, &v, 1, 0, tcp_writev);
}

SC_API ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_send(fd, buf, len, flags, NULL, 0);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (!s)
		return R(send)(fd, buf, len, flags);
	if (sock_mode(s) == M_TCP) {
		tcp_gate(s);
		return tcp_sent(s, R(send)(fd, buf, len, flags));
	}
	struct iovec v = { (void *)buf, len };
	if ((flags & MSG_ZEROCOPY) && sock_mode(s) != M_TCP) {
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
		ssize_t n = dm_sendmsg(fd, s, &m, flags);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	return do_sendv(fd, s, &v, 1, flags, tcp_sendv);
}

ssize_t sock_sendv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt, int flags)
{
	return do_sendv(fd, s, iov, iovcnt, flags, tcp_sendv);
}

SC_API ssize_t sendto(int fd, const void *buf, size_t len, int flags,
		      const struct sockaddr *to, socklen_t tolen)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_send(fd, buf, len, flags, to, tolen);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (s && (flags & MSG_FASTOPEN) && sock_mode(s) == M_TCP && !s->counted) {
		/* data in the SYN: shared memory cannot take part */
		ssize_t n = R(sendto)(fd, buf, len, flags, to, tolen);
		if (n >= 0 || errno == EINPROGRESS)
			fallback_stat(s, fd, SC_FB_UNSUPPORTED);
		return n;
	}
	if (!s)
		return R(sendto)(fd, buf, len, flags, to, tolen);
	if (sock_mode(s) == M_TCP) {
		tcp_gate(s);
		return tcp_sent(s, R(sendto)(fd, buf, len, flags, to, tolen));
	}
	/* a connected TCP socket ignores the address (EISCONN only for
	 * MSG_FASTOPEN-style use, which we decline) */
	struct iovec v = { (void *)buf, len };
	return do_sendv(fd, s, &v, 1, flags, tcp_sendv);
}

SC_API ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(writev)(fd, iov, iovcnt);
	if (sock_mode(s) == M_TCP) {
		tcp_gate(s);
		return tcp_sent(s, R(writev)(fd, iov, iovcnt));
	}
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return do_sendv(fd, s, iov, iovcnt, 0, tcp_writev);
}

SC_API ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	/* accelerated fds passed to another process go back to TCP first:
	 * the receiver reads the kernel socket */
	sw_rights(m);
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_sendmsg(fd, m, flags);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (s && sock_mode(s) != M_TCP &&
	    ((flags & MSG_ZEROCOPY) || (m->msg_control && m->msg_controllen))) {
		/* zerocopy completions, devmem transmit (devmem.c) */
		ssize_t n = dm_sendmsg(fd, s, m, flags);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (s && sock_mode(s) == M_TCP) {
		tcp_gate(s);
		return tcp_sent(s, R(sendmsg)(fd, m, flags));
	}
	if (!s || m->msg_controllen) {
		tcp_gate(s);
		return R(sendmsg)(fd, m, flags);
	}
	if (m->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	return do_sendv(fd, s, m->msg_iov, (int)m->msg_iovlen, flags, tcp_sendv);
}

SC_API int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	for (unsigned int i = 0; v && i < n; i++)
		sw_rights(&v[i].msg_hdr);
	struct sc_sock *s = sock_get(fd);
	if (!s || sock_mode(s) == M_TCP) {
		tcp_gate(s);
		return tcp_messages(s, true, flags, v, R(sendmmsg)(fd, v, n, flags));
	}
	unsigned int i;
	for (i = 0; i < n; i++) {
		ssize_t r = sendmsg(fd, &v[i].msg_hdr, flags);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned int)r;
	}
	return (int)i;
}

SC_API ssize_t read(int fd, void *buf, size_t len)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_recv(fd, buf, len, 0, NULL, NULL);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (!s)
		return R(read)(fd, buf, len);
	if (sock_mode(s) == M_TCP)
		return tcp_received(s, 0, R(read)(fd, buf, len));
	struct iovec v = { buf, len };
	return do_recvv(fd, s, &v, 1, 0, tcp_readv);
}

SC_API ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		return R(__read_chk)(fd, buf, len, buflen);   /* aborts */
	return read(fd, buf, len);
}

SC_API ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_recv(fd, buf, len, flags, NULL, NULL);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (!s)
		return R(recv)(fd, buf, len, flags);
	if (sock_mode(s) == M_TCP)
		return tcp_received(s, flags, R(recv)(fd, buf, len, flags));
	struct iovec v = { buf, len };
	return do_recvv(fd, s, &v, 1, flags, tcp_recvv);
}

SC_API ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		return R(__recv_chk)(fd, buf, len, buflen, flags);
	return recv(fd, buf, len, flags);
}

SC_API ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
			socklen_t *fromlen)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_recv(fd, buf, len, flags, from, fromlen);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (!s)
		return R(recvfrom)(fd, buf, len, flags, from, fromlen);
	if (sock_mode(s) == M_TCP)
		return tcp_received(s, flags, R(recvfrom)(fd, buf, len, flags, from, fromlen));
	struct iovec v = { buf, len };
	ssize_t n = do_recvv(fd, s, &v, 1, flags, tcp_recvv);
	if (n >= 0 && from && fromlen)
		*fromlen = 0;           /* TCP: no address */
	return n;
}

SC_API ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
			      struct sockaddr *from, socklen_t *fromlen)
{
	if (len > buflen)
		return R(__recvfrom_chk)(fd, buf, len, buflen, flags, from, fromlen);
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

SC_API ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(readv)(fd, iov, iovcnt);
	if (sock_mode(s) == M_TCP)
		return tcp_received(s, 0, R(readv)(fd, iov, iovcnt));
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return do_recvv(fd, s, iov, iovcnt, 0, tcp_readv);
}

SC_API ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		ssize_t n = nl_recvmsg(fd, m, flags);
		if (n != NOT_MINE)
			return sc_ret(n);
	}
	if (s && (flags & MSG_ERRQUEUE)) {
		/* our zerocopy completions, then the kernel's queue */
		ssize_t n = dm_errqueue(fd, s, m);
		if (n != NOT_MINE)
			return sc_ret(n);
		return R(recvmsg)(fd, m, flags);
	}
	if (s && (flags & MSG_SOCK_DEVMEM) && sock_mode(s) != M_TCP) {
		ssize_t n = dm_recvmsg(fd, s, m, flags);
		if (n != NOT_MINE)
			return sc_ret(n);
		flags &= ~MSG_SOCK_DEVMEM;      /* plain bytes, as the kernel's loopback */
	}
	if (!s)
		return R(recvmsg)(fd, m, flags);
	if (sock_mode(s) == M_TCP)
		return tcp_received(s, flags, R(recvmsg)(fd, m, flags));
	if (m->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	ssize_t n = do_recvv(fd, s, m->msg_iov, (int)m->msg_iovlen, flags, tcp_recvv);
	if (n >= 0) {
		m->msg_controllen = 0;
		m->msg_flags = 0;
		m->msg_namelen = 0;
	}
	return n;
}

SC_API int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
		    struct timespec *timeout)
{
	struct sc_sock *s = sock_get(fd);
	if (!s || sock_mode(s) == M_TCP)
		return tcp_messages(s, false, flags, v, R(recvmmsg)(fd, v, n, flags, timeout));
	unsigned int i;
	for (i = 0; i < n; i++) {
		ssize_t r = recvmsg(fd, &v[i].msg_hdr, i ? flags | MSG_DONTWAIT : flags);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned int)r;
		if (r == 0)
			break;
	}
	return (int)i;
}
