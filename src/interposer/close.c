/* SPDX-License-Identifier: MIT */
/*
 * Ending and copying fds: shutdown, close, close_range, closefrom, dup*.
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
/* ---- shutdown / close / dup --------------------------------------------- */

/* 0, or -1 with ENOTCONN when the kernel socket is closed (a reset came):
 * shutdown's answer then. */
static int kernel_sock_closed(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	if (R(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 && ti.tcpi_state == TCP_CLOSE) {
		errno = ENOTCONN;
		return -1;
	}
	return 0;
}

/* The peer shut down writing or closed (its FIN, on TCP). */
static bool peer_done_writing(struct sc_conn *c)
{
	return atomic_load_explicit(&c->peer->flags, memory_order_acquire) &
	       (SC_SF_WR_DONE | SC_SF_CLOSED | SC_SF_ABORT);
}

SC_API int shutdown(int fd, int how)
{
	struct sc_sock *s = sock_get(fd);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return R(shutdown)(fd, how);    /* the kernel's EINVAL (or EBADF...) */
	enum sc_route rt = s ? sock_route(fd, s) : RT_TCP;
	if (rt == RT_PENDING) {
		pthread_mutex_lock(&s->lock);
		if (sock_mode(s) == M_PENDING && how != SHUT_RD) {
			/* our FIN would push what we hold, and a listener
			 * that defers its accepts takes the connection then:
			 * a lead byte held back goes; with nothing sent, the
			 * FIN itself must go (nothing else gets us claimed) */
			pending_push(fd, s);
			if (s->lead == LEAD_WANT)
				s->deadline_ns = 0;     /* withdraw, unless claimed */
		}
		pending_settle(fd, s, true, -1);
		pthread_mutex_unlock(&s->lock);
		rt = sock_where(s);
	}
	if (rt == RT_INHERITED) {
		sw_request_owner(fd, s);        /* the FIN goes on TCP */
		rt = sock_where(s);
	}
	if (rt == RT_SHM && switching(s->c)) {
		sock_switch(fd, s);             /* the re-send goes before our FIN */
		rt = sock_where(s);
	}
	if (rt == RT_SHM) {
		/* (under the lock: a switch to TCP re-sends before our FIN) */
		pthread_mutex_lock(&s->lock);
		if (sock_mode(s) == M_SHM) {
			/* Our FIN waits on the kernel socket until the
			 * connection goes back to TCP (or the socket closes):
			 * what the peer has not read yet is re-sent ahead of
			 * it then.  The answer is the kernel's: ENOTCONN on a
			 * closed socket, and once both sides are done (the
			 * FINs would have been exchanged). */
			int krc = how == SHUT_WR ? kernel_sock_closed(fd) : R(shutdown)(fd, SHUT_RD);
			if (krc == 0 && s->shut_wr && peer_done_writing(s->c)) {
				errno = ENOTCONN;
				krc = -1;
			}
			int rc = krc < 0 ? 0 : sc_shutdown(s->c, how);
			if (krc == 0 && rc == 0 && how != SHUT_RD)
				s->shut_wr = true;
			pthread_mutex_unlock(&s->lock);
			if (rc < 0) {
				errno = -rc;
				return -1;
			}
			return krc;
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (how != SHUT_RD)
		tcp_gate(s);            /* the re-send before our FIN */
	return R(shutdown)(fd, how);
}


_Atomic uint32_t fd_rebinds;
_Atomic bool fd_rebinds_on;

/* Counted once a cache by fd number exists (a program that never splices
 * pays one load per close).  seq_cst: the load against the cache's store
 * of fd_rebinds_on before it reads fd_rebinds (a close that saw it off
 * came before that, and the cache's look at the fd after it); the count
 * relaxed: a close in another thread of an fd being spliced is a race
 * the program has with itself. */
static void rebound(void)
{
	if (atomic_load_explicit(&fd_rebinds_on, memory_order_seq_cst))
		atomic_fetch_add_explicit(&fd_rebinds, 1, memory_order_relaxed);
}

SC_API int close(int fd)
{
	rebound();
	if (sock_get(fd))
		fd_drop(fd, true);
	ep_close(fd);
	if (atomic_load_explicit(&nl_count, memory_order_relaxed))
		nl_close(fd);   /* its devmem bindings go with it */
	return R(close)(fd);
}

/* close_range / closefrom: what close() does for each accelerated fd and
 * epoll set in the range (the peer sees the close; the table forgets the
 * numbers), then the kernel's close of the range, less our own fds of the
 * switch (re-sends under way: hidden) and of the run directory's
 * processes (procs.c). */
static void forget_range(unsigned first, unsigned last)
{
	for (unsigned p = first >> PAGE_BITS; p < NPAGES && (p << PAGE_BITS) <= last; p++) {
		/* acquire: pairs with the release in sock_set (fdtable.c) */
		struct sc_sock *_Atomic *pg = atomic_load_explicit(&pages[p],
				memory_order_acquire);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			unsigned fd = (p << PAGE_BITS) | i;
			if (fd >= first && fd <= last && atomic_load_explicit(&pg[i],
					memory_order_acquire))
				fd_drop((int)fd, true);
		}
	}
	ep_close_range(first, last);
}

static int close_range_holes(unsigned first, unsigned last, int flags)
{
	int hs[64 + 64 + 1];
	int n = hidden_in(first, last, hs, 64);
	n += linger_in(first, last, hs + n, 64);       /* closes waiting (linger.c) */
	/* our description of the run directory's processes: closing it
	 * would drop our identity's lock (others would take us for dead),
	 * and in a child that goes on without it, every look at another
	 * process (a fork child's close_range: sem_fork_close_range took its
	 * live owner for dead) */
	int pf = sc__procs_fd();
	if (pf >= 0 && (unsigned)pf >= first && (unsigned)pf <= last)
		hs[n++] = pf;
	for (int i = 1; i < n; i++)             /* a few: insertion sort */
		for (int j = i; j > 0 && hs[j - 1] > hs[j]; j--) {
			int t = hs[j];
			hs[j] = hs[j - 1];
			hs[j - 1] = t;
		}
	int rc = 0;
	unsigned lo = first;
	for (int i = 0; i < n; i++) {
		if ((unsigned)hs[i] > lo && R(close_range)(lo, (unsigned)hs[i] - 1, flags) < 0)
			rc = -1;
		lo = (unsigned)hs[i] + 1;
	}
	if ((n == 0 || hs[n - 1] != (int)last) && lo <= last && R(close_range)(lo, last, flags) < 0)
		rc = -1;
	return rc;
}

SC_API int close_range(unsigned int first, unsigned int last, int flags)
{
	if (!R(close_range)) {
		errno = ENOSYS;
		return -1;
	}
	/* the kernel's alone: a bad call (its EINVAL), only marking the fds,
	 * a private copy of the fd table, or a vfork child's own fds */
	if (first > last || (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) ||
	    (flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) || in_vfork_child())
		return R(close_range)(first, last, flags);
	rebound();
	forget_range(first, last);
	return close_range_holes(first, last, flags);
}

SC_API void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	if (in_vfork_child()) {
		if (R(closefrom))
			R(closefrom)(lowfd);
		return;
	}
	rebound();
	forget_range((unsigned)lowfd, ~0u);
	if (!R(close_range) || close_range_holes((unsigned)lowfd, ~0u, 0) < 0) {
		if (R(closefrom))
			R(closefrom)(lowfd);
	}
}

SC_API int dup(int fd)
{
	int n = R(dup)(fd);
	if (n >= 0) {
		fd_alias(fd, n);
		ep_dup(fd, n);
	}
	return n;
}

SC_API int dup3(int fd, int nfd, int flags)
{
	if (fd == nfd)
		return R(dup3)(fd, nfd, flags);
	rebound();
	int n = R(dup3)(fd, nfd, flags);
	if (n >= 0) {
		fd_forget(nfd);
		ep_close(nfd);
		fd_alias(fd, nfd);
		ep_dup(fd, nfd);
	}
	return n;
}

SC_API int dup2(int fd, int nfd)
{
	if (fd != nfd)
		rebound();
	int n = R(dup2)(fd, nfd);
	if (n >= 0 && fd != nfd) {
		fd_forget(nfd);
		ep_close(nfd);
		fd_alias(fd, nfd);
		ep_dup(fd, nfd);
	}
	return n;
}
