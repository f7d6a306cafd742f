/* SPDX-License-Identifier: MIT */
/*
 * The connecting side of a set-up: socket, and connect (a local listener's
 * board looked at; the client's offer posted, its SYN marked).  The
 * accepting side is handshake.c.  docs/interposer.md §3.
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
#include "spin.h"
#include "stats.h"
#include "txrx.h"
#include "interposer.h"
#include <linux/netlink.h>

/* ---- classification ------------------------------------------------------ */

/* A TCP socket to the program: plain TCP, or Multipath TCP (Go 1.24 and
 * later listen with it by default; `mptcpize run`), which between two
 * programs of one host is a TCP connection like any other. */
static bool is_tcp_type(int type, int protocol)
{
	return (type & 0xf) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP || protocol == IPPROTO_MPTCP);
}

/* ---- socket / connect ---------------------------------------------------- */

SC_API int socket(int domain, int type, int protocol)
{
	int fd = R(socket)(domain, type, protocol);
	if (fd >= 0 && (domain == AF_INET || domain == AF_INET6) && is_tcp_type(type, protocol))
		sock_new(fd, M_TCP, type & SOCK_NONBLOCK);
	else if (fd >= 0 && domain == AF_NETLINK && protocol == NETLINK_GENERIC)
		nl_track(fd);   /* the netdev family's bind-rx / bind-tx (netlink.c) */
	return fd;
}

/* Offer tags: unique per process and unpredictable enough (a random
 * per-process key through splitmix64); 56 bits, never 0. */
static uint64_t next_tag(void)
{
	static _Atomic uint64_t key, ctr;
	uint64_t k = atomic_load_explicit(&key, memory_order_relaxed);
	if (!k) {
		if (getentropy(&k, sizeof(k)) < 0 || !k)
			k = (uint64_t)sc__now_ns() ^ (uint64_t)sc__pid() << 40 ^ 0x9e3779b97f4a7c15ull;
		uint64_t zero = 0;
		/* relaxed: the key alone (read relaxed above) */
		if (!atomic_compare_exchange_strong_explicit(&key, &zero, k,
				memory_order_relaxed, memory_order_relaxed))
			k = zero;
	}
	for (;;) {
		/* relaxed: a unique number */
		uint64_t z = k + atomic_fetch_add_explicit(&ctr, 1,
				memory_order_relaxed) * 0x9e3779b97f4a7c15ull;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z = (z ^ (z >> 31)) & SC_TAG_MASK;
		if (z)
			return z;
	}
}

/* An accelerated connection costs a few fds besides its socket (its
 * pollable channel, an eventfd, a wake socket; the peer holds one of ours):
 * a process near its RLIMIT_NOFILE stays on TCP rather than run out of fds
 * in the middle of a wait.  fds are allocated lowest first, so the socket's
 * number tells how many of the program's are open, and the last of ours
 * (kept high: sc__fd_park) how many of ours.  The limit is read each time:
 * a program may lower it mid-run (its connections up to its new limit are
 * then judged by that limit, not the one it started with); where ours go
 * follows it. */
bool fd_headroom(int fd)
{
	struct rlimit rl;
	KEEP_ERRNO();
	long l = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ?
		 (long)rl.rlim_cur : 1L << 20;
	sc__fd_limit(l);
	return sc__fd_in_use(fd) + 64 < l - l / 4;
}

/* The accepting process sends the segment of a new link group, which we
 * must map: one we cannot map (RLIMIT_AS) after our offer was claimed
 * leaves the connection without its OPEN (it would wait for ever, then
 * lose the connection).  A process whose RLIMIT_AS leaves less
 * room than a full group's segment (as our own settings make it) stays on
 * TCP, and the offer of one that has the room says how large a segment
 * it budgeted (*room; 0: no limit): the acceptor makes a new group no
 * larger (group.c), or declines. */
static bool as_room(uint64_t *room)
{
	struct rlimit rl;
	KEEP_ERRNO();
	bool ok = true;

	*room = 0;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		uint32_t ring[2] = { sc__cfg.rmem, sc__cfg.wmem };
		uint64_t slots_off, data_off, size, vm = 0;
		char buf[64];
		sc__seg_geometry(sc__cfg.max_conns, ring, &slots_off, &data_off, &size);
		int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = R(read)(fd, buf, sizeof(buf) - 1);
			R(close)(fd);
			if (n > 0) {
				buf[n] = 0;
				vm = strtoull(buf, NULL, 10) * (uint64_t)getpagesize();
			}
		}
		ok = vm && vm + size < (uint64_t)rl.rlim_cur;
		if (ok)
			*room = size;
	}
	return ok;
}

/* Tag our SYN (the offer names the tag, and the acceptor claims it only
 * for a connection whose SYN carries it): a random TTL, or IPv6 hop
 * limit, from SC_SYN_TTL_MIN; s->syn_ttl 0 if it could not be set. */
static void syn_tag(int fd, struct sc_sock *s, int family, const struct sc_addr16 *dst)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	int ttl = SC_SYN_TTL_MIN + (int)(next_tag() % (256 - SC_SYN_TTL_MIN));
	bool over_v4 = !memcmp(dst->b, v4, 12);
	int rc = family == AF_INET6 && !over_v4 ?
		 R(setsockopt)(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof(ttl)) :
		 R(setsockopt)(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
	s->syn_ttl = rc == 0 ? (uint8_t)ttl : 0;
}

/* The board of port dport if a live listener there serves dst (held:
 * sc__board_put), else NULL.  Our mapping may be of a board a collection
 * removed (its listener died) since a new one was made: looked at again. */
static struct sc_board *board_serving(uint16_t dport, const struct sc_addr16 *dst)
{
	struct sc_board *b = sc__board(dport, false);
	if (!b || sc__board_serves(b, dst))
		return b;
	sc__board_put(dport);
	b = sc__board_recheck(dport) && sc__board_forget(dport, b) ? sc__board(dport, false) : NULL;
	if (b && !sc__board_serves(b, dst)) {
		sc__board_put(dport);
		b = NULL;
	}
	return b;
}

/* Our SYN's mark: the TOS (IPv4, and IPv4 over IPv6) and the traffic
 * class (IPv6).  0, or -1 if neither can be set. */
static int syn_mark(int fd, int family)
{
	int tos = SC_SYN_TOS;
	if (R(setsockopt)(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) < 0 &&
	    (family != AF_INET6 || R(setsockopt)(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos)) < 0))
		return -1;
	if (family == AF_INET6)
		R(setsockopt)(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
	return 0;
}

/* Before the real connect: is there an accelerated listener for addr, and
 * can we take part?  Marks the SYN and prepares the pending state. */
static int offer_prepare(int fd, struct sc_sock *s, const struct sockaddr *addr,
			 struct sc_addr16 *dst, uint16_t *port, uint64_t *room,
			 enum sc_fallback *why)
{
	uint16_t dport;

	if (!sc__addr16(addr, dst, &dport) || !dport) {
		*why = SC_FB_NO_LISTENER;
		return -1;
	}
	if (sc__addr_is_any(dst)) {       /* connect(0.0.0.0) means this host */
		static const struct sc_addr16 lo4 = { { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
		static const struct sc_addr16 lo6 = { { [15] = 1 } };
		*dst = addr->sa_family == AF_INET ? lo4 : lo6;
	}
	struct sc_board *b = board_serving(dport, dst);
	if (!b) {
		*why = SC_FB_NO_LISTENER;
		return -1;
	}
	if (off_file()) {       /* (looked at only where a listener is) */
		sc__board_put(dport);
		*why = SC_FB_DISABLED;
		return -1;
	}
	sock_board(s, b, dport);
	linger_reap();          /* ports our closes held until their FIN */
	if (short_skip(dport)) {
		*why = SC_FB_SHORT;
		return -1;
	}
	if (!tw_room(dst)) {    /* ports in TIME_WAIT that would run out */
		*why = SC_FB_LIMITS;
		return -1;
	}
	s->tw_free = tw_reusable(dst);
	/* data in the SYN, or a repaired socket (a DSCP of the program's own
	 * is put back once the SYN is out: only the SYN carries our mark, and
	 * it never leaves the host) */
	if (s->fastopen) {
		*why = SC_FB_UNSUPPORTED;
		return -1;
	}
	if (!fd_headroom(fd)) {
		*why = SC_FB_LIMITS;
		return -1;
	}
	if (!as_room(room)) {
		*why = SC_FB_NOMEM;
		return -1;
	}
	if (rdv_ensure() < 0) {
		*why = SC_FB_RENDEZVOUS;
		return -1;
	}
	s->pbuf = malloc(PBUF_CAP);
	if (s->efd < 0) {
		int e = pending_efd();
		s->efd = e < 0 ? -1 : e;
		s->efd_set = false;
	}
	if (!s->pbuf || s->efd < 0) {
		free(s->pbuf);
		s->pbuf = NULL;
		*why = SC_FB_NOMEM;
		return -1;
	}
	if (syn_mark(fd, addr->sa_family) < 0) {
		free(s->pbuf);
		s->pbuf = NULL;
		*why = SC_FB_UNSUPPORTED;
		return -1;
	}
	syn_tag(fd, s, addr->sa_family, dst);
	s->dst = *dst;
	*port = dport;
	/* until the offer is posted, the acceptor may wait for it */
	s->cslot = sc__board_connecting(b);
	return 0;
}

/* The SYN is out: the program's own IP_TOS / IPV6_TCLASS (or none) back,
 * and our connecting slot freed. */
static void offer_unmark(int fd, struct sc_sock *s, int family)
{
	int tos = s->tos >= 0 ? s->tos : 0, tclass = s->tclass >= 0 ? s->tclass : 0;
	R(setsockopt)(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	if (family == AF_INET6)
		R(setsockopt)(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof(tclass));
	if (s->syn_ttl) {
		/* (the one syn_tag set: -1 is the default, the program's or not) */
		static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
		if (family == AF_INET6 && memcmp(s->dst.b, v4, 12))
			R(setsockopt)(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &s->hops, sizeof(s->hops));
		else
			R(setsockopt)(fd, IPPROTO_IP, IP_TTL, &s->ttl, sizeof(s->ttl));
	}
	if (s->cslot >= 0 && s->board)
		sc__board_connected(s->board, s->cslot);
	s->cslot = -1;
}

/* After the real connect (made, or in progress): unmark, and post the
 * offer under the port the kernel gave us. */
static int offer_post(int fd, struct sc_sock *s, int family, const struct sc_addr16 *dst,
		      uint16_t dport, uint64_t room, enum sc_fallback *why)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	struct sc_addr16 mine;
	uint16_t cport;

	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    !sc__addr16((struct sockaddr *)&me, &mine, &cport) || !cport) {
		offer_unmark(fd, s, family);
		*why = SC_FB_LIMITS;
		return -1;
	}
	/* the record gets the addresses we have (rec_fill then asks nothing) */
	if (s->rec || (s->rec = sc__rec_get())) {
		s->rec->laddr = mine;
		s->rec->lport = cport;
		s->rec->paddr = *dst;
		s->rec->pport = dport;
	}
	s->tag = next_tag();
	pthread_mutex_lock(&interp.rdv_lock);
	s->pnext = interp.pending;
	interp.pending = s;
	/* relaxed: read relaxed (pending.c: a hint); changed under rdv_lock */
	atomic_fetch_add_explicit(&interp.npending, 1, memory_order_relaxed);
	pthread_mutex_unlock(&interp.rdv_lock);
	s->offer = sc__offer_post(s->board, cport, &mine, dst, s->syn_ttl, s->tag, room);
	offer_unmark(fd, s, family);
	if (s->offer < 0) {
		pending_unlink(s);
		/* declined: the accepting side saw no mark (a retransmitted
		 * SYN) or gave up waiting; busy: another namespace's offer;
		 * no space: the run directory is full; no identity: nobody
		 * could reach us */
		*why = s->offer == -ECONNREFUSED ? SC_FB_PEER_PLAIN :
		       s->offer == -ENOSPC ? SC_FB_NOMEM :
		       s->offer == -ESRCH ? SC_FB_RENDEZVOUS : SC_FB_LIMITS;
		s->offer = -1;
		return -1;
	}
	s->deadline_ns = sc__now_ns() + (uint64_t)interp.claim_ms * 1000000u;
	/* a listener there that defers its accepts gets our first byte on
	 * TCP (pending_lead) */
	s->lead = sc__board_defers(s->board, dst) ? LEAD_WANT : LEAD_NO;
	sock_set_mode(s, M_PENDING);
	rec_fill(s, fd, SC_REC_PENDING, -1, 0);
	LOG(3, "offer %d posted", s->offer);
	return 0;
}

SC_API int connect(int fd, const struct sockaddr *addr, socklen_t alen)
{
	struct sc_sock *s = sock_get(fd);
	enum sc_fallback why = SC_FB_NO_LISTENER;
	struct sc_addr16 dst;
	uint16_t dport = 0;
	uint64_t room = 0;
	bool marked = false;

	if (!s || !sock_fresh(s) || !addr || alen < sizeof(sa_family_t)) {
		LOG(3, "connect(%d) passes: %s", fd, !s ? "untracked" : "not fresh");
		return R(connect)(fd, addr, alen);
	}
	pthread_mutex_lock(&s->lock);
	if (interp.disabled)
		why = SC_FB_DISABLED;
	else if (interp.uring)
		why = SC_FB_UNSUPPORTED;
	else
		marked = offer_prepare(fd, s, addr, &dst, &dport, &room, &why) == 0;
	int rc = R(connect)(fd, addr, alen);
	int err = errno;
	bool made = rc == 0 || err == EINPROGRESS;
	bool offered = false;
	if (marked) {
		if (made)
			offered = offer_post(fd, s, addr->sa_family, &dst, dport, room, &why) == 0;
		else
			offer_unmark(fd, s, addr->sa_family);
		if (!offered) {
			free(s->pbuf);
			s->pbuf = NULL;
		}
	}
	if (made && !offered) {
		/* the record's peer is where it connected (no getpeername) */
		struct sc_addr16 pa;
		uint16_t pp;
		if (sc__addr16(addr, &pa, &pp) && pp && !sc__addr_is_any(&pa) &&
		    (s->rec || (!sc__stats_owed() && (s->rec = sc__rec_get())))) {
			s->rec->paddr = pa;
			s->rec->pport = pp;
		}
		fallback_stat(s, fd, why);
	}
	pthread_mutex_unlock(&s->lock);
	/* registered in epoll sets before: pending now, or TCP for good */
	ep_kregs_follow(s);
	errno = err;
	return rc;
}
