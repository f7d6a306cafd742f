/* SPDX-License-Identifier: MIT */
/*
 * poll, ppoll, select, pselect: accelerated fds answered from the rings,
 * the kernel waiting on their wake fds with the program's other fds.
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
/* ---- readiness: poll / select -------------------------------------------- */

/* Readiness of an accelerated fd as poll() reports it; 0 if it needs the
 * kernel's word (plain TCP).  *waitfd: what to poll to learn of a change. */
short sock_revents(int fd, struct sc_sock *s, short want, int *waitfd, bool arm)
{
	*waitfd = -1;
	enum sc_route rt = sock_route(fd, s);
	if (rt == RT_PENDING) {
		pthread_mutex_lock(&s->lock);
		pending_settle(fd, s, false, 0);
		bool pending = sock_mode(s) == M_PENDING;
		short r = 0;
		if (pending) {
			r = s->plen < PBUF_CAP && pending_tcp_up(fd, s) ? (want & POLLOUT) : 0;
			s->efd_exposed = true;  /* the caller polls it */
			*waitfd = s->efd;
		}
		pthread_mutex_unlock(&s->lock);
		if (pending)
			return r;
		rt = sock_where(s);
	}
	if (rt == RT_INHERITED) {
		sw_request_owner(fd, s);        /* on TCP it is ours too */
		rt = sock_where(s);
	}
	if (rt != RT_SHM)
		return -1;
	/* zerocopy completions queued: POLLERR, as the kernel's error queue */
	short zc_err = dm_errqueue_pending(s) ? POLLERR : 0;
	/* arm first, then look: a change after the look wakes the fd
	 * (sc_conn_fd's flag update is a full barrier).  A caller that will
	 * not sleep leaves the token as it is: while nobody sleeps, the
	 * peer's sends make no wake-up calls. */
	if (arm) {
		sc__chan_rearm_poll(s->c);
		*waitfd = sc__conn_poll_arm_(s->c, want & POLLOUT, true);
	}
	if (sc__conn_sw(s->c) != SC_SW_NONE ||
	    (atomic_load_explicit(&s->c->peer->flags, memory_order_acquire) & SC_SF_FROZEN) ||
	    ((sc__conn_lflags(s->c) & SC_LF_DEATH_SWITCH) && !rx_avail(s->c))) {
		/* going back to TCP: the switch's end wakes the waiter, who
		 * then asks the kernel */
		sw_ask(s->c);
		return 0;
	}
	int ev = sc_conn_events(s->c);
	short r = 0;
	if (ev & SC_EV_IN)
		r |= POLLIN | POLLRDNORM;
	if (ev & SC_EV_OUT)
		r |= POLLOUT | POLLWRNORM;
	if (ev & SC_EV_RDHUP)
		r |= POLLRDHUP;
	if (ev & SC_EV_HUP)
		r |= POLLHUP;
	if (ev & SC_EV_ERR)
		r |= POLLERR | POLLRDHUP | POLLHUP;
	/* the reset a send to a closed peer brings back (see do_sendv):
	 * the kernel's socket is then closed, its error EPIPE */
	if (s->sent_to_closed)
		r |= POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLRDHUP | POLLHUP | POLLERR;
	/* the error, once reported (SO_ERROR, a failed call), is gone from
	 * the mask as sk_err is; the hang-up stays */
	if (s->err_reported)
		r &= (short)~POLLERR;
	/* SO_RCVLOWAT: readable from that many bytes on (or at the end) */
	if (s->rcvlowat > 1 && (r & POLLIN) && !(ev & (SC_EV_RDHUP | SC_EV_HUP | SC_EV_ERR)) &&
	    rx_avail(s->c) < lowat_target(s, SIZE_MAX))
		r &= (short)~(POLLIN | POLLRDNORM);
	r &= (short)(want | POLLHUP | POLLERR);
	return r | zc_err;
}

/* What a poll of accelerated fds asks the kernel: k[0..n) mirrors the
 * program's fds (an accelerated one replaced by what tells of its
 * change); a pending client also has its kernel socket watched, in
 * k[n..kn), pmap naming its fds entry: its peer's decline, or a plain peer
 * speaking first, shows only there.  stale: an epoll set's channel fd that
 * stayed readable without making its socket ready (the set's waiter resets
 * it): looked at by slices, not polled, or the call would spin (SO_RCVLOWAT
 * below its mark).  On the stack up to 64 fds. */
struct poll_work {
	struct pollfd *k;
	int *pmap;
	bool *stale;
	nfds_t kn;
	bool slice, pend;       /* a shared channel, a pending client: in slices */
	struct pollfd k_local[128];
	int pmap_local[64];
	bool stale_local[64];
};

static void poll_work_free(struct poll_work *w)
{
	if (w->k != w->k_local)
		free(w->k);
	if (w->pmap != w->pmap_local)
		free(w->pmap);
	if (w->stale != w->stale_local)
		free(w->stale);
}

static int poll_work_init(struct poll_work *w, nfds_t n)
{
	bool small = n <= 64;
	memset(w->stale_local, 0, sizeof(w->stale_local));
	w->k = small ? w->k_local : malloc(2 * n * sizeof(*w->k));
	w->pmap = small ? w->pmap_local : malloc(n * sizeof(*w->pmap));
	w->stale = small ? w->stale_local : calloc(n, sizeof(bool));
	if (w->k && w->pmap && w->stale)
		return 0;
	if (w->k == NULL)
		w->k = w->k_local;
	if (w->pmap == NULL)
		w->pmap = w->pmap_local;
	if (w->stale == NULL)
		w->stale = w->stale_local;
	poll_work_free(w);
	return -ENOMEM;
}

/* Before a round: each accelerated fd's readiness into fds (counted), and
 * what to ask the kernel into w. */
static int poll_gather(struct pollfd *fds, nfds_t n, struct poll_work *w)
{
	int ready = 0;
	w->slice = w->pend = false;
	w->kn = n;
	for (nfds_t i = 0; i < n; i++) {
		struct sc_sock *s = fds[i].fd >= 0 ? sock_get(fds[i].fd) : NULL;
		int wfd;
		short r = s ? sock_revents(fds[i].fd, s, fds[i].events, &wfd, true) : -1;
		if (r >= 0 && on_shared_chan(s))
			w->slice = true;
		w->k[i] = fds[i];
		fds[i].revents = 0;
		if (r < 0)
			continue;       /* the kernel decides */
		fds[i].revents = r;
		if (r)
			ready++;
		w->k[i].fd = w->stale[i] && on_shared_chan(s) ? -1 : wfd;
		w->k[i].events = POLLIN;
		if (sock_mode(s) == M_PENDING) {
			/* its kernel socket: data or an end (a plain peer),
			 * and the connect's completion */
			short kev = POLLIN | POLLRDHUP;
			if ((fds[i].events & POLLOUT) && !s->tcp_up)
				kev |= POLLOUT;
			w->pmap[w->kn - n] = (int)i;
			w->k[w->kn++] = (struct pollfd){ .fd = fds[i].fd, .events = kev };
			w->pend = true;
		}
	}
	return ready;
}

/* After the kernel's poll: what it reported into fds (counted, added to
 * ready).  *again: an fd switched back to TCP meanwhile, which the kernel
 * answers on the next round. */
static int poll_scatter(struct pollfd *fds, nfds_t n, struct poll_work *w, int ready, bool *again)
{
	struct pollfd *k = w->k;
	for (nfds_t x = n; x < w->kn; x++)
		if (k[x].revents)       /* look at the pending client again */
			k[w->pmap[x - n]].revents |= POLLIN;
	*again = false;
	for (nfds_t i = 0; i < n; i++) {
		struct sc_sock *s = fds[i].fd >= 0 ? sock_get(fds[i].fd) : NULL;
		bool off = s && route_off_kernel(sock_where(s));
		int wfd;
		if (s && k[i].fd != fds[i].fd && !off) {
			*again |= k[i].revents != 0;
		} else if (off) {
			if (!k[i].revents || fds[i].revents)
				continue;
			short r = sock_revents(fds[i].fd, s, fds[i].events, &wfd, true);
			if (r > 0) {
				fds[i].revents = r;
				ready++;
			} else if (on_shared_chan(s)) {
				w->stale[i] = true;
			}
		} else if (k[i].revents) {
			fds[i].revents = k[i].revents;
			ready++;
		}
	}
	return ready;
}

static int kernel_poll(struct pollfd *k, nfds_t n, int t, const sigset_t *mask)
{
	if (!mask)
		return R(poll)(k, n, t);
	struct timespec ts = { t / 1000, (t % 1000) * 1000000L };
	return R(ppoll)(k, n, t < 0 ? NULL : &ts, mask);
}

/* poll and ppoll: the kernel's alone unless an fd is accelerated; else in
 * rounds of our readiness, then the kernel's poll of what tells of a
 * change (in slices while a shared channel or a pending client may
 * change unannounced). */
static int do_poll(struct pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask)
{
	bool any = false;
	for (nfds_t i = 0; i < n; i++)
		if (ep_of(fds[i].fd))
			ep_expose_fd(fds[i].fd);        /* a polled epoll set */
	for (nfds_t i = 0; i < n && !any; i++) {
		struct sc_sock *s = fds[i].fd >= 0 ? sock_get(fds[i].fd) : NULL;
		any = s && route_off_kernel(sock_where(s));
	}
	if (!any)
		return kernel_poll(fds, n, timeout_ms, mask);
	struct poll_work w;
	int rc = poll_work_init(&w, n);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	uint64_t end = timeout_ms < 0 ? UINT64_MAX : sc__now_ns() + (uint64_t)timeout_ms * 1000000u;
	int ready, pslice = 1;  /* (a pending client's: PENDING_SLICE_MS) */
	for (;;) {
		ready = poll_gather(fds, n, &w);
		uint64_t now = sc__now_ns();
		int t = ready ? 0 : end == UINT64_MAX ? -1 :
			now >= end ? 0 : (int)((end - now + 999999) / 1000000);
		if (w.slice && (t < 0 || t > SHARED_SLICE_MS))
			t = SHARED_SLICE_MS;
		if (w.pend && (t < 0 || t > pslice)) {
			t = pslice;
			pslice = pending_slice_next(pslice);
		}
		bool again;
		if (kernel_poll(w.k, w.kn, t, mask) < 0) {
			ready = -1;
			goto out;
		}
		ready = poll_scatter(fds, n, &w, ready, &again);
		if (ready || (t >= 0 && sc__now_ns() >= end && !again))
			break;
	}
out:;
	KEEP_ERRNO();
	poll_work_free(&w);
	return ready;
}

SC_API int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return do_poll(fds, n, timeout, NULL);
}

SC_API int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return R(__poll_chk)(fds, n, timeout, fdslen);
	return do_poll(fds, n, timeout, NULL);
}

SC_API int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int t = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	if (!mask)
		return do_poll(fds, n, t, NULL);
	return do_poll(fds, n, t, mask);
}

SC_API int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		       const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return R(__ppoll_chk)(fds, n, ts, mask, fdslen);
	return ppoll(fds, n, ts, mask);
}

static int do_select(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout_ms,
		     const sigset_t *mask)
{
	bool any = false;
	for (int fd = 0; fd < nfds; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w))) && ep_of(fd))
			ep_expose_fd(fd);               /* a selected epoll set */
	for (int fd = 0; fd < nfds && !any; fd++) {
		struct sc_sock *s = sock_get(fd);
		any = s && route_off_kernel(sock_where(s)) &&
		      ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e)));
	}
	if (!any)
		return -2;
	struct pollfd *p = calloc((size_t)nfds + 1, sizeof(*p));
	int *map = calloc((size_t)nfds + 1, sizeof(int));
	int np = 0;
	if (!p || !map) {
		free(p);
		free(map);
		errno = ENOMEM;
		return -1;
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (!ev)
			continue;
		p[np].fd = fd;
		p[np].events = ev;
		map[np++] = fd;
	}
	int rc = do_poll(p, (nfds_t)np, timeout_ms, mask);
	if (rc >= 0) {
		int count = 0;
		for (int i = 0; i < np; i++)
			if (p[i].revents & POLLNVAL) {
				free(p);
				free(map);
				errno = EBADF;
				return -1;
			}
		if (r) FD_ZERO(r);
		if (w) FD_ZERO(w);
		if (e) FD_ZERO(e);
		for (int i = 0; i < np; i++) {
			short re = p[i].revents;
			if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(map[i], r);
				count++;
			}
			if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
				FD_SET(map[i], w);
				count++;
			}
			if (e && (p[i].events & POLLPRI) && (re & POLLPRI)) {
				FD_SET(map[i], e);
				count++;
			}
		}
		rc = count;
	}
	free(p);
	free(map);
	return rc;
}

SC_API int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	int t = tv ? (int)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000) : -1;
	uint64_t start = tv ? sc__now_ns() : 0;
	int rc = do_select(nfds, r, w, e, t, NULL);
	if (rc == -2)
		return R(select)(nfds, r, w, e, tv);
	if (tv) {
		/* Linux reports the time left */
		uint64_t used = (sc__now_ns() - start) / 1000;
		uint64_t had = (uint64_t)tv->tv_sec * 1000000 + (uint64_t)tv->tv_usec;
		uint64_t left = used >= had ? 0 : had - used;
		tv->tv_sec = (time_t)(left / 1000000);
		tv->tv_usec = (suseconds_t)(left % 1000000);
	}
	return rc;
}

SC_API int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		   const sigset_t *mask)
{
	int t = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	int rc = do_select(nfds, r, w, e, t, mask);
	if (rc == -2)
		return R(pselect)(nfds, r, w, e, ts, mask);
	return rc;
}
