/* SPDX-License-Identifier: MIT */
/*
 * Socket options and control: getsockopt, setsockopt, ioctl, fcntl.
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
static int do_fcntl(int (*f)(int, int, ...), int fd, int cmd, va_list ap)
{
	struct sc_sock *s = sock_get(fd);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		int arg = va_arg(ap, int);
		int n = f(fd, cmd, arg);
		if (n >= 0 && s)
			fd_alias(fd, n);
		if (n >= 0)
			ep_dup(fd, n);
		return n;
	}
	case F_SETFL: {
		int arg = va_arg(ap, int);
		int n = f(fd, cmd, arg);
		if (n == 0 && s)
			s->nonblock = arg & O_NONBLOCK;
		return n;
	}
	case F_GETFD: case F_GETFL: case F_GETOWN: case F_GETSIG: case F_GETLEASE:
	case F_GETPIPE_SZ: case F_GET_SEALS:
		return f(fd, cmd);
	default: {
		void *arg = va_arg(ap, void *);
		return f(fd, cmd, arg);
	}
	}
}

SC_API int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int rc = do_fcntl(R(fcntl), fd, cmd, ap);
	va_end(ap);
	return rc;
}

SC_API int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int rc = do_fcntl((pthread_once(&real_once, real_init), real_fcntl64), fd, cmd, ap);
	va_end(ap);
	return rc;
}

/* FIONREAD (bytes to read) or SIOCOUTQ (bytes the peer has not read) of
 * a connection on shared memory, as the kernel caps them. */
static int shm_queued(struct sc_conn *c, unsigned long req)
{
	int64_t v;
	if (req == FIONREAD) {
		v = rx_avail(c);
	} else {
		sc__lock(&c->txlock);
		v = (int64_t)(c->tx.prod - atomic_load_explicit(&c->tx.h->cons, memory_order_acquire));
		sc__unlock(&c->txlock);
		if (v > (int64_t)c->tx.size)
			v = 0;
	}
	return v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int)v;
}

SC_API int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(ioctl)(fd, req, arg);
	if (req == FIONBIO) {
		int rc = R(ioctl)(fd, req, arg);
		if (rc == 0)
			s->nonblock = *(int *)arg != 0;
		return rc;
	}
	bool queue = req == FIONREAD || req == SIOCOUTQ;
	if (!queue && req != SIOCATMARK)
		return R(ioctl)(fd, req, arg);
	enum sc_route rt = queue ? sock_route(fd, s) : sock_where(s);
	if (rt == RT_PENDING && queue) {
		pthread_mutex_lock(&s->lock);
		if (req == SIOCOUTQ && sock_mode(s) == M_PENDING) {
			*(int *)arg = (int)s->plen;
			pthread_mutex_unlock(&s->lock);
			return 0;
		}
		pending_settle(fd, s, false, 0);
		pthread_mutex_unlock(&s->lock);
		if ((rt = sock_where(s)) == RT_PENDING) {
			*(int *)arg = 0;
			return 0;
		}
	}
	if (rt == RT_INHERITED) {
		sw_request_owner(fd, s);        /* then the kernel's */
		rt = sock_where(s);
	}
	if (req == SIOCATMARK && rt == RT_SHM && switching(s->c)) {
		sock_switch(fd, s);     /* urgent data on its way: the kernel's */
		rt = sock_where(s);
	}
	if (rt == RT_SHM && queue) {
		*(int *)arg = shm_queued(s->c, req);
		return 0;
	}
	return R(ioctl)(fd, req, arg);
}

SC_API int getsockopt(int fd, int level, int opt, void *val, socklen_t *len)
{
	struct sc_sock *s = sock_get(fd);
	if (s && level == SOL_SOCKET && opt == SO_ERROR && sock_where(s) == RT_SHM &&
	    val && len && *len >= sizeof(int)) {
		struct sc_conn_info ci;
		sc_conn_info(s->c, &ci);
		if ((ci.state & SC_EV_ERR) || s->sent_to_closed) {
			/* reported once, as the kernel clears sk_err (a reset
			 * in CLOSE_WAIT, after our send to a closed peer, is
			 * EPIPE there) */
			*(int *)val = s->err_reported ? 0 : s->sent_to_closed ? EPIPE : ECONNRESET;
			s->err_reported = true;
			*len = sizeof(int);
			return 0;
		}
	}
	return R(getsockopt)(fd, level, opt, val, len);
}

/* A SOL_SOCKET option the kernel took: what shared memory must follow. */
static void set_sol(int fd, struct sc_sock *s, int opt, const void *val, socklen_t len)
{
	if (opt == SO_ZEROCOPY && val && len >= sizeof(int))
		s->zerocopy = *(const int *)val != 0;
	if (val && len >= sizeof(struct timeval) &&
	    (opt == SO_RCVTIMEO_OLD || opt == SO_SNDTIMEO_OLD || opt == SO_RCVTIMEO_NEW ||
	     opt == SO_SNDTIMEO_NEW)) {
		const struct timeval *tv = val;
		uint64_t ns = (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
		if (opt == SO_RCVTIMEO_OLD || opt == SO_RCVTIMEO_NEW)
			s->rcvtimeo_ns = ns;
		else
			s->sndtimeo_ns = ns;
	}
	if (opt == SO_RCVLOWAT) {
		/* the value the kernel settled on (it clamps) */
		int v = 1;
		socklen_t vl = sizeof(v);
		if (R(getsockopt)(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &vl) == 0)
			s->rcvlowat = v;
	}
	if (opt == SO_SNDBUF || opt == SO_RCVBUF || opt == SO_SNDBUFFORCE || opt == SO_RCVBUFFORCE) {
		/* the size the kernel settled on (it doubles and clamps);
		 * the ring's window follows (sc_set_bufs) */
		bool snd = opt == SO_SNDBUF || opt == SO_SNDBUFFORCE;
		int v = 0;
		socklen_t vl = sizeof(v);
		if (R(getsockopt)(fd, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, &v, &vl) == 0) {
			*(snd ? &s->sndbuf : &s->rcvbuf) = v / 2 > 0 ? v / 2 : 1;
			if (sock_where(s) == RT_SHM && s->c)
				sc_set_bufs(s->c, snd ? s->sndbuf : -1, snd ? -1 : s->rcvbuf);
		}
	}
	if (opt == SO_LINGER && val && len >= sizeof(struct linger)) {
		const struct linger *l = val;
		s->linger0 = l->l_onoff && !l->l_linger;
	}
}

/* An IPPROTO_TCP option the kernel took: what shared memory must follow. */
static void set_tcp(int fd, struct sc_sock *s, int opt, const void *val, socklen_t len)
{
	if (opt == TCP_DEFER_ACCEPT && sock_mode(s) == M_LISTEN) {
		/* clients of a listener that defers its accepts put their
		 * first byte on TCP (the kernel's word: it rounds) */
		int v = 0;
		socklen_t vl = sizeof(v);
		pthread_mutex_lock(&s->lock);
		if (sock_mode(s) == M_LISTEN && s->board &&
		    R(getsockopt)(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, &vl) == 0)
			sc__board_defer(s->board, s->ino, v > 0);
		pthread_mutex_unlock(&s->lock);
	}
	if ((opt == TCP_CORK || opt == TCP_NODELAY) && val && len >= sizeof(int)) {
		/* cork holds the peer's wake-up back (at most 200 ms, as the
		 * kernel holds the bytes); uncorking, and TCP_NODELAY set,
		 * push what is held (the kernel's tcp_push_pending_frames) */
		bool on = *(const int *)val != 0;
		if (opt == TCP_CORK)
			s->cork = on;
		bool push = opt == TCP_CORK ? !on : on;
		if (push && sock_mode(s) == M_PENDING) {
			/* the kernel pushed our lead byte (pending_lead) */
			pthread_mutex_lock(&s->lock);
			s->lead_held = false;
			pthread_mutex_unlock(&s->lock);
		}
		if (sock_where(s) == RT_SHM && s->c) {
			if (opt == TCP_CORK)
				sc_set_cork(s->c, on);
			else if (on)
				sc_flush(s->c);
		}
	}
	if ((opt == TCP_FASTOPEN_CONNECT || opt == TCP_REPAIR) && val && len >= sizeof(int))
		s->fastopen = *(const int *)val != 0;
}

/* IP_TOS / IPV6_TCLASS (as the kernel settled on it) and IP_TTL /
 * IPV6_UNICAST_HOPS (-1: the default, as given): put back after our SYN's
 * mark and tag. */
static void set_ip(int fd, struct sc_sock *s, int level, int opt, const void *val, socklen_t len)
{
	bool v4 = level == IPPROTO_IP;
	if (((v4 && opt == IP_TOS) || (!v4 && opt == IPV6_TCLASS)) && val && len >= 1) {
		int v = 0;
		socklen_t vl = sizeof(v);
		if (R(getsockopt)(fd, level, opt, &v, &vl) == 0)
			*(v4 ? &s->tos : &s->tclass) = v;
	}
	if (((v4 && opt == IP_TTL) || (!v4 && opt == IPV6_UNICAST_HOPS)) && val &&
	    len >= sizeof(int))
		*(v4 ? &s->ttl : &s->hops) = *(const int *)val;
}

SC_API int setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
	struct sc_sock *s = sock_get(fd);
	if (s && level == SOL_SOCKET && opt == SO_DEVMEM_DONTNEED) {
		/* fragments of ours: the count freed (a positive return) */
		int n = dm_dontneed(s, val, len);
		if (n != NOT_MINE)
			return (int)sc_ret(n);
	}
	int rc = R(setsockopt)(fd, level, opt, val, len);
	if (rc < 0 || !s)
		return rc;
	if (level == SOL_SOCKET)
		set_sol(fd, s, opt, val, len);
	else if (level == IPPROTO_TCP)
		set_tcp(fd, s, opt, val, len);
	else if (level == IPPROTO_IP || level == IPPROTO_IPV6)
		set_ip(fd, s, level, opt, val, len);
	return rc;
}
