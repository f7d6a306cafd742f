/* SPDX-License-Identifier: MIT */
/*
 * A client whose offer is not answered yet (M_PENDING): its private
 * buffer, the OPEN that makes it shared memory, or its way to TCP.
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
#include "forkreset.h"

/* ---- a pending client's eventfd -----------------------------------------
 *
 * A pending client waits for its OPEN on an eventfd.  A blocking client's
 * never leaves the library, and goes when the connection settles: made,
 * moved high (sc__fd_park) and closed, it cost four system calls a
 * connection.  A few such are kept, reset, for the next clients instead
 * (one per client thread of sockbench conn --clients 8); never one that
 * went out to a poller or an epoll set, which may still watch it. */
#define SPARE_EFDS 8
static _Atomic int spare_efd[SPARE_EFDS] = { [0 ... SPARE_EFDS - 1] = -1 };

int pending_efd(void)
{
	/* (a spare was reset before it was put here: the exchanges order
	 * that read before our use) */
	for (int i = 0; i < SPARE_EFDS; i++) {
		int e;
		if (atomic_load_explicit(&spare_efd[i], memory_order_relaxed) >= 0 &&
		    /* seq_cst (kept; acquire would do: the spare's reset,
		     * released by efd_retire) */
		    (e = atomic_exchange_explicit(&spare_efd[i], -1,
		    		memory_order_seq_cst)) >= 0)
			return e;
	}
	int e = sc__fd_park(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
	return e < 0 ? -errno : e;
}

/* efd: a settled client's, never exposed, ours alone (nothing writes it
 * once off the pending list); set: it was written */
static void efd_retire(int efd, bool set)
{
	uint64_t v;
	KEEP_ERRNO();
	if (!set || R(read)(efd, &v, sizeof(v)) == sizeof(v))
		for (int i = 0; i < SPARE_EFDS; i++) {
			int none = -1;
			/* seq_cst (kept; release would do): pairs with the
			 * exchange in pending_efd */
			if (atomic_compare_exchange_strong_explicit(&spare_efd[i], &none, efd,
					memory_order_seq_cst, memory_order_seq_cst))
				return;
		}
	R(close)(efd);
}

/* Fork child: the spares are the parent's eventfds too (its control thread
 * writes them once they serve a client of its own). */
void pending_atfork_child(void)
{
	for (int i = 0; i < SPARE_EFDS; i++) {
		/* (relaxed: the fork child's only thread) */
		int e = atomic_load_explicit(&spare_efd[i], memory_order_relaxed);
		if (e >= 0) {
			atomic_store_explicit(&spare_efd[i], -1, memory_order_relaxed);
			R(close)(e);
		}
	}
}

/* s->lock held: s is settled.  Its eventfd is signalled no more (the
 * control thread writes it under rdv_lock, for listed sockets only); one
 * that never went out of the library goes now (a connection's fd costs
 * then only its socket), kept for the next client. */
void pending_unlink(struct sc_sock *s)
{
	pthread_mutex_lock(&interp.rdv_lock);
	for (struct sc_sock **pp = &interp.pending; *pp; pp = &(*pp)->pnext)
		if (*pp == s) {
			*pp = s->pnext;
			/* relaxed: read relaxed (a hint); changed under rdv_lock */
			atomic_fetch_sub_explicit(&interp.npending, 1, memory_order_relaxed);
			break;
		}
	bool set = s->efd_set;
	pthread_mutex_unlock(&interp.rdv_lock);
	if (s->efd >= 0 && !s->efd_exposed) {
		efd_retire(s->efd, set);
		s->efd = -1;
	}
}

/* ---- rendezvous: OPENs for our offers ----------------------------------- */

static int pending_to_shm(struct sc_sock *s);

/* The pending client whose own thread is reading the rendezvous groups
 * (pump_for): an OPEN for it needs no eventfd signal, it looks at
 * `attached` next. */
static __thread struct sc_sock *pumping_for;

/* Read, for s, the groups whose sockets are socks[0..n) (poll said they
 * have news), or else (n == 0) only its claimer's (a process with
 * thousands of connections has dozens of groups: a read of each per look),
 * or all when the claimer is not known. */
static void pump_for_socks(struct sc_sock *s, const int *socks, int n)
{
	uint64_t who = n || s->offer < 0 ? 0 : sc__offer_claimer_hint(s->board, s->offer);
	pumping_for = s;
	if (n)
		sc__listener_pump_socks(interp.rdv, socks, n);
	else if (who)
		sc__listener_pump_peer(interp.rdv, who);
	else
		sc__listener_pump(interp.rdv);
	pumping_for = NULL;
}

static void pump_for(struct sc_sock *s)
{
	pump_for_socks(s, NULL, 0);
}

/* Control thread (or a pending client's, pump_for), group lock held: an
 * OPEN carrying a tag arrived. */
static int rdv_deliver(struct sc_listener *l, struct sc_conn *c)
{
	int rc = -ECONNREFUSED;

	pthread_mutex_lock(&interp.rdv_lock);
	for (struct sc_sock *s = interp.pending; s; s = s->pnext) {
		if (s->tag != c->tag || !c->tag)
			continue;
		struct sc_conn *none = NULL;
		/* seq_cst: as sock_attached (interposer.h) */
		if (atomic_compare_exchange_strong_explicit(&s->attached, &none, c,
				memory_order_seq_cst, memory_order_seq_cst)) {
			if ((s != pumping_for || s->efd_exposed) && sc__efd_wake(s->efd) == 0)
				s->efd_set = true;
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&interp.rdv_lock);
	return rc;
}

/* Control thread, no lock held: an OPEN may have arrived for a client
 * that is not in a socket call (it wrote, then waits on something else):
 * move its buffered bytes now, or they would sit there. */
static void rdv_after(void)
{
	for (;;) {
		struct sc_sock *found = NULL;
		pthread_mutex_lock(&interp.rdv_lock);
		for (struct sc_sock *s = interp.pending; s; s = s->pnext)
			if (sock_attached(s) && pthread_mutex_trylock(&s->lock) == 0) {
				found = s;
				break;
			}
		pthread_mutex_unlock(&interp.rdv_lock);
		if (!found)
			return;
		/* the socket is ours to settle (a caller holding its lock
		 * would settle it itself) */
		if (sock_mode(found) == M_PENDING && sock_attached(found))
			pending_to_shm(found);
		pthread_mutex_unlock(&found->lock);
	}
}

int rdv_ensure(void)
{
	char path[128];
	int rc = 0;

	if (atomic_load_explicit((struct sc_listener *_Atomic *)&interp.rdv, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&interp.create_lock);
	if (!interp.rdv) {
		struct sc_listener *l;
		rc = sc__rendezvous_path(sc__self(), path, sizeof(path));
		if (!rc)
			rc = sc_listen(path, 4096, &l);
		/* the group's members connect to it too (connecting takes
		 * write permission on the name; the umask may have taken it) */
		if (!rc && sc__cfg.group_set)
			chmod(path, 0660);
		if (!rc) {
			l->deliver = rdv_deliver;
			sc__ctl_after_hook = rdv_after;
			atomic_store_explicit((struct sc_listener *_Atomic *)&interp.rdv, l,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&interp.create_lock);
	return rc;
}


/* Write all of buf to the kernel socket, waiting for room if needed;
 * counted in the process's bytes_tcp_sent unless in_rec (the record has
 * them, and goes to TCP with them: sc__rec_tcp_only). */
static int tcp_write_all(int fd, const char *buf, size_t len, bool in_rec)
{
	while (len) {
		ssize_t n = R(send)(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			R(poll)(&p, 1, 1000);
			continue;
		}
		if (n < 0)
			return -errno;
		if (!in_rec)
			SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* s->lock held: the offer lost; continue on TCP (after the lead byte,
 * if it went there). */
static int pending_to_tcp(int fd, struct sc_sock *s, enum sc_fallback why)
{
	int rc = 0;
	size_t from = s->lead_tcp ? 1 : 0;
	pending_unlink(s);
	/* with a record, pending_take counted these bytes there, and
	 * fallback_stat below makes it a TCP one (as it does with an fd) */
	bool in_rec = s->rec && fd >= 0;
	if (from && !in_rec)
		SC_STAT_ADD(bytes_tcp_sent, 1);
	if (s->plen > from)
		rc = tcp_write_all(fd, s->pbuf + from, s->plen - from, in_rec);
	free(s->pbuf);
	s->pbuf = NULL;
	s->plen = 0;
	fallback_stat(s, fd, why);
	sock_set_mode(s, M_TCP);
	return rc;
}

/* s->lock held: the OPEN arrived; continue on shared memory. */
static int pending_to_shm(struct sc_sock *s)
{
	/* seq_cst: as sock_attached (interposer.h) */
	struct sc_conn *c = atomic_exchange_explicit(&s->attached, NULL, memory_order_seq_cst);
	pending_unlink(s);
	s->offer = -1;          /* the claimer frees the entry */
	s->c = c;
	s->owner_id = sc__self();
	sc_set_nonblock(c, 0);          /* O_NONBLOCK is applied per call */
	/* the acceptor put our early bytes in the ring: the rest follow.  It
	 * took all we published (it sealed them as it claimed), or it is
	 * not one of us */
	uint32_t early = c->early;
	if (early != s->early || early > s->plen) {
		LOG(1, "the acceptor took %u early bytes, %u were offered", early, s->early);
		sc__conn_proto_error(c);
		early = 0;
	}
	if (early) {
		sc__counter_add(&c->bytes_sent, early);
		memmove(s->pbuf, s->pbuf + early, s->plen - early);
		s->plen -= early;
	}
	if (s->plen) {
		/* an empty ring of at least PBUF_CAP bytes: never waits */
		ssize_t n = sc_send(c, s->pbuf, s->plen, SC_NONBLOCK);
		if (n == -SC_ESWITCHED) {
			/* the peer is switching to TCP already: the bytes go
			 * there, after the switch (sock_switch_bounded) */
			n = 0;
		} else if (n != (ssize_t)s->plen) {
			LOG(1, "pending bytes did not fit (%zd)", n);
			n = (ssize_t)s->plen;
		}
		if (n > 0)
			memmove(s->pbuf, s->pbuf + n, s->plen - (size_t)n);
		s->plen -= (size_t)n;
	}
	if (!s->plen) {
		free(s->pbuf);
		s->pbuf = NULL;
	}
	s->counted = true;
	SC_STAT_ADD(conns_accelerated, 1);
	sc_set_bufs(c, s->sndbuf, s->rcvbuf);
	sc_set_cork(c, s->cork);
	sock_set_mode(s, M_SHM);
	if (s->rec) {
		struct sc_conn_info ci;
		sc_conn_info(c, &ci);
		s->rec->peer_pid = ci.peer_pid;
		s->rec->peer_ident = c->g ? c->g->peer_ident : 0;
		atomic_store_explicit(&s->rec->mode, SC_REC_SHM, memory_order_release);
	}
	/* seq_cst: pairs with the count in child_add (fork.c) */
	s->fork_gen = atomic_load_explicit(&nforks, memory_order_seq_cst);
	sw_start();
	LOG(1, "connection on shared memory (client)");
	return 0;
}

void pending_lead(int fd, struct sc_sock *s, bool held)
{
	if (s->lead != LEAD_WANT || !s->plen || s->offer < 0 || !s->board)
		return;
	/* decided here: the acceptor sealed our bytes already (it claimed
	 * once the listener's deferral ran out, or on a listener of the port
	 * that does not defer), or the byte is committed */
	s->lead = LEAD_NO;
	if (!sc__offer_lead(s->board, s->offer, s->tag))
		return;
	s->lead = LEAD_ON;
	/* the rest goes with the offer first, held back or not: the
	 * acceptor, woken by the byte, finds it all, and it uses none of it
	 * before it has that byte, which the kernel sends when it would have
	 * sent the bytes held back */
	s->early = 1;
	if (s->plen > 1)
		s->early += (uint32_t)sc__offer_early(s->board, s->offer, s->tag, 0,
						      s->pbuf + 1, s->plen - 1);
	/* a real byte of the program's, the stream's first: whoever reads
	 * the kernel socket (the claimer, or the program if this goes on
	 * TCP) takes it in order.  Held back as the program's send was (its
	 * MSG_MORE; its cork is the kernel socket's): the kernel sends it
	 * when the hold ends (pending_push) or after its 200 ms, as it would
	 * have sent the program's bytes.  The connect has completed (a send
	 * that does not wait came only then; one that does waits here, as
	 * the kernel's would for the connection) */
	KEEP_ERRNO();
	for (;;) {
		ssize_t n = R(send)(fd, s->pbuf, 1, MSG_NOSIGNAL | MSG_DONTWAIT |
				    (held && !s->cork ? MSG_MORE : 0));
		if (n == 1) {
			s->lead_tcp = true;
			s->lead_held = held;
			break;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			R(poll)(&p, 1, 1000);
			continue;
		}
		/* the connection failed: the byte stays ours (the claimer
		 * waits for it in vain and declines; the program's next call
		 * finds the error on TCP) */
		break;
	}
	LOG(3, "offer %d: first byte on TCP%s, %u bytes with the offer", s->offer,
	    held ? " (held back)" : "", s->early - 1);
}

void pending_push(int fd, struct sc_sock *s)
{
	if (!s->lead_held)
		return;
	s->lead_held = false;
	/* the kernel's push of what it holds (tcp_push_pending_frames), the
	 * cork as it was: the program's own, if it set one */
	int zero = 0, one = 1;
	KEEP_ERRNO();
	R(setsockopt)(fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof(zero));
	if (s->cork)
		R(setsockopt)(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof(one));
}

/* s->lock held, s pending: has the kernel's connect completed?  Until it
 * has, a pending socket is not writable, as on TCP: a client whose SYN a
 * full backlog dropped is not connected (poll must not say POLLOUT at once,
 * nor a non-blocking send take the bytes).  Once up it stays up: no
 * system call from then on. */
bool pending_tcp_up(int fd, struct sc_sock *s)
{
	if (!s->tcp_up) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		KEEP_ERRNO();
		s->tcp_up = R(poll)(&p, 1, 0) == 1 && (p.revents & POLLOUT);
	}
	return s->tcp_up;
}

/* Try to settle a pending client (s->lock held).  Returns 0 when the mode
 * is no longer M_PENDING, -EAGAIN if it must wait (and !block). */
/* The kernel socket ended (FIN or RST) while our offer is claimed: the
 * process that claimed it died before its OPEN was done with, or it sent
 * the OPEN and then closed (the OPEN is in our rendezvous, or it went
 * into a link group we could not map: a low RLIMIT_AS).  A last look
 * (bounded), then plain TCP, where the program reads the end. */
static int pending_claimer_died(int fd, struct sc_sock *s)
{
	uint64_t end = sc__now_ns() + 200000000u;
	while (!sock_attached(s) && sc__now_ns() < end) {
		if (interp.rdv)
			pump_for(s);
		struct pollfd p = { .fd = s->efd, .events = POLLIN };
		if (!sock_attached(s))
			R(poll)(&p, 1, 10);
	}
	/* off the pending list under the lock that deliveries take: an OPEN
	 * read from now on finds no socket, and is refused */
	pthread_mutex_lock(&interp.rdv_lock);
	bool attached = sock_attached(s);
	if (!attached)
		for (struct sc_sock **pp = &interp.pending; *pp; pp = &(*pp)->pnext)
			if (*pp == s) {
				*pp = s->pnext;
				/* relaxed: read relaxed (a hint); changed under rdv_lock */
				atomic_fetch_sub_explicit(&interp.npending, 1, memory_order_relaxed);
				break;
			}
	pthread_mutex_unlock(&interp.rdv_lock);
	if (attached)
		return pending_to_shm(s);
	s->offer = -1;
	LOG(1, "the connection ended before its OPEN reached us: TCP");
	return pending_to_tcp(fd, s, SC_FB_RENDEZVOUS);        /* unlinks: no OPEN later */
}

/* The wait for an OPEN: the acceptor marks the offer claimed, then sends
 * the OPEN within microseconds.  While both sides run, spinning for it
 * saves a sleep and a wake-up on a connection's critical path; the
 * process learns whether it pays (spin.c), and nothing spins on a crowded
 * machine.  While we spin, the acceptor names the slot in our offer's
 * word instead of sending the OPEN (a quiet OPEN, conn.h): no message, so
 * no wake-up of our control thread and no system call on either side. */
static struct sc_spin_class open_waits = SC_SPIN_SETUP_INIT;

/* Our quiet OPEN, named by word: taken up as the OPEN message's reader
 * would (rdv_deliver attaches it), and our entry freed. */
static void quiet_take(struct sc_sock *s, uint64_t word)
{
	uint64_t who = sc__offer_claimer(s->board, s->offer, s->tag);
	pumping_for = s;
	int rc = sc__group_open_quiet(who, word, s->tag);
	pumping_for = NULL;
	if (rc)
		LOG(1, "quiet OPEN of offer %d not taken up: %s", s->offer, strerror(-rc));
	sc__offer_opened(s->board, s->offer, s->tag);
}

static bool pending_spin(struct sc_sock *s, uint32_t ns)
{
	uint64_t t0 = sc__now_ns(), pumped = 0, none = 0, spin = sc__quiet_spin(s->tag);
	_Atomic uint64_t *q = s->offer >= 0 ? sc__offer_quiet(s->board, s->offer) : NULL;
	/* seq_cst: against the opener's exchange of SPIN for the slot */
	bool quiet = q && atomic_compare_exchange_strong_explicit(q, &none, spin,
			memory_order_seq_cst, memory_order_seq_cst);
	for (unsigned i = 1;; i++) {
		if (sock_attached(s))
			break;
		uint64_t w = quiet ? atomic_load_explicit(q, memory_order_seq_cst) : 0;
		if (sc__quiet_open(w)) {
			quiet = false;
			quiet_take(s, w);
			continue;
		}
		uint32_t st = sc__offer_state(s->board, s->offer, s->tag);
		if (st == SC_OFFER_DECLINED)
			break;
		if (st == SC_OFFER_CLAIMED && interp.rdv) {
			/* (a system call per look: the OPEN comes as a message
			 * only if our process has not joined the claimer's
			 * group yet, or we did not spin when it came) */
			uint64_t now = sc__now_ns();
			if (now - pumped > (quiet ? 20000u : 2000u)) {
				pump_for(s);
				pumped = now;
				if (sock_attached(s))
					break;
			}
		}
		sc__cpu_relax();
		if (!(i & 63) && sc__now_ns() - t0 > ns)
			break;
	}
	/* back to 0, unless the claimer named the slot meanwhile */
	if (quiet && !atomic_compare_exchange_strong_explicit(q, &spin, 0, memory_order_seq_cst,
							      memory_order_seq_cst) &&
	    sc__quiet_open(spin))
		quiet_take(s, spin);
	return sock_attached(s);
}

/* A pending client's wait (20 ms at most) for: the OPEN delivered
 * (eventfd), anything on TCP (*tcp_news; not watched once tcp_active: it
 * has told us all it can), or the OPEN itself on one of our rendezvous
 * groups (we then read it ourselves, sooner than the control thread's
 * wake-up and then ours; not while other threads of ours wait for theirs:
 * each OPEN would wake every one of them).  Returns poll's count. */
static int pending_poll(int fd, struct sc_sock *s, bool tcp_active, bool *tcp_news)
{
	struct pollfd p[2 + 16] = { { .fd = s->efd, .events = POLLIN },
				    { .fd = tcp_active ? -1 : fd, .events = POLLIN } };
	int np = 2;
	if (interp.rdv && atomic_load_explicit(&interp.npending, memory_order_relaxed) <= 1) {
		int gfds[16];
		int ng = sc__listener_group_fds(interp.rdv, gfds, 16);
		for (int i = 0; i < ng; i++)
			p[np++] = (struct pollfd){ .fd = gfds[i], .events = POLLIN };
	}
	int pr = R(poll)(p, (nfds_t)np, 20);
	/* a group with news: read it now, whatever our offer's state (an
	 * OPEN for another of our clients; a group whose peer exited, as a
	 * server's child per connection does, stays readable, a hang-up,
	 * until it is read and found dead; left to the control thread, it
	 * made the caller's loop spin meanwhile) */
	int news[16], nn = 0;
	for (int i = 2; pr > 0 && i < np; i++)
		if (p[i].revents)
			news[nn++] = p[i].fd;
	if (nn)
		pump_for_socks(s, news, nn);
	*tcp_news = p[1].revents != 0;
	return pr;
}

int pending_settle(int fd, struct sc_sock *s, bool block, int max_ms)
{
	bool spin = block;
	uint64_t start = sc__now_ns();
	/* look at the kernel socket and at the board: a caller that will not
	 * wait, and then whenever the poll below says the socket has news or
	 * nothing came for a while.  (Each look costs system calls, a
	 * blocking caller's first would find what its poll finds.) */
	bool look = !block;
	uint64_t looked = start;

	for (;;) {
		if (sock_mode(s) != M_PENDING)
			return 0;
		if (!sock_attached(s) && interp.rdv &&
		    sc__offer_state(s->board, s->offer, s->tag) == SC_OFFER_CLAIMED)
			pump_for(s);    /* the OPEN may be waiting */
		if (sock_attached(s))
			return pending_to_shm(s);
		uint32_t st = sc__offer_state(s->board, s->offer, s->tag);
		if (st == SC_OFFER_DECLINED) {
			sc__offer_withdraw(s->board, s->offer, s->tag);
			s->offer = -1;
			return pending_to_tcp(fd, s, SC_FB_RENDEZVOUS);
		}
		/* anything on TCP (data, FIN, RST, a failed connect) before the
		 * OPEN: the peer is plain, since an accelerated one sends the
		 * OPEN before it returns from accept */
		char b;
		ssize_t n = -1;
		bool tcp_active = false;
		if (look) {
			n = R(recv)(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
			tcp_active = n >= 0 || (errno != EAGAIN && errno != EINTR);
		}
		bool late = sc__now_ns() > s->deadline_ns;
		/* the listener gone meanwhile (killed, exec'd, withdrawn):
		 * nobody will claim the offer */
		bool gone = look && st == SC_OFFER_OFFERED && !sc__board_serves(s->board, &s->dst);
		if (tcp_active || late || gone) {
			if (sc__offer_withdraw(s->board, s->offer, s->tag)) {
				s->offer = -1;
				return pending_to_tcp(fd, s, tcp_active ? SC_FB_PEER_PLAIN :
							     gone ? SC_FB_NO_LISTENER :
							     interp.uring ? SC_FB_UNSUPPORTED :
							     SC_FB_CLAIM_TIMEOUT);
			}
			/* claimed: the OPEN is on its way, or declined */
			block = true;
		}
		uint64_t who;
		/* (by identity: the claimer may be in another PID namespace,
		 * where its pid means another process here) */
		if (tcp_active && n <= 0 && st == SC_OFFER_CLAIMED &&
		    ((who = sc__offer_claimer(s->board, s->offer, s->tag)) == 0 ||
		     !sc__proc_alive(who)))
			return pending_claimer_died(fd, s);
		if (!block)
			return -EAGAIN;
		if (max_ms >= 0 && sc__now_ns() - start > (uint64_t)max_ms * 1000000u)
			return -EAGAIN;
		if (spin && !tcp_active && st != SC_OFFER_DECLINED) {
			spin = false;
			uint32_t b = sc__spin_class_budget(&open_waits);
			if (b && !sc__spin_crowded()) {
				bool hit = pending_spin(s, b);
				sc__spin_class_done(&open_waits, b, hit);
				if (hit)
					continue;
			}
		}
		bool tcp_news;
		int pr = pending_poll(fd, s, tcp_active, &tcp_news);
		uint64_t now = sc__now_ns();
		look = pr <= 0 || tcp_news || now - looked > 20000000u;
		if (look)
			looked = now;
	}
}
