/* SPDX-License-Identifier: MIT */
/*
 * The data path: the send and receive families on an accelerated socket
 * (the core's sc_sendv/sc_recvv), timeouts, MSG_* flags, sendfile, splice.
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

/* A pending client writes: into the private buffer while it lasts. */
static ssize_t pending_send(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			    int flags)
{
	size_t done = 0, from = s->plen;

	for (int i = 0; i < iovcnt && s->plen < PBUF_CAP; i++) {
		size_t n = iov[i].iov_len;
		if (n > PBUF_CAP - s->plen)
			n = PBUF_CAP - s->plen;
		memcpy(s->pbuf + s->plen, iov[i].iov_base, n);
		s->plen += n;
		done += n;
		if (n < iov[i].iov_len)
			break;
	}
	size_t want = 0;
	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (done < want)
		s->pnospace++;  /* full: room is news when it comes (EPOLLET) */
	if (done)
		rec_add(&s->shm_calls, 1);
	/* the first bytes ride with the offer too, while nobody claimed it:
	 * the acceptor finds them in its ring at once (not held ones: a
	 * cork or MSG_MORE waits for more) */
	if (done && s->early == from && s->offer >= 0 && s->board &&
	    !s->cork && !(flags & MSG_MORE))
		s->early += (uint32_t)sc__offer_early(s->board, s->offer, s->tag, s->early,
						      s->pbuf + from, done);
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
	if (atomic_load(&s->mode) != M_SHM || !s->c)
		return false;
	struct sc_chan *ch = atomic_load(&s->c->chan);
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

static int iov_rest(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *rest);

/* Run one shared-memory call, honouring the socket's timeout.  As in
 * tcp_sendmsg / tcp_recvmsg the timeout bounds the call's waiting in all
 * (it does not restart with progress); a send, or a MSG_WAITALL receive,
 * that has moved some bytes when it runs out (or meets an error or the
 * end) returns that much. */
static ssize_t shm_call(int fd, struct sc_sock *s, bool tx, int f,
			ssize_t (*op)(struct sc_conn *, const struct iovec *, int, int),
			const struct iovec *iov, int iovcnt)
{
	uint64_t to = tx ? s->sndtimeo_ns : s->rcvtimeo_ns;
	if (!to || (f & SC_NONBLOCK))
		return op(s->c, iov, iovcnt, f);
	/* a peek looks at the same bytes again: it never accumulates */
	bool all = tx || ((f & SC_WAITALL) && !(f & SC_PEEK));
	size_t total = 0, done = 0;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	uint64_t deadline = sc__now_ns() + to;
	if (!tx && (f & SC_PEEK) && (f & SC_WAITALL) && total) {
		/* a waiting peek: the whole length (or the end), within the
		 * timeout; then what there is */
		int64_t want = total < s->c->rx.size ? (int64_t)total : (int64_t)s->c->rx.size;
		ssize_t rc = op(s->c, iov, iovcnt, f | SC_NONBLOCK);
		if (rc != -EAGAIN && (rc < 0 || rc >= want || rc == 0))
			return rc;
		int w = sc__conn_wait_avail(s->c, want, deadline);
		if (w < 0 && w != -ETIMEDOUT)
			return w;
		rc = op(s->c, iov, iovcnt, f | SC_NONBLOCK);
		return rc == -EAGAIN && w == -ETIMEDOUT ? -EAGAIN : rc;
	}
	struct iovec rest[IOV_MAX];
	for (;;) {
		const struct iovec *v = iov;
		int k = iovcnt;
		if (done) {
			k = iov_rest(iov, iovcnt, done, rest);
			v = rest;
		}
		ssize_t rc = op(s->c, v, k, f | SC_NONBLOCK);
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

static ssize_t sendv_op(struct sc_conn *c, const struct iovec *iov, int n, int f)
{
	return sc_sendv(c, iov, n, f);
}

static ssize_t recvv_op(struct sc_conn *c, const struct iovec *iov, int n, int f)
{
	return sc_recvv(c, iov, n, f);
}

/* recv with MSG_TRUNC: TCP discards the bytes instead of copying them (the
 * buffer may be NULL; only the lengths count).  With MSG_PEEK it reports how
 * many there are, up to the length, and leaves them. */
static ssize_t trunc_op(struct sc_conn *c, const struct iovec *iov, int n, int f)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
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

/* iov without its first skip bytes, in rest (IOV_MAX entries); returns
 * the count. */
static int iov_rest(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *rest)
{
	int k = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		rest[k].iov_base = (char *)iov[i].iov_base + skip;
		rest[k++].iov_len = iov[i].iov_len - skip;
		skip = 0;
	}
	return k;
}

/* A switch back to TCP is under way on c (ours or the peer's): a blocking
 * call it cut short goes on over TCP. */
bool switching(struct sc_conn *c)
{
	return atomic_load(&c->sw) != SC_SW_NONE ||
	       (atomic_load_explicit(&c->peer->flags, memory_order_acquire) & SC_SF_FROZEN) ||
	       (atomic_load(&c->lflags) & SC_LF_DEATH_SWITCH);
}

/* Bytes a connection of ours moved over TCP. */
static void tcp_count(struct sc_sock *s, bool tx, ssize_t n)
{
	if (n <= 0 || !s->counted)
		return;
	if (tx)
		SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
	else
		SC_STAT_ADD(bytes_tcp_received, (uint64_t)n);
	if (s->rec)
		rec_add(tx ? &s->rec->bytes_sent : &s->rec->bytes_received, n);
}

static ssize_t do_sendv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			int flags, ssize_t (*tcp)(int, const struct iovec *, int, int))
{
	if (atomic_load_explicit(&s->mode, memory_order_relaxed) == M_SPENDING)
		server_settle(fd, s);
	size_t total = 0;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;

	if (atomic_load_explicit(&s->mode, memory_order_acquire) == M_PENDING) {
		pthread_mutex_lock(&s->lock);
		ssize_t n = 0;
		if (atomic_load(&s->mode) == M_PENDING) {
			if (atomic_load(&s->attached))
				pending_settle(fd, s, false, 0);
			if (atomic_load(&s->mode) == M_PENDING &&
			    (s->nonblock || (flags & MSG_DONTWAIT)) && !pending_tcp_up(fd, s)) {
				/* not connected yet: as the kernel says */
				pthread_mutex_unlock(&s->lock);
				errno = EAGAIN;
				return -1;
			}
			if (atomic_load(&s->mode) == M_PENDING) {
				n = pending_send(fd, s, iov, iovcnt, flags);
				if (s->rec)
					rec_add(&s->rec->bytes_sent, n);
				if ((size_t)n < total && n == 0) {
					/* buffer full: wait for the claim like a
					 * full socket buffer */
					if (s->nonblock || (flags & MSG_DONTWAIT)) {
						pthread_mutex_unlock(&s->lock);
						errno = EAGAIN;
						return -1;
					}
					pending_settle(fd, s, true, -1);
				}
			}
		}
		bool block = !(s->nonblock || (flags & MSG_DONTWAIT));
		if (n > 0 && (size_t)n < total && block) {
			/* a blocking send is not cut short by the buffer's
			 * size: wait for the claim, then send the rest */
			pending_settle(fd, s, true, -1);
			pthread_mutex_unlock(&s->lock);
			struct iovec rest[IOV_MAX];
			int k = iov_rest(iov, iovcnt, (size_t)n, rest);
			ssize_t more = do_sendv(fd, s, rest, k, flags, tcp);
			return more > 0 ? n + more : n;
		}
		pthread_mutex_unlock(&s->lock);
		if (n > 0 || total == 0)
			return n;
	}
	int mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	if (mode == M_SHM && s->owner == sc__pid() && (flags & MSG_OOB)) {
		/* urgent data is TCP's: the connection goes back to it (after
		 * every byte sent before), and the kernel marks the byte */
		sock_switch(fd, s);
		mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	}
	if (mode == M_SHM && s->owner == sc__pid()) {
		int f = sc_flags(s, flags, false);
		if (f < 0) {
			errno = -f;
			return -1;
		}
		ssize_t rc = shm_call(fd, s, true, f, sendv_op, iov, iovcnt);
		if (rc > 0)
			rec_add(&s->shm_calls, 1);
		if (s->rec)
			rec_add(&s->rec->bytes_sent, rc);
		if (rc == -SC_ESWITCHED || (rc > 0 && (size_t)rc < total && !(f & SC_NONBLOCK) &&
					    switching(s->c))) {
			/* the connection went back to TCP (an exec, the peer):
			 * the rest goes there */
			if (sock_switch(fd, s) < 0) {
				errno = ENOTCONN;
				return -1;
			}
			if (rc > 0) {
				struct iovec rest[IOV_MAX];
				int k = iov_rest(iov, iovcnt, (size_t)rc, rest);
				tcp_gate(s);
				ssize_t more = tcp(fd, rest, k, flags);
				if (more > 0)
					tcp_count(s, true, more);
				return rc + (more > 0 ? more : 0);
			}
			goto tcp;
		}
		if (rc == -EPIPE && !s->shut_wr && !s->sent_to_closed) {
			/* TCP: the first send to a peer that closed succeeds
			 * (the peer answers it with a reset); then EPIPE */
			s->sent_to_closed = true;
			return (ssize_t)total;
		}
		if (rc == -ECONNRESET) {
			/* reported once, as sk_err; then the socket is dead */
			if (s->err_reported)
				rc = -EPIPE;
			s->err_reported = true;
		}
		return shm_result(rc, flags, true);
	}
	if (mode == M_SHM && sw_request_owner(fd, s) < 0) {
		errno = ENOTCONN;       /* inherited, and its owner did not switch it */
		return -1;
	}
tcp:;
	tcp_gate(s);                    /* switched: after the re-send */
	ssize_t n = tcp(fd, iov, iovcnt, flags);
	tcp_count(s, true, n);
	return n;
}

static ssize_t do_recvv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			int flags, ssize_t (*tcp)(int, const struct iovec *, int, int))
{
	if (atomic_load_explicit(&s->mode, memory_order_relaxed) == M_SPENDING)
		server_settle(fd, s);
	if (atomic_load_explicit(&s->mode, memory_order_acquire) == M_PENDING) {
		pthread_mutex_lock(&s->lock);
		int rc = pending_settle(fd, s, !(s->nonblock || (flags & MSG_DONTWAIT)), -1);
		pthread_mutex_unlock(&s->lock);
		if (rc == -EAGAIN) {
			errno = EAGAIN;
			return -1;
		}
	}
	int mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	if (mode == M_SHM && s->owner == sc__pid() && (flags & MSG_OOB)) {
		/* a connection on shared memory has no urgent byte (a sender
		 * of one switches to TCP first): the kernel's answer is
		 * EINVAL, unless the peer's switch is under way */
		if (!switching(s->c)) {
			errno = EINVAL;
			return -1;
		}
		sock_switch(fd, s);
		mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	}
	if (mode == M_SHM && s->owner == sc__pid()) {
		int f = sc_flags(s, flags, true);
		if (f < 0) {
			errno = -f;
			return -1;
		}
		size_t total = 0;
		for (int i = 0; i < iovcnt; i++)
			total += iov[i].iov_len;
		if (!total) {
			/* as TCP: nothing to read yet is EAGAIN, else 0 */
			if ((f & SC_NONBLOCK) && !(sc_conn_events(s->c) & (SC_EV_IN | SC_EV_ERR))) {
				errno = EAGAIN;
				return -1;
			}
			return 0;
		}
		/* SO_RCVLOWAT: the blocking receive waits in the core; with
		 * SO_RCVTIMEO (polled here) wait for the mark first, and at
		 * the timeout take what there is */
		s->c->rcvlowat = s->rcvlowat > 1 ? (uint32_t)s->rcvlowat : 0;
		if (s->rcvlowat > 1 && s->rcvtimeo_ns && !(f & (SC_NONBLOCK | SC_WAITALL | SC_PEEK))) {
			uint64_t dl = sc__now_ns() + s->rcvtimeo_ns;
			int64_t want = lowat_target(s, total);
			if (rx_avail(s->c) < want)
				want = lowat_target(s, SIZE_MAX);
			while (rx_avail(s->c) < want && !switching(s->c) &&
			       !(sc_conn_events(s->c) & (SC_EV_RDHUP | SC_EV_HUP | SC_EV_ERR))) {
				int w = shm_wait_until(fd, s, false, dl);
				if (w == -EINTR) {
					errno = EINTR;  /* a socket timeout: never restarted */
					return -1;
				}
				if (w < 0) {
					f |= SC_NONBLOCK;       /* timed out */
					break;
				}
			}
		}
		ssize_t rc = shm_call(fd, s, false, f, flags & MSG_TRUNC ? trunc_op : recvv_op,
				      iov, iovcnt);
		if (rc > 0 && !(f & SC_PEEK))
			rec_add(&s->shm_calls, 1);
		if (rc == -SC_ESWITCHED || (rc > 0 && (size_t)rc < total && (f & SC_WAITALL) &&
					    switching(s->c))) {
			/* the connection went back to TCP: the rest comes from
			 * there (what the peer had sent us is re-sent first) */
			if (sock_switch(fd, s) < 0) {
				errno = ENOTCONN;
				return -1;
			}
			if (rc > 0) {
				if (s->rec)
					rec_add(&s->rec->bytes_received, rc);
				struct iovec rest[IOV_MAX];
				int k = iov_rest(iov, iovcnt, (size_t)rc, rest);
				ssize_t more = tcp(fd, rest, k, flags);
				if (more > 0)
					tcp_count(s, false, more);
				return rc + (more > 0 ? more : 0);
			}
			goto tcp;
		}
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
	if (mode == M_SHM && sw_request_owner(fd, s) < 0) {
		errno = ENOTCONN;
		return -1;
	}
tcp:;
	ssize_t n = tcp(fd, iov, iovcnt, flags);
	if (!(flags & MSG_PEEK))
		tcp_count(s, false, n);
	return n;
}

/* On TCP, the call the program made when it had one buffer (a message
 * header or a vector costs the kernel a copy and a check more). */
static ssize_t tcp_sendv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt == 1)
		return R(sendto)(fd, iov[0].iov_base, iov[0].iov_len, flags, NULL, 0);
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	return R(sendmsg)(fd, &m, flags);
}
static ssize_t tcp_recvv(int fd, const struct iovec *iov, int iovcnt, int flags)
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
		       socklen_t tolen, bool *handled)
{
	struct iovec v = { (void *)buf, len };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &v,
			    .msg_iovlen = 1 };
	return nl_sendmsg(fd, &m, flags, handled);
}

static ssize_t nl_recv(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
		       socklen_t *fromlen, bool *handled)
{
	struct iovec v = { buf, len };
	struct msghdr m = { .msg_name = from, .msg_namelen = fromlen ? *fromlen : 0,
			    .msg_iov = &v, .msg_iovlen = 1 };
	ssize_t n = nl_recvmsg(fd, &m, flags, handled);
	if (*handled && n >= 0 && from && fromlen)
		*fromlen = m.msg_namelen;
	return n;
}

SC_API ssize_t write(int fd, const void *buf, size_t len)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		bool handled;
		ssize_t n = nl_send(fd, buf, len, 0, NULL, 0, &handled);
		if (handled)
			return n;
	}
	if (!s)
		return R(write)(fd, buf, len);
	struct iovec v = { (void *)buf, len };
	return do_sendv(fd, s, &v, 1, 0, tcp_writev);
}

SC_API ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s && nl_fd(fd)) {
		bool handled;
		ssize_t n = nl_send(fd, buf, len, flags, NULL, 0, &handled);
		if (handled)
			return n;
	}
	if (!s)
		return R(send)(fd, buf, len, flags);
	struct iovec v = { (void *)buf, len };
	if ((flags & MSG_ZEROCOPY) && atomic_load(&s->mode) != M_TCP) {
		struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
		bool handled;
		ssize_t n = dm_sendmsg(fd, s, &m, flags, &handled);
		if (handled)
			return n;
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
		bool handled;
		ssize_t n = nl_send(fd, buf, len, flags, to, tolen, &handled);
		if (handled)
			return n;
	}
	if (s && (flags & MSG_FASTOPEN) && atomic_load(&s->mode) == M_TCP && !s->counted) {
		/* data in the SYN: shared memory cannot take part */
		ssize_t n = R(sendto)(fd, buf, len, flags, to, tolen);
		if (n >= 0 || errno == EINPROGRESS)
			fallback_stat(s, fd, SC_FB_UNSUPPORTED);
		return n;
	}
	if (!s || (to && atomic_load(&s->mode) == M_TCP))
		return R(sendto)(fd, buf, len, flags, to, tolen);
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
		bool handled;
		ssize_t n = nl_sendmsg(fd, m, flags, &handled);
		if (handled)
			return n;
	}
	if (s && atomic_load(&s->mode) != M_TCP &&
	    ((flags & MSG_ZEROCOPY) || (m->msg_control && m->msg_controllen))) {
		/* zerocopy completions, devmem transmit (devmem.c) */
		bool handled;
		ssize_t n = dm_sendmsg(fd, s, m, flags, &handled);
		if (handled)
			return n;
	}
	if (!s || atomic_load(&s->mode) == M_TCP || m->msg_controllen) {
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
	if (!s || atomic_load(&s->mode) == M_TCP) {
		tcp_gate(s);
		return R(sendmmsg)(fd, v, n, flags);
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
		bool handled;
		ssize_t n = nl_recv(fd, buf, len, 0, NULL, NULL, &handled);
		if (handled)
			return n;
	}
	if (!s)
		return R(read)(fd, buf, len);
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
		bool handled;
		ssize_t n = nl_recv(fd, buf, len, flags, NULL, NULL, &handled);
		if (handled)
			return n;
	}
	if (!s)
		return R(recv)(fd, buf, len, flags);
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
		bool handled;
		ssize_t n = nl_recv(fd, buf, len, flags, from, fromlen, &handled);
		if (handled)
			return n;
	}
	if (!s || atomic_load(&s->mode) == M_TCP)
		return R(recvfrom)(fd, buf, len, flags, from, fromlen);
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
		bool handled;
		ssize_t n = nl_recvmsg(fd, m, flags, &handled);
		if (handled)
			return n;
	}
	if (s && (flags & MSG_ERRQUEUE)) {
		/* our zerocopy completions, then the kernel's queue */
		bool handled;
		ssize_t n = dm_errqueue(fd, s, m, &handled);
		if (handled)
			return n;
		return R(recvmsg)(fd, m, flags);
	}
	if (s && (flags & MSG_SOCK_DEVMEM) && atomic_load(&s->mode) != M_TCP) {
		bool handled;
		ssize_t n = dm_recvmsg(fd, s, m, flags, &handled);
		if (handled)
			return n;
		flags &= ~MSG_SOCK_DEVMEM;      /* plain bytes, as the kernel's loopback */
	}
	if (!s || atomic_load(&s->mode) == M_TCP)
		return R(recvmsg)(fd, m, flags);
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
	if (!s || atomic_load(&s->mode) == M_TCP)
		return R(recvmmsg)(fd, v, n, flags, timeout);
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

/* sendfile from a file into an accelerated socket: read, then send. */
SC_API ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct sc_sock *s = sock_get(out);
	if (!s || atomic_load(&s->mode) == M_TCP) {
		tcp_gate(s);
		ssize_t n = R(sendfile)(out, in, off, count);
		if (s && n > 0 && s->counted)
			SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
		return n;
	}
	/* the source must be a file: with an offset, pread says so itself
	 * (ESPIPE for a socket or pipe); without, ask once */
	struct stat ist;
	if (!off && fstat(in, &ist) < 0)
		return -1;
	if (!off && !S_ISREG(ist.st_mode) && !S_ISBLK(ist.st_mode)) {
		errno = EINVAL;         /* the kernel's answer for a non-file */
		return -1;
	}
	char buf[65536];
	size_t done = 0;
	off_t pos = off ? *off : 0;
	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		ssize_t r = off ? pread(in, buf, want, pos) : R(read)(in, buf, want);
		if (r < 0) {
			if (errno == ESPIPE)
				errno = EINVAL;
			if (done)
				break;
			return -1;
		}
		if (r == 0)
			break;
		ssize_t w = send(out, buf, (size_t)r, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EPIPE)
				raise(SIGPIPE);
			if (done) {
				errno = 0;
				break;
			}
			if (!off && r > 0)
				lseek(in, -r, SEEK_CUR);
			return -1;
		}
		if (!off && w < r)
			lseek(in, w - r, SEEK_CUR);
		done += (size_t)w;
		pos += w;
		if (w < r)
			break;
	}
	if (off)
		*off = pos;
	return (ssize_t)done;
}

SC_API ssize_t sendfile64(int out, int in, off_t *off, size_t count)
	__attribute__((alias("sendfile")));

/* splice to or from an accelerated socket: the bytes must go through the
 * ring, not the kernel socket (the peer reads the ring).  One bounce buffer. */
SC_API ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned int flags)
{
	static __typeof__(splice) *real_splice;
	if (!real_splice)
		real_splice = (__typeof__(splice) *)dlsym(RTLD_NEXT, "splice");
	struct sc_sock *so = sock_get(out), *si = sock_get(in);
	bool to_shm = so && atomic_load(&so->mode) >= M_SPENDING;
	bool from_shm = si && atomic_load(&si->mode) >= M_SPENDING;
	if (!to_shm && !from_shm) {
		tcp_gate(so);
		return real_splice(in, off_in, out, off_out, len, flags);
	}
	if ((to_shm && off_out) || (from_shm && off_in)) {
		errno = EINVAL;         /* sockets have no offset (no pread/pwrite) */
		return -1;
	}
	char buf[65536];
	size_t want = len < sizeof(buf) ? len : sizeof(buf);
	int mflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
	ssize_t r = from_shm ? recv(in, buf, want, mflags)
			     : off_in ? pread(in, buf, want, *off_in) : R(read)(in, buf, want);
	if (r <= 0)
		return r;
	ssize_t w = 0;
	while (w < r) {
		ssize_t n = to_shm ? send(out, buf + w, (size_t)(r - w), MSG_NOSIGNAL)
				   : off_out ? pwrite(out, buf + w, (size_t)(r - w), *off_out + w)
					     : R(write)(out, buf + w, (size_t)(r - w));
		if (n < 0) {
			if (w)
				break;
			return -1;      /* read bytes are lost, as with a failed splice */
		}
		w += n;
	}
	if (off_in)
		*off_in += r;
	if (off_out)
		*off_out += w;
	return w;
}

/* ---- switching back to TCP ----------------------------------------------
 *
 * An accelerated fd about to reach code that will not use our table (an
 * exec'd image, another process through SCM_RIGHTS) goes back to plain TCP
 * first, at a clean cut: each side freezes its half (no more ring reads or
 * writes; its consumed cursor final), then re-sends on the kernel socket
 * the bytes of its ring the other side never read, and both carry on over
 * TCP (conn.h).  The peer's half is switched by our switch thread when its
 * SWITCH message arrives (the control thread may not block), or by any call
 * of the program's that meets the peer's freeze first.
 */

#define SW_WAIT_NS      (5ull * 1000000000u)    /* for the peer to freeze */
#define SW_SEND_MS      30000                   /* to re-send on TCP */
#define SW_EXIT_MS      5000                    /* exit waits for switches under way */
