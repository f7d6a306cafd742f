/* SPDX-License-Identifier: MIT */
/*
 * fork, and connections shared between processes: children that use a
 * connection their parent set up, owners that close or die.
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
#include "devmem.h"
#include "forkreset.h"
#include "epoll.h"

_Atomic uint32_t nforks;
/* ---- fork: sharing a connection with a child -----------------------------
 *
 * A connection on shared memory is its owner's (the process that set it
 * up: its cursors live there).  A process that inherited it across fork
 * and uses it (or execs with it) asks the owner to switch it back to TCP,
 * through the owner's control thread, and waits for the switch; from then
 * on both share the kernel socket as they would any.  The owner closing
 * its fd while a child forked since is alive switches it too: the child
 * may go on with it, and the kernel sends no FIN while it does.
 */

/* Children we forked (the last few), for child_may_hold. */
static struct {
	pthread_mutex_t lock;   /* the table below; order: docs/interposer.md §6b */
	int n;
	pid_t pid[64];
	uint32_t gen[64];
} forked = { .lock = PTHREAD_MUTEX_INITIALIZER };
SC_LOCK_RANK(forked.lock, LO_CHILDREN)

static bool child_alive(pid_t pid)
{
	siginfo_t si = { 0 };
	/* not reaped, not exited (WNOWAIT leaves it for the program) */
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

static void child_add(pid_t pid)
{
	/* seq_cst (kept): the fork counted before its child may use our fds;
	 * read by child_may_hold */
	uint32_t gen = atomic_fetch_add_explicit(&nforks, 1, memory_order_seq_cst) + 1;
	pthread_mutex_lock(&forked.lock);
	int k = 0;
	for (int i = 0; i < forked.n; i++)        /* forget those gone */
		if (child_alive(forked.pid[i])) {
			forked.pid[k] = forked.pid[i];
			forked.gen[k++] = forked.gen[i];
		}
	forked.n = k;
	if (forked.n == 64) {                     /* the oldest goes */
		memmove(forked.pid, forked.pid + 1, 63 * sizeof(forked.pid[0]));
		memmove(forked.gen, forked.gen + 1, 63 * sizeof(forked.gen[0]));
		forked.n--;
	}
	forked.pid[forked.n] = pid;
	forked.gen[forked.n++] = gen;
	pthread_mutex_unlock(&forked.lock);
}

/* May a child forked after fork number gen still hold our fds? */
bool child_may_hold(uint32_t gen)
{
	/* seq_cst: pairs with the count in child_add */
	if (atomic_load_explicit(&nforks, memory_order_seq_cst) == gen)
		return false;
	bool any = false;
	pthread_mutex_lock(&forked.lock);
	for (int i = 0; i < forked.n && !any; i++)
		any = forked.gen[i] > gen && child_alive(forked.pid[i]);
	pthread_mutex_unlock(&forked.lock);
	return any;
}

/* s is an inherited connection on shared memory (another process owns
 * it): have the owner switch it to TCP, then use the kernel socket. */
/* Is the owner of an inherited connection gone?  (A parent that exited may
 * linger as a zombie: then we were re-parented.) */
static bool owner_gone(const struct sc_sock *s)
{
	/* by its identity (a zombie's is dead: its files were closed);
	 * else by its pid, an ancestor's of our namespace */
	if (s->owner_id)
		return !sc__proc_alive(s->owner_id);
	return (kill(s->owner, 0) < 0 && errno == ESRCH) ||
	       (s->owner == s->parent && getppid() != s->owner);
}

/* The owner died (having forked: the peer takes that as a switch): its
 * half is final in shared memory, so we, holding its kernel socket, do
 * what it would have: once the peer froze, re-send what the peer never
 * read of the owner's bytes.  One inheritor does it (FROZEN taken as the
 * claim); the others wait for its ONTCP. */
static int owner_takeover(int fd, struct sc_conn *c)
{
	/* seq_cst (kept; the flags' writers release, their readers acquire):
	 * FROZEN taken as the claim */
	uint32_t old = atomic_fetch_or_explicit(&c->me->flags, SC_SF_FROZEN,
			memory_order_seq_cst);
	uint64_t dl = sc__now_ns() + SW_WAIT_NS;
	unsigned us = 20;
	if (old & SC_SF_FROZEN) {
		while (!(atomic_load_explicit(&c->me->flags, memory_order_acquire) & SC_SF_ONTCP)) {
			if (sc__now_ns() > dl)
				return -ENOTCONN;
			usleep(us);
			if (us < 2000)
				us *= 2;
		}
		return 0;
	}
	uint32_t pf;
	while (!((pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire)) &
		 (SC_SF_FROZEN | SC_SF_CLOSED | SC_SF_ABORT | SC_SF_RELEASED)) && sc__now_ns() < dl) {
		usleep(us);
		if (us < 2000)
			us *= 2;
	}
	if (pf & SC_SF_FROZEN) {
		uint64_t pc = atomic_load_explicit(&c->s->consumed[!c->side].rx_consumed,
						   memory_order_relaxed);
		/* what the owner held back (MSG_MORE, cork) is its too */
		sc__ring_take_held(&c->tx);
		uint64_t prod = atomic_load_explicit(&c->tx.h->prod, memory_order_acquire);
		if (prod - pc <= c->tx.size)
			sw_resend(fd, c, pc, prod, -1);
	}
	/* the owner had shut down writing (not closed: it died): its FIN,
	 * held back until the switch */
	uint32_t mf = atomic_load_explicit(&c->me->flags, memory_order_acquire);
	if ((mf & SC_SF_WR_DONE) && !(mf & SC_SF_CLOSED))
		R(shutdown)(fd, SHUT_WR);
	sc__conn_set_flags(c, SC_SF_ONTCP);
	SC_STAT_ADD(fallback[SC_FB_SWITCHED], 1);       /* the owner's half, done here */
	LOG(1, "an inherited connection: its owner died; switched back to TCP for it");
	return 0;
}

int sw_request_owner_for(int fd, struct sc_sock *s, uint32_t why, uint64_t wait_ns)
{
	KEEP_ERRNO();
	struct sc_conn *c = s->c;
	int rc = 0;
	if (sock_mode(s) != M_SHM || s->owner == getpid() || !c)
		return 0;
	/* no lock held while waiting: in a child of vfork, s is the parent's
	 * own, and its switch thread takes s->lock to do what we ask */
	uint32_t f = atomic_load_explicit(&c->me->flags, memory_order_acquire);
	/* the slot holds another connection now: ours was let go of, which
	 * its owner does while a child may hold it only once switched */
	if (c->tag && atomic_load_explicit(&c->me->tag, memory_order_relaxed) != c->tag)
		f = SC_SF_ONTCP;
	if (!(f & SC_SF_ONTCP)) {
		/* seq_cst: before the kick; pairs with the exchange in
		 * ctl_switch_requests (ctl.c) */
		atomic_fetch_or_explicit(&c->me->sw_req, why, memory_order_seq_cst);
		char path[128];
		rc = sc__kick_owner(s->owner, sc__rendezvous_path(s->owner_id, path, sizeof(path)) == 0
					      ? path : NULL);
		if (rc < 0 && owner_gone(s))
			rc = 0;         /* gone: taken over below */
		uint64_t dl = sc__now_ns() + wait_ns;
		unsigned us = 20;
		while (rc == 0) {
			f = atomic_load_explicit(&c->me->flags, memory_order_acquire);
			if (f & SC_SF_ONTCP)
				break;
			if (owner_gone(s)) {
				rc = (f & SC_SF_FORKED) && !(f & (SC_SF_RELEASED | SC_SF_CLOSED)) ?
				     owner_takeover(fd, c) : -ENOTCONN;
				break;
			}
			if ((f & SC_SF_RELEASED) || sc__now_ns() > dl)
				rc = -ENOTCONN;
			else
				usleep(us);
			if (us < 2000)
				us *= 2;
		}
	}
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		sock_set_mode(s, M_TCP);
		s->counted = true;
		pthread_mutex_unlock(&s->lock);
	} else {
		LOG(1, "an inherited connection: its owner (pid %d) did not switch it to TCP",
		    (int)s->owner);
	}
	return rc;
}

/* Control thread, group lock held: a SWITCH arrived for c. */
void sw_hook(struct sc_conn *c)
{
	(void)c;
	sw_kick();
}

/* A socket still being set up when its fd goes to code without the
 * library: decide now (an accepted one is claimed or declined; a client's
 * offer is withdrawn unless already claimed, its buffered bytes sent), so
 * that the peer neither waits for a claim nor loses bytes. */
void settle_now(int fd, struct sc_sock *s)
{
	if (sock_route(fd, s) == RT_PENDING && sock_ours(s)) {
		pthread_mutex_lock(&s->lock);
		if (sock_mode(s) == M_PENDING) {
			s->deadline_ns = 0;     /* withdraw now, unless claimed */
			pending_settle(fd, s, true, -1);
		}
		pthread_mutex_unlock(&s->lock);
	}
}

/* ---- fork ----------------------------------------------------------------- */

/* Every socket of the table (fork paths: no other thread runs). */
static void socks_each(void (*fn)(struct sc_sock *s, pid_t a, pid_t b), pid_t a, pid_t b)
{
	for (int p = 0, end = tab_end_get(); p < NPAGES && (p << PAGE_BITS) < end; p++) {
		/* acquire: pairs with the release in sock_set (fdtable.c) */
		struct sc_sock *_Atomic *pg = atomic_load_explicit(&pages[p],
				memory_order_acquire);
		if (!pg)
			continue;
		for (int i = 0; i < tab_in_page(end, p); i++) {
			struct sc_sock *s = atomic_load_explicit(&pg[i], memory_order_acquire);
			if (s)
				fn(s, a, b);
		}
	}
}

/* In a fork child: a socket of the parent's is ours too.  (A listening
 * socket gets a board entry of ours when we accept on it: listener_adopt.) */
static void sock_inherit(struct sc_sock *s, pid_t parent, pid_t child)
{
	(void)child;
	s->parent = parent;
	/* a thread of the parent's (its switch thread) may have held them
	 * at the fork: here nobody does */
	sc__mutex_reset(&s->lock);
	sc__mutex_reset(&s->wlock);
	pthread_cond_init(&s->wcond, NULL);
	/* a re-send under way is the parent's: tcp_gate waits for the
	 * owner's ONTCP instead */
	SC_RESET(s->rec, NULL);         /* records stay the parent's */
}

/* A connection of ours on shared memory is the child's too now: if we die
 * first, the peer takes it as a switch to TCP (the child may go on). */
static void mark_forked(struct sc_sock *s, pid_t parent, pid_t child)
{
	(void)child;
	if (sock_mode(s) == M_SHM && s->owner == parent && s->c &&
	    !(atomic_load_explicit(&s->c->me->flags, memory_order_relaxed) & SC_SF_FORKED))
		sc__conn_set_flags(s->c, SC_SF_FORKED);
}

/* A listening socket of ours is the child's too.  For its first
 * PREREG_FORKS forks (a server's workers) the child gets a board entry at
 * once: the parent writes it before it goes on (it may close its copy at
 * once, and a client must still find a live listener), live while the
 * parent is, and the child takes it over, locked, under its own identity
 * (either may be first; the count is the one both saw before the fork).
 * After those (a server forking per connection, whose children only close
 * it) the child gets one when it accepts (listener_adopt). */
#define PREREG_FORKS 8
/* The identity of the forking process, for the fork in progress in this
 * thread (its child's copy of this thread has it too). */
static __thread uint64_t fork_parent_id;

static bool will_prereg(struct sc_sock *s, pid_t me)
{
	return sock_mode(s) == M_LISTEN && s->board && s->owner == me &&
	       s->inherits < PREREG_FORKS;
}

static void listener_inherit(struct sc_sock *s, pid_t parent, pid_t child)
{
	if (!will_prereg(s, parent))
		return;
	bool in_child = child == sc__pid();
	if (!in_child)
		s->inherits++;  /* (the parent's count; the child's copy starts anew) */
	else
		s->inherits = 0;
	if (sc__board_listen_inherit(s->board, s->ino, fork_parent_id, child, in_child) == 0 &&
	    in_child)
		s->owner = child;
}

/* Is there a socket of the table for which pred says yes? */
static bool socks_any(bool (*pred)(struct sc_sock *s, pid_t me), pid_t me)
{
	for (int p = 0, end = tab_end_get(); p < NPAGES && (p << PAGE_BITS) < end; p++) {
		/* acquire: pairs with the release in sock_set (fdtable.c) */
		struct sc_sock *_Atomic *pg = atomic_load_explicit(&pages[p],
				memory_order_acquire);
		for (int i = 0; pg && i < tab_in_page(end, p); i++) {
			struct sc_sock *s = atomic_load_explicit(&pg[i], memory_order_acquire);
			if (s && pred(s, me))
				return true;
		}
	}
	return false;
}

/* Have we a connection on shared memory?  (A child that inherits it may
 * ask us to switch it, through our rendezvous socket.) */
static bool shm_owned(struct sc_sock *s, pid_t me)
{
	return sock_mode(s) == M_SHM && s->owner == me;
}

static bool owns_shm(void)
{
	return socks_any(shm_owned, sc__pid());
}

/* Might the child just forked hold something child_may_hold is asked of:
 * a connection on shared memory (or on its way there: a pending client,
 * an accepted one not settled), or an epoll set (ctl_ours)?  Asked in the
 * parent after the fork: what was there then is there still, or closed.
 * If not, the child is not remembered: a server forking per connection,
 * holding a listener and connections that stay on TCP, paid a wait test
 * (waitid) of its last child at every fork, for nothing. */
static bool may_share(struct sc_sock *s, pid_t me)
{
	(void)me;
	return sock_mode(s) != M_TCP && sock_mode(s) != M_LISTEN;
}

static bool fork_shares(void)
{
	return atomic_load_explicit(&neps, memory_order_acquire) ||
	       socks_any(may_share, 0);
}

SC_API pid_t fork(void)
{
	/* (sc__kick_owner: we are reachable whatever fds the child closes) */
	if (owns_shm())
		rdv_ensure();
	bool lk = linger_fork_begin();  /* the child's list of dups is whole */
	pid_t child = R(fork)();
	linger_fork_end(lk);
	if (child <= 0)
		return child;
	KEEP_ERRNO();
	/* a process whose sockets all stayed on TCP (a forking server of
	 * plain clients) has nothing to mark: no lock taken, whose page the
	 * fork write-protected (a copy-on-write fault per fork) */
	bool beyond = atomic_load_explicit(&socks_beyond, memory_order_seq_cst) > 0;
	bool shares = atomic_load_explicit(&neps, memory_order_acquire);
	if (beyond) {
		pthread_mutex_lock(&table_lock);        /* other threads run here */
		shares = fork_shares();
		pthread_mutex_unlock(&table_lock);
	}
	if (shares)
		child_add(child);
	if (beyond) {
		pthread_mutex_lock(&table_lock);
		socks_each(mark_forked, sc__pid(), child);
		pthread_mutex_unlock(&table_lock);
	}
	socks_each(listener_inherit, sc__pid(), child);
	ep_mark_shared();
	return child;
}


/* The forking process's pid, for the child's handler (the pid cache may be
 * reset by then). */
static pid_t fork_parent;

void atfork_prepare(void)
{
	/* (written only when changed: both pages stay shared with the last
	 * child, and a write is a copy-on-write fault in a forking server) */
	SC_RESET(fork_parent, sc__pid());
	SC_RESET(fork_parent_id, sc__self_peek());     /* (a fork not through ours too) */
}

void atfork_child(void)
{
	pid_t parent = fork_parent;

	sc__pid_reset();        /* before anything records our pid */
	(void)sc__pid();
	sc__proc_atfork_child();        /* our identity: our own, when we need one */
	sc__board_atfork_child();       /* the parent's listener locks stay its own */
	socks_each(sock_inherit, parent, sc__pid());
	socks_each(listener_inherit, parent, sc__pid());
	/* The control thread did not come along: the child starts its own
	 * rendezvous and link groups when it needs them.  Connections the
	 * parent accelerated stay the parent's (s->owner); the child's
	 * close() of them only drops its fd. */
	sc__mutex_reset(&interp.rdv_lock);
	sc__mutex_reset(&interp.create_lock);
	sc__mutex_reset(&table_lock);
	SC_RESET(interp.rdv, NULL);
	SC_RESET(interp.pending, NULL);
	SC_RESET_ATOMIC(interp.npending, 0);
	pending_atfork_child();
	sc__link_atfork_child();
	ep_atfork_child();
	sw_atfork_child();      /* the switch thread did not come along */
	linger_atfork_child();  /* the parent's closes wait for their FIN */
	nl_atfork_child();      /* devmem bindings are the parent's */
	sc__dm_atfork_child();
	SC_RESET(forked.n, 0);          /* those were our siblings */
	sc__mutex_reset(&forked.lock);
	/* the child counts in a file of its own, made at its first
	 * connection (making it at every fork cost a forking server ~250 us
	 * per connection on ext4: more than the kernel's whole set-up) */
	sc__stats_file_child();
}
