/* SPDX-License-Identifier: MIT */
/*
 * The accepting side of a set-up: listen (the board entry), accept and
 * the first use of an accepted socket (the claim).  The connecting side is
 * connect.c.  docs/interposer.md §3.
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

static uint64_t fd_ino(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ---- listen / accept ----------------------------------------------------- */

/* s (fd, lock held) registered as a listener on port's board, taken
 * afresh if the board it holds was removed by a collection since (its
 * listeners all dead: sc__board_collect); 0 or -errno. */
static int board_register(int fd, struct sc_sock *s, uint16_t port, const struct sc_addr16 *a)
{
	int rc = -ENOENT, defer = 0;
	socklen_t dl = sizeof(defer);
	/* set before listen(), or in the process that forked us: the
	 * kernel's word (after listen(), setsockopt tells the board) */
	if (R(getsockopt)(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, &dl) < 0)
		defer = 0;
	if (!s->board)
		sock_board(s, sc__board(port, true), port);
	for (int tries = 0; s->board && tries < 3; tries++) {
		rc = sc__board_listen(s->board, a, s->ino, defer > 0);
		if (rc != -ESTALE)
			break;
		struct sc_board *old = s->board;
		sock_board(s, NULL, 0);
		if (!sc__board_forget(port, old))
			break;          /* held by others of ours: stays on TCP */
		sock_board(s, sc__board(port, true), port);
	}
	return s->board ? rc : -ENOENT;
}

SC_API int listen(int fd, int backlog)
{
	struct sc_sock *s = sock_get(fd);
	int rc = R(listen)(fd, backlog);

	if (rc == 0 && s && !s->passive) {
		s->passive = true;      /* it will not connect */
		ep_kregs_follow(s);
	}
	if (rc < 0 || !s || interp.disabled || interp.uring || sock_mode(s) != M_TCP)
		return rc;
	KEEP_ERRNO();
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	struct sc_addr16 a;
	uint16_t port;
	int one = 1;
	/* keep each SYN's headers: an accelerated client marks its SYN */
	s->nosyn = R(setsockopt)(fd, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof(one)) < 0;
	if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
	    sc__addr16((struct sockaddr *)&me, &a, &port)) {
		pthread_mutex_lock(&s->lock);
		s->ino = fd_ino(fd);
		if (board_register(fd, s, port, &a) == 0) {
			sock_set_mode(s, M_LISTEN);
			LOG(2, "listening on port %u, accelerated", port);
		} else {
			LOG(1, "cannot register the listener on port %u", port);
		}
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

/* Both ends of a connection from the SYN the kernel saved for it (its IP
 * and TCP headers, as the socket sees them): no getsockname/getpeername.
 * false if the headers are not a plain IPv4 or IPv6 + TCP SYN. */
static bool syn_addrs(const uint8_t *syn, socklen_t len, struct sc_addr16 *local,
		      uint16_t *lport, struct sc_addr16 *remote, uint16_t *rport)
{
	socklen_t th;

	memset(local, 0, sizeof(*local));
	memset(remote, 0, sizeof(*remote));
	if ((syn[0] >> 4) == 4 && len >= 20) {
		th = (socklen_t)(syn[0] & 0x0f) * 4;
		if (th < 20 || syn[9] != IPPROTO_TCP)
			return false;
		local->b[10] = local->b[11] = remote->b[10] = remote->b[11] = 0xff;
		memcpy(remote->b + 12, syn + 12, 4);
		memcpy(local->b + 12, syn + 16, 4);
	} else if ((syn[0] >> 4) == 6 && len >= 40) {
		th = 40;
		if (syn[6] != IPPROTO_TCP)
			return false;   /* extension headers: ask the socket */
		memcpy(remote->b, syn + 8, 16);
		memcpy(local->b, syn + 24, 16);
	} else {
		return false;
	}
	if (len < th + 4)
		return false;
	*rport = (uint16_t)(syn[th] << 8 | syn[th + 1]);
	*lport = (uint16_t)(syn[th + 2] << 8 | syn[th + 3]);
	return *rport && *lport;
}

/* The client of the offer we claimed put its first byte on TCP: it is on
 * nfd, or on its way (the client sends it right after it committed it,
 * before it waits for anything).  Wait for it, 200 ms at most (a client
 * stopped in between, or scheduled out on a crowded machine), and peek it
 * into *b: 0, or -1 if it did not come (the connection ended first, or
 * the wait ran out). */
#define LEAD_WAIT_MS 200
static int lead_peek(int nfd, uint8_t *b)
{
	uint64_t end = sc__now_ns() + LEAD_WAIT_MS * 1000000ull;
	for (;;) {
		ssize_t n = R(recv)(nfd, b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 1)
			return 0;
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		uint64_t now = sc__now_ns();
		if (now >= end)
			return -1;
		/* (in slices: POLLIN waits for SO_RCVLOWAT's bytes, and the
		 * program may have set it on the listener) */
		struct pollfd p = { .fd = nfd, .events = POLLIN };
		uint64_t left = (end - now) / 1000000u + 1;
		R(poll)(&p, 1, left < 10 ? (int)left : 10);
	}
}

/* What an accepted connection's SYN (or, without it, its addresses) says. */
struct syn_info {
	struct sc_addr16 local, remote;
	uint16_t lport, cport;
	bool marked;            /* an accelerated client's (its TOS mark) */
	uint8_t ttl;            /* ... its tag: the TTL / hop limit it came with */
};

/* Classify an accepted connection by its SYN (TCP_SAVE_SYN): accelerated
 * or not, and both ends' addresses.  False if they cannot be had. */
static bool syn_read(int nfd, bool nosyn, struct syn_info *si)
{
	uint8_t syn[128];
	socklen_t sl = sizeof(syn);
	bool have_syn = R(getsockopt)(nfd, IPPROTO_TCP, TCP_SAVED_SYN, syn, &sl) == 0 && sl >= 2;
	/* accepted where the kernel keeps no SYN (nosyn: Multipath TCP), a
	 * connection cannot say whether its client is accelerated: its offer
	 * is looked for as a marked one's, while a client is connecting
	 * (offer_await) */
	si->marked = !have_syn && nosyn;
	si->ttl = 0;
	if (have_syn) {
		int tos = (syn[0] >> 4) == 4 ? syn[1] : (syn[0] >> 4) == 6 ?
			  ((syn[0] & 0x0f) << 4 | syn[1] >> 4) : 0;
		si->marked = (tos & 0xfc) == SC_SYN_TOS;
		/* the tag is compared only on a marked SYN: an unmarked one
		 * was sent again after connect() put the program's own back */
		if (si->marked)
			si->ttl = (syn[0] >> 4) == 4 && sl >= 20 ? syn[8] :
				  (syn[0] >> 4) == 6 && sl >= 40 ? syn[7] : 0;
	}
	if (have_syn && syn_addrs(syn, sl, &si->local, &si->lport, &si->remote, &si->cport))
		return true;
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	return getsockname(nfd, (struct sockaddr *)&me, &ml) == 0 &&
	       getpeername(nfd, (struct sockaddr *)&peer, &pl) == 0 &&
	       sc__addr16((struct sockaddr *)&me, &si->local, &si->lport) &&
	       sc__addr16((struct sockaddr *)&peer, &si->remote, &si->cport);
}

/* What the SYN said, kept in s (read once: the kernel hands it out once). */
static void syn_keep(struct sc_sock *s, const struct syn_info *si)
{
	s->local = si->local;
	s->remote = si->remote;
	s->syn.lport = si->lport;
	s->syn.cport = si->cport;
	s->syn.marked = si->marked;
	s->syn.ttl = si->ttl;
	s->syn.known = true;
}

/* s's classification: read once (the kernel hands its saved SYN out once),
 * kept in s for a later look (s->lock held). */
static bool syn_classify(int nfd, struct sc_sock *s, struct syn_info *si)
{
	if (s->syn.known) {
		*si = (struct syn_info){ .local = s->local, .remote = s->remote,
					 .lport = s->syn.lport, .cport = s->syn.cport,
					 .marked = s->syn.marked, .ttl = s->syn.ttl };
		return true;
	}
	if (!syn_read(nfd, s->nosyn, si))
		return false;
	syn_keep(s, si);
	return true;
}

/* The board of the accepted connection's port, its entry's page backed;
 * NULL with the fallback counted. */
static struct sc_board *claim_board(int nfd, struct sc_sock *s, const struct syn_info *si)
{
	/* the record gets the addresses we have (rec_fill then asks nothing;
	 * a fork child without a file makes one only for shared memory) */
	if (s->rec || (!sc__stats_owed() && (s->rec = sc__rec_get()))) {
		s->rec->laddr = si->local;
		s->rec->lport = si->lport;
		s->rec->paddr = si->remote;
		s->rec->pport = si->cport;
	}
	if (!s->board)
		sock_board(s, sc__board(si->lport, false), si->lport);
	if (!s->board) {
		fallback_stat(s, nfd, SC_FB_PEER_PLAIN);
		return NULL;
	}
	/* its entry's page cannot be had (a full run directory): no client
	 * could post an offer there either */
	if (sc__offer_backed(s->board, si->cport) < 0) {
		fallback_stat(s, nfd, SC_FB_NOMEM);
		return NULL;
	}
	return s->board;
}

/* The client's offer on b, claimed: its index, or -1 with the fallback
 * counted (a 4-tuple we declined remembered in s).  room: we have fds
 * for a connection. */
static int offer_await(int nfd, struct sc_sock *s, struct sc_board *b, const struct syn_info *si,
		       bool room, uint64_t *client, uint64_t *tag)
{
	struct sc_addr16 local = si->local, remote = si->remote;
	/* unmarked: a plain client, or an accelerated one's SYN sent again
	 * after its connect() returned -- whose offer is on the board by
	 * then (it posts before it unmarks): claimed, or nothing will come
	 * and there is nothing to decline (a short connection's set-up
	 * costs one look) */
	int idx = sc__offer_claim(b, si->cport, &local, &remote, si->ttl, client, tag);
	if (idx >= 0 || !si->marked) {
		if (idx < 0)
			fallback_stat(s, nfd, SC_FB_PEER_PLAIN);
		return idx;
	}
	/* marked: its offer follows its connect() by microseconds; wait for
	 * it while a client is between its connect() and its offer (bounded),
	 * else decline the 4-tuple so it learns.  A marked SYN with nobody
	 * connecting is not waited for: anyone can mark a SYN. */
	uint64_t until = sc__now_ns() + (room ? 200000000u : 0);
	for (unsigned spin = 0;; spin++) {
		idx = sc__offer_claim(b, si->cport, &local, &remote, si->ttl, client, tag);
		if (idx >= 0)
			return idx;
		if (sc__offer_withdrawn(b, si->cport, &local, &remote)) {
			/* it connected and closed before we looked (a port
			 * probe, wrk's test connection): nothing to set up,
			 * and no reason to wait */
			fallback_stat(s, nfd, SC_FB_PEER_CLOSED);
			return -1;
		}
		bool waited_out = sc__now_ns() >= until;
		if (waited_out || !sc__board_anyone_connecting(b)) {
			int didx;
			if (sc__offer_decline_tuple(b, si->cport, &local, &remote, &didx) == -EAGAIN)
				continue;       /* it came: claim it */
			s->declined = didx;
			s->local = local;
			s->remote = remote;
			fallback_stat(s, nfd, !room ? SC_FB_LIMITS :
					      waited_out ? SC_FB_CLAIM_TIMEOUT : SC_FB_PEER_PLAIN);
			return -1;
		}
		if (spin < 64) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* A client of ours, its offer claimed, is about to spin for its OPEN: it
 * sent its request (or has none) and its first receive has begun.  Wait
 * for that moment, briefly: the OPEN then goes quietly (no message, no
 * wake-up of its control thread, conn.h) and the request rides in the
 * early bytes, in the ring at our first read.  The process learns whether
 * waiting pays (spin.c: a client that waits in its event loop, or a
 * crowded machine, never spins); nothing waits on a crowded machine, nor
 * where the OPEN cannot go quietly (no group with the client's process
 * that it joined: a server's child per connection makes a new one). */
static struct sc_spin_class spinner_waits = SC_SPIN_SETUP_INIT;

static void spinner_await(struct sc_board *b, int idx, uint64_t tag, const char *path)
{
	_Atomic uint64_t *q = sc__offer_quiet(b, idx);
	uint64_t want = sc__quiet_spin(tag);
	if (atomic_load_explicit(q, memory_order_relaxed) == want)
		return;
	uint32_t budget = sc__spin_class_budget(&spinner_waits);
	if (!budget || sc__spin_crowded() || !sc__group_joined(path))
		return;
	uint64_t t0 = sc__now_ns();
	bool hit = false;
	for (unsigned i = 1; !hit; i++) {
		/* (relaxed: connect_tagged's exchange decides) */
		hit = atomic_load_explicit(q, memory_order_relaxed) == want;
		sc__cpu_relax();
		if (!(i & 63) && sc__now_ns() - t0 > budget)
			break;
	}
	sc__spin_class_done(&spinner_waits, budget, hit);
}

/* Offer idx claimed: connect to the client's rendezvous with its early
 * bytes (after a lead byte on TCP, for a listener that defers its
 * accepts).  NULL: declined, the fallback counted; the client learns it
 * from the board and stays on TCP. */
static struct sc_conn *claim_connect(int nfd, struct sc_sock *s, struct sc_board *b, int idx,
				     uint64_t client, uint64_t tag)
{
	uint32_t elen;
	bool lead;
	char path[128];
	int rc = sc__rendezvous_path(client, path, sizeof(path));
	if (!rc)
		spinner_await(b, idx, tag, path);
	const uint8_t *early = sc__offer_early_take(b, idx, &elen, &lead);
	uint8_t first[SC_EARLY_MAX];
	LOG(3, "offer %d claimed, %u early bytes%s", idx, elen, lead ? " after a lead byte" : "");
	if (lead) {
		if (lead_peek(nfd, first) < 0) {
			/* not there: the client is stopped, or gone.  TCP,
			 * where the byte (if it comes) is the stream's first */
			sc__offer_decline(b, idx, tag);
			fallback_stat(s, nfd, SC_FB_CLAIM_TIMEOUT);
			return NULL;
		}
		memcpy(first + 1, early, elen);
		early = first;
		elen++;
	}
	struct sc_conn *c = NULL;
	bool quietly = false;
	if (!rc)        /* blocking: per call; the client's first bytes go in */
		rc = sc__connect_tagged(path, tag, client, early, elen, sc__offer_max_seg(b, idx),
					0, sc__offer_quiet(b, idx), &quietly, &c);
	if (rc) {
		/* (a lead byte, only peeked, stays the stream's first) */
		sc__offer_decline(b, idx, tag);
		fallback_stat(s, nfd, rc == -ENOMEM ? SC_FB_NOMEM : SC_FB_RENDEZVOUS);
		return NULL;
	}
	if (lead) {
		/* in our ring now: off the kernel socket (peeked: there,
		 * and nobody else reads it while we hold s->lock) */
		char b1;
		if (R(recv)(nfd, &b1, 1, MSG_DONTWAIT) != 1)
			LOG(1, "the lead byte of offer %d left the kernel socket", idx);
	}
	if (!quietly)   /* (a quiet OPEN's client frees it as it takes it up) */
		sc__offer_done(b, idx);
	return c;
}

/* An accepted connection's first use in this process (not accept() itself:
 * a server that forks per connection uses it in the child, which must be
 * the one to claim it): classify, find the board, wait for the offer,
 * connect.  s->lock held; the mode goes to M_SHM if claimed, else stays
 * M_SPENDING for the caller to make M_TCP. */
static void server_claim(int nfd, struct sc_sock *s)
{
	struct syn_info si;
	uint64_t client, tag;
	s->owner = sc__pid();
	if (!syn_classify(nfd, s, &si)) {
		fallback_stat(s, nfd, SC_FB_PEER_PLAIN);
		return;
	}
	struct sc_board *b = claim_board(nfd, s, &si);
	if (!b)
		return;
	/* an unmarked SYN's one look needs no room: asked if it claimed */
	bool room = !si.marked || fd_headroom(nfd);
	int idx = offer_await(nfd, s, b, &si, room, &client, &tag);
	if (idx < 0)
		return;
	if (!si.marked)
		room = fd_headroom(nfd);
	bool early_ok = sc__early_backed(b, si.cport) == 0;
	if (!room || !early_ok || off_file() || interp.uring) {
		/* the client learns it from the board and stays on TCP */
		sc__offer_decline(b, idx, tag);
		fallback_stat(s, nfd, !room ? SC_FB_LIMITS : !early_ok ? SC_FB_NOMEM :
				      interp.uring ? SC_FB_UNSUPPORTED : SC_FB_DISABLED);
		return;
	}
	struct sc_conn *c = claim_connect(nfd, s, b, idx, client, tag);
	if (!c)
		return;
	s->c = c;
	s->counted = true;
	sc_set_bufs(c, s->sndbuf, s->rcvbuf);
	sc_set_cork(c, s->cork);
	sock_set_mode(s, M_SHM);
	SC_STAT_ADD(conns_accelerated, 1);
	s->owner_id = sc__self();
	rec_fill(s, nfd, SC_REC_SHM, -1, c->g->peer_pid);
	if (s->rec)
		s->rec->peer_ident = client;
	/* seq_cst: pairs with the count in child_add (fork.c) */
	s->fork_gen = atomic_load_explicit(&nforks, memory_order_seq_cst);
	sw_start();
	LOG(1, "connection on shared memory (server, peer pid %d)", (int)c->g->peer_pid);
}

/* At accept(), in the accepting process, for a socket made (accepted_plain
 * said no: a marked SYN, or an unmarked one an offer names): a connection
 * whose SYN is not marked and that no offer names is a plain client's (or
 * a short connection's, sent without a mark) and stays on TCP, decided here.  Left
 * to its first use, a server forking per connection decided it in each
 * child, whose every look (the board's entry, the stats file, the pages
 * the library writes) is a page fault there.  A marked SYN (or an unmarked
 * one an offer names: sent again after its client posted) is claimed at
 * first use, by the process that uses it, as before. */
static void server_accepted(int nfd, struct sc_sock *s)
{
	struct syn_info si;
	if (s->nosyn)
		return;
	pthread_mutex_lock(&s->lock);
	if (sock_mode(s) == M_SPENDING && syn_classify(nfd, s, &si) && !si.marked) {
		struct sc_board *b = claim_board(nfd, s, &si);
		/* (an unmarked SYN's offer is on the board by now, or never
		 * will be: its client posts before it unmarks) */
		if (!b) {
			sock_set_mode(s, M_TCP);        /* (counted) */
		} else if (!sc__offer_named(b, si.cport, &si.local, &si.remote)) {
			fallback_stat(s, nfd, SC_FB_PEER_PLAIN);
			sock_set_mode(s, M_TCP);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

void server_settle(int fd, struct sc_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (sock_mode(s) == M_SPENDING) {
		server_claim(fd, s);
		/* TCP only once decided: a thread that meets M_SPENDING
		 * meanwhile waits here for the outcome (an M_TCP published
		 * during the claim sent another thread's bytes to the
		 * kernel socket, which the peer on shared memory never reads) */
		if (sock_mode(s) == M_SPENDING)
			sock_set_mode(s, M_TCP);
	}
	pthread_mutex_unlock(&s->lock);
}

enum sc_route sock_route(int fd, struct sc_sock *s)
{
	enum sc_route r = sock_where(s);
	if (r != RT_SETTLING)
		return r;
	server_settle(fd, s);
	return sock_where(s);
}

/* A listening socket we inherited across fork, that we now accept on: a
 * board entry of our own (the parent's may go with it, and clients must
 * find a live listener).  Done at the first accept, not at the fork: a
 * server's per-connection child only closes it. */
static void listener_adopt(int fd, struct sc_sock *ls)
{
	pthread_mutex_lock(&ls->lock);
	if (sock_mode(ls) == M_LISTEN && ls->board && !sock_ours(ls) &&
	    !interp.uring) {
		struct sockaddr_storage me;
		socklen_t ml = sizeof(me);
		struct sc_addr16 a;
		if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
		    sc__addr16((struct sockaddr *)&me, &a, NULL) &&
		    board_register(fd, ls, ls->bport, &a) == 0)
			ls->owner = sc__pid();
	}
	pthread_mutex_unlock(&ls->lock);
}

/* How often a spinning accept looks at the listener's queue. */
#define ACCEPT_LOOK_NS 2000u

static struct sc_spin_class accept_waits = SC_SPIN_SETUP_INIT;

/*
 * Before a blocking accept() on a listener of ours sleeps: a client that
 * closed its last connection opens the next within microseconds, and a
 * wait in the kernel costs the acceptor a wake-up (its CPU woken from
 * idle, which costs more here than a whole exchange on shared memory), as
 * a blocking receive's does.  So the accept spins first, for as long as
 * the process learns it pays (a set-up wait, spin.c), looking
 * at the queue every ACCEPT_LOOK_NS (a poll: the program's own accept then
 * takes the connection); not on a crowded machine.  A queue that holds a
 * connection already is no wait, and no verdict.
 */
static void accept_spin(int fd)
{
	uint32_t b = sc__spin_class_budget(&accept_waits);
	if (!b || sc__spin_crowded())
		return;
	KEEP_ERRNO();
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (R(poll)(&p, 1, 0) != 0)
		return;         /* one is there (or an error, the accept's to tell) */
	uint64_t t0 = sc__now_ns(), looked = t0;
	bool hit = false;
	for (;;) {
		sc__cpu_relax();
		uint64_t now = sc__now_ns();
		if (now - looked >= ACCEPT_LOOK_NS) {
			looked = now;
			if (R(poll)(&p, 1, 0) != 0) {
				hit = true;
				break;
			}
		}
		if (now - t0 >= b)
			break;
	}
	sc__spin_class_done(&accept_waits, b, hit);
}

/*
 * At accept(), before anything of ours is made for the connection: a SYN
 * not marked that no offer names is a plain client's (or a short
 * connection's, put on TCP by its client) and stays on TCP, decided from
 * the SYN and the board.  Nothing of ours is made for it: no socket
 * structure, no record, no table entry, so every later call on it is the
 * program's own, and a server forking per connection writes nothing of
 * ours between two forks (each such write a copy-on-write fault, at every
 * fork: docs/profile.md, seventeenth pass).  Counted by its reason, not
 * listed by `shortcut stat` (docs/interposer.md §7).  False: a socket is
 * made as before, with what the SYN said in *si if *known.
 */
static bool accepted_plain(int nfd, struct sc_sock *ls, struct syn_info *si, bool *known)
{
	*known = false;
	if (interp.disabled || interp.uring || ls->nosyn)
		return false;
	if (!syn_read(nfd, false, si))
		return false;
	*known = true;
	if (si->marked)
		return false;
	/* (a reference of our own: the listener's board may be replaced by
	 * another thread's adoption of it meanwhile, listener_adopt) */
	struct sc_board *b = sc__board(si->lport, false);
	if (!b) {
		sc__stat_fallback(SC_FB_PEER_PLAIN);
		return true;
	}
	enum sc_fallback why = SC_FB_MAX;
	if (sc__offer_backed(b, si->cport) < 0)
		why = SC_FB_NOMEM;
	else if (!sc__offer_named(b, si->cport, &si->local, &si->remote))
		why = SC_FB_PEER_PLAIN;
	sc__board_put(si->lport);
	if (why == SC_FB_MAX)
		return false;
	if (ep_of(nfd))
		ep_close(nfd);  /* (as sock_new: a set closed behind our back) */
	sc__stat_fallback(why);
	LOG(1, "connection stays on TCP: %s (accepted, untracked)", sc__fallback_names[why]);
	return true;
}

SC_API int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	struct sc_sock *ls = sock_get(fd);
	if (ls && !sock_ours(ls) && sock_mode(ls) == M_LISTEN) {
		KEEP_ERRNO();
		listener_adopt(fd, ls);
	}
	if (ls && !ls->nonblock && ls->board && sock_mode(ls) == M_LISTEN)
		accept_spin(fd);
	int nfd = R(accept4)(fd, addr, alen, flags);

	if (nfd >= 0 && ls) {
		KEEP_ERRNO();
		struct syn_info si;
		bool known = false;
		if (sock_mode(ls) == M_LISTEN && ls->board && accepted_plain(nfd, ls, &si, &known))
			return nfd;
		if (sock_mode(ls) == M_LISTEN) {
			/* claimed at its first use (see server_claim) */
			struct sc_sock *s = sock_new(nfd, interp.disabled ? M_TCP : M_SPENDING,
						     flags & SOCK_NONBLOCK);
			if (s && interp.disabled)
				fallback_stat(s, nfd, SC_FB_DISABLED);
			else if (s && ls->board)
				sock_board(s, sc__board(ls->bport, false), ls->bport);
			if (s && known)
				syn_keep(s, &si);
			if (s) {
				s->passive = true;
				s->nosyn = ls->nosyn;
				/* the kernel's accepted socket has the
				 * listener's buffer sizes */
				s->sndbuf = ls->sndbuf;
				s->rcvbuf = ls->rcvbuf;
				s->cork = ls->cork;
			}
			/* a listener of our parent's, io_uring set up here:
			 * its ring may be all that uses the connection, and
			 * the client waits for our answer */
			if (s && interp.uring)
				server_settle(nfd, s);
			else if (s && ls->board)
				server_accepted(nfd, s);
		} else {
			/* (a listener withdrawn, or never on the board, when
			 * io_uring was set up: the connection stays on TCP
			 * for that) */
			struct sc_sock *s = sock_new(nfd, M_TCP, flags & SOCK_NONBLOCK);
			if (s)
				s->passive = true;      /* connected: never connect()s */
			if (s && (interp.disabled || interp.uring))
				fallback_stat(s, nfd, interp.disabled ? SC_FB_DISABLED : SC_FB_UNSUPPORTED);
		}
	}
	return nfd;
}

SC_API int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return accept4(fd, addr, alen, 0);
}
