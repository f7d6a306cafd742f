/* SPDX-License-Identifier: MIT */
/*
 * The fd table: which fds are sockets of ours, a socket's life (made,
 * aliased by dup, released with its last fd), its `shortcut stat` record.
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
/* Describe an established connection of s in its stats record. */
void rec_fill(struct sc_sock *s, int fd, uint32_t mode, int reason, int32_t peer_pid)
{
	if (!s->rec && !(s->rec = sc__rec_get()))
		return;
	struct sc_conn_rec *r = s->rec;
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);
	r->fd = fd;
	r->peer_pid = peer_pid;
	__atomic_store_n(&r->reason, reason >= 0 ? (uint32_t)reason + 1 : 0, __ATOMIC_RELAXED);
	/* a client that went to TCP as it connected: its own address is
	 * the kernel's pick, not asked for (a system call the program does
	 * not make, on every connection to a server without the library);
	 * `shortcut stat` shows "-" */
	bool ask = s->passive || mode != SC_REC_TCP;
	if (!r->lport && ask && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		sc__addr16((struct sockaddr *)&a, &r->laddr, &r->lport);
	al = sizeof(a);
	if (!r->pport && getpeername(fd, (struct sockaddr *)&a, &al) == 0)
		sc__addr16((struct sockaddr *)&a, &r->paddr, &r->pport);
	atomic_store_explicit(&r->mode, mode, memory_order_release);
}

/* guards writes to pages, refs, death_watched; order: docs/interposer.md §6b */
pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(table_lock, LO_TABLE)
struct sc_sock *_Atomic *_Atomic pages[NPAGES];
_Atomic int tab_end;
_Atomic int socks_beyond;

/* table_lock held */
static bool sock_set(int fd, struct sc_sock *s)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return false;
	/* (relaxed: table_lock held, under which the pages change) */
	struct sc_sock *_Atomic *p = atomic_load_explicit(&pages[fd >> PAGE_BITS],
			memory_order_relaxed);
	if (!p) {
		if (!s)
			return true;
		p = calloc(1u << PAGE_BITS, sizeof(*p));
		if (!p)
			return false;
		atomic_store_explicit(&pages[fd >> PAGE_BITS], p, memory_order_release);
	}
	atomic_store_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], s, memory_order_release);
	/* (relaxed load: written under table_lock, which we hold; release:
	 * the entry before the end that shows it) */
	if (s && fd >= atomic_load_explicit(&tab_end, memory_order_relaxed))
		atomic_store_explicit(&tab_end, fd + 1, memory_order_release);
	return true;
}

/* ---- sockets ------------------------------------------------------------ */

static pthread_once_t stats_once = PTHREAD_ONCE_INIT;
static void stats_open(void)
{
	/* disabled processes count too (their fallbacks say why) */
	if (sc__rundir() && sc__stats_file_open() < 0)
		LOG(1, "cannot create a stats file in the run directory");
	if (!sc__rundir()) {
		/* a failure that disables acceleration says so, once, when
		 * the process first has a TCP socket it would have sped up */
		char buf[1200];
		int n = snprintf(buf, sizeof(buf), "shortcut[%d]: run directory unusable: %s; "
				 "this process runs without acceleration\n", (int)sc__pid(),
				 sc__rundir_error());
		if (n > (int)sizeof(buf) - 1)
			n = (int)sizeof(buf) - 1;
		sc__write_stderr(buf, (size_t)n);
	}
}


struct sc_sock *sock_new(int fd, int mode, bool nonblock)
{
	/* a socket now: whatever fd number this was before (an epoll set
	 * closed behind our back) is not an epoll set any more */
	if (ep_of(fd))
		ep_close(fd);
	/* the stats file appears with the process's first TCP socket */
	pthread_once(&stats_once, stats_open);
	struct sc_sock *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->wlock, NULL);
	pthread_cond_init(&s->wcond, NULL);
	sc__lo_rank(&s->lock, LO_SOCK, "a socket's lock");
	sc__lo_rank(&s->wlock, LO_ALONE, "a socket's wlock");
	atomic_store_explicit(&s->mode, mode, memory_order_relaxed);    /* (not shared yet) */
	s->refs = 1;
	s->nonblock = nonblock;
	s->owner = sc__pid();
	s->efd = -1;
	s->offer = -1;
	s->tos = s->tclass = -1;
	s->ttl = s->hops = -1;
	s->cslot = -1;
	s->declined = -1;
	pthread_mutex_lock(&table_lock);
	if (!sock_set(fd, s)) {
		pthread_mutex_unlock(&table_lock);
		free(s);
		return NULL;
	}
	pthread_mutex_unlock(&table_lock);
	if (mode_beyond(mode))
		socks_beyond_add(1);
	return s;
}

/* s->lock held, or s not shared yet: s uses port's board b (held: a
 * reference from sc__board, which s now owns), instead of the one it had. */
void sock_board(struct sc_sock *s, struct sc_board *b, uint16_t port)
{
	if (s->board)
		sc__board_put(s->bport);
	s->board = b;
	s->bport = port;
}

/* The peer died having forked (SC_LF_DEATH_SWITCH, or not noticed yet by
 * the control thread): a child of its may go on with the connection, and
 * must read on TCP what the peer left unread. */
static bool peer_left_child(struct sc_conn *c)
{
	if (sc__conn_lflags(c) & SC_LF_DEATH_SWITCH)
		return true;
	uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);
	return (pf & (SC_SF_FORKED | SC_SF_CLOSED | SC_SF_ABORT)) == SC_SF_FORKED &&
	       !sc__proc_alive(c->g->peer_ident);
}

/* s's memory, released (s->lock not held, nobody else names it). */
static void sock_free(struct sc_sock *s)
{
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->wlock);
	pthread_cond_destroy(&s->wcond);
	sc__lo_forget(&s->lock);
	sc__lo_forget(&s->wlock);
	if (mode_beyond(sock_mode(s)))
		socks_beyond_add(-1);
	free(s);
}

/* The last fd naming s is gone (s no longer in the table). */

void sock_release(struct sc_sock *s, int fd_of_release)
{
	ep_forget_sock(s);
	pthread_mutex_lock(&s->lock);
	dm_sock_release(s);     /* its fragments are freed, as at the kernel's close */
	/* bytes the program sent are the peer's: settle first (as the
	 * kernel delivers them after close), then close as settled */
	if (sock_mode(s) == M_PENDING && s->plen) {
		/* (the close pushes what was held: a lead byte held back,
		 * to a listener that defers its accepts) */
		pending_push(fd_of_release, s);
		pending_settle(fd_of_release, s, true, (int)interp.claim_ms);
	}
	int mode = sock_mode(s);
	if (mode == M_TCP && s->c) {
		/* switched back to TCP: the kernel socket's close is the close */
		if (sock_ours(s))
			sc__switch_release(s->c);
		s->c = NULL;
	} else if (mode == M_SHM && s->c && sock_ours(s) && fd_of_release >= 0 &&
		   (child_may_hold(s->fork_gen) || peer_left_child(s->c)) &&
		   sw_orphan(fd_of_release, s)) {
		/* a child forked since may hold the socket too (the kernel's
		 * close sends no FIN then), or a child of the dead peer's
		 * may go on with it and read what the peer left unread: the
		 * connection goes on, on TCP; the switch thread switches it
		 * (re-sending those bytes) and frees s */
		pthread_mutex_unlock(&s->lock);
		return;
	} else if (mode == M_SHM && s->c) {
		if (sock_ours(s)) {
			if (s->tag)     /* the client's end: did it pay? (bytes:
					 * its cursors, early bytes included) */
				short_learn(s->bport,
					    atomic_load_explicit(&s->shm_calls, memory_order_relaxed),
					    s->c->tx.prod + s->c->rx.cons,
					    s->c->g ? s->c->g->peer_ident : 0);
			if (s->linger0)
				sc_set_linger0(s->c, 1);
			/* a client's plain ending: its kernel socket waits
			 * for the server's FIN, its slot with it (linger.c);
			 * a reset (unread bytes) sends ours at once (with
			 * SO_LINGER{1, 0}, the kernel's reset: no TIME_WAIT) */
			bool client = s->tag && fd_of_release >= 0 && !s->linger0;
			bool plain = sc__close_begin(s->c) && client;
			if (!plain || !linger_take(fd_of_release, s->c, s->tw_free)) {
				sc__conn_release(s->c);
				if (client)
					lg_gave_up(s->tw_free);
			}
		}
		s->c = NULL;
	} else if (mode == M_PENDING) {
		pending_unlink(s);
		if (s->board && s->offer >= 0)
			sc__offer_withdraw(s->board, s->offer, s->tag);
		/* seq_cst: as sock_attached (interposer.h) */
		struct sc_conn *c = atomic_exchange_explicit(&s->attached, NULL,
				memory_order_seq_cst);
		if (c)
			sc_close(c);
	} else if (mode == M_LISTEN && s->board && sock_ours(s)) {
		sc__board_unlisten(s->board, s->ino);
	}
	if (s->declined >= 0 && s->board)
		sc__offer_undecline(s->board, s->declined, &s->local, &s->remote);
	if (s->efd >= 0)
		R(close)(s->efd);
	sock_board(s, NULL, 0);
	free(s->pbuf);
	sc__rec_put(s->rec);
	s->rec = NULL;
	pthread_mutex_unlock(&s->lock);
	sock_free(s);
}

/* fd is being closed (still open: same) or was replaced: drop its
 * reference. */
void fd_forget(int fd)
{
	fd_drop(fd, false);
}

/* A child of vfork (or clone with CLONE_VM) shares our memory, so our
 * table, but not our fds: what it closes or dups is its own, and must not
 * touch the table (Python's subprocess closes every fd in its vfork child
 * before the exec).  getpid() only for fds we track. */
bool in_vfork_child(void)
{
	return getpid() != sc__pid();
}

void fd_drop(int fd, bool same)
{
	struct sc_sock *s = sock_get(fd);
	if (!s || in_vfork_child())
		return;
	pthread_mutex_lock(&table_lock);
	s = sock_get(fd);
	bool last = false, watched = false;
	if (s) {
		sock_set(fd, NULL);
		last = --s->refs == 0;
		/* the switch thread's watch holds the last reference: it
		 * lets go (sw_deaths) */
		watched = s->refs == 1 && s->death_watched;
	}
	pthread_mutex_unlock(&table_lock);
	if (last)
		sock_release(s, same ? fd : -1);
	else if (watched)
		sw_kick();
}

void fd_alias(int oldfd, int newfd)
{
	struct sc_sock *s = sock_get(oldfd);
	if (!s || newfd < 0 || in_vfork_child())
		return;
	pthread_mutex_lock(&table_lock);
	if (sock_get(oldfd) == s && sock_set(newfd, s))
		s->refs++;
	pthread_mutex_unlock(&table_lock);
}

/* ---- pending clients ---------------------------------------------------- */


void fallback_stat(struct sc_sock *s, int fd, enum sc_fallback why)
{
	/* (a fork child without a file of its own keeps no record of it) */
	if (fd >= 0 && (s->rec || !sc__stats_owed()))
		rec_fill(s, fd, SC_REC_TCP, (int)why, 0);
	sc__stat_fallback(why);
	s->counted = true;
	LOG(1, "connection stays on TCP: %s", sc__fallback_names[why]);
}
