/* SPDX-License-Identifier: MIT */
/*
 * The control thread (link.h): one per process with link groups or
 * listeners.  It accepts rendezvous connections, reads every group's
 * control messages (HELLO, OPEN, CELL, SWITCH, KICK), notices a peer's
 * death (its socket's hang-up), ends held sends (cork) on time, and frees
 * dead groups.
 *
 * Locks, in order: ctl.lock → group lock → listener lock.  Channel locks come
 * before group locks (notify.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "txrx.h"
#include "stats.h"
#include "sys.h"
#include "forkreset.h"

#include "ctl.h"

struct sc_ctl ctl = { .lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .wakefd = -1,
		     .reserve_fd = -1, .watch_fd = -1 };

static void *ctl_main(void *arg);
static void ctl_switch_requests(void);
_Atomic bool sc__ctl_kicked;         /* a KICK came on the rendezvous */

/* Held bytes (SC_MORE, cork) exist: the control thread looks every
 * CORK_TICK_MS for holds to end (sc__cork_expire), until a look finds none. */
#define CORK_TICK_MS 50
static _Atomic bool cork_tick;

/* Something for the thread to look at every CORK_TICK_MS came (flag: the
 * kind's): set it, and wake the thread if it was not set. */
static void ctl_tick_note(_Atomic bool *flag)
{
	/* the caller's store (a hold, a waiting close) before this load; the
	 * thread's clearing of the flag before its look at those: one of us
	 * sees the other */
	atomic_thread_fence(memory_order_seq_cst);
	/* seq_cst: the fence above's other side (ctl_cork_scan, ctl_hook_tick) */
	if (atomic_load_explicit(flag, memory_order_seq_cst) ||
	    atomic_exchange_explicit(flag, true, memory_order_seq_cst))
		return;
	if (ctl.wakefd >= 0)
		sc__efd_wake(ctl.wakefd);
}

void sc__cork_note(void)
{
	ctl_tick_note(&cork_tick);
}

/* The interposer's periodic look (a client's closes waiting for their
 * FIN: linger.c): while hook_tick is set the control thread calls
 * sc__tick_hook every CORK_TICK_MS, and goes on while it returns true. */
bool (*sc__tick_hook)(void);
static _Atomic bool hook_tick;

void sc__tick_note(void)
{
	ctl_tick_note(&hook_tick);
}

static void ctl_hook_tick(void)
{
	/* seq_cst: our clearing before the hook's look (sc__tick_note) */
	atomic_store_explicit(&hook_tick, false, memory_order_seq_cst);
	if (sc__tick_hook && sc__tick_hook())   /* (our own thread reads it next) */
		atomic_store_explicit(&hook_tick, true, memory_order_relaxed);
}

__thread struct sc_group *sc__ctl_pump_held;
__thread struct sc_conn *sc__ctl_pump_refused;

/* Control thread: end the holds that are due. */
static void ctl_cork_scan(void)
{
	/* seq_cst: our clearing before our look at the holds; the sender's
	 * hold before its look at the flag (the fence in sc__cork_note) */
	atomic_store_explicit(&cork_tick, false, memory_order_seq_cst);
	bool any = false;
	uint64_t now = sc__now_ns();
	pthread_mutex_lock(&ctl.lock);
	for (struct sc_group *g = ctl.groups; g; g = g->next) {
		pthread_mutex_lock(&g->lock);
		sc__ctl_pump_held = g;
		for (uint32_t s = 0; s < g->nslots && !sc__group_dead(g); s++) {
			struct sc_conn *c = g->conns[s];
			/* seq_cst: the load of Dekker's pattern above */
			if (c && atomic_load_explicit(&c->corked, memory_order_seq_cst)) {
				sc__cork_expire(c, now);
				any |= atomic_load_explicit(&c->corked, memory_order_relaxed);
			}
		}
		sc__ctl_pump_held = NULL;
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&ctl.lock);
	struct sc_conn *refused = sc__ctl_pump_refused;
	sc__ctl_pump_refused = NULL;
	sc__group_finish_refused(refused);
	if (any)        /* (our own thread reads it next: relaxed) */
		atomic_store_explicit(&cork_tick, true, memory_order_relaxed);
}

/* ctl.lock held, the thread running: put the watched fd in its set.  What
 * came while nobody watched may have been read or not: the thread calls fn
 * once first, and only then is the watch's word good (watching). */
static void watch_add(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_WATCH };
	/* (relaxed: watching and watch_new change under ctl.lock, or in the
	 * thread, which only clears watch_new; the eventfd wakes it) */
	if (ctl.watch_fd >= 0 && !atomic_load_explicit(&ctl.watching, memory_order_relaxed) &&
	    !atomic_load_explicit(&ctl.watch_new, memory_order_relaxed) &&
	    epoll_ctl(ctl.epfd, EPOLL_CTL_ADD, ctl.watch_fd, &ev) == 0) {
		/* seq_cst: read by ctl_main after the eventfd wakes it */
		atomic_store_explicit(&ctl.watch_new, true, memory_order_seq_cst);
		sc__efd_wake(ctl.wakefd);
	}
}

int sc__ctl_watch(int fd, void (*fn)(void))
{
	pthread_mutex_lock(&ctl.lock);
	int rc = ctl.watch_fd >= 0 ? -EBUSY : 0;
	if (!rc) {
		ctl.watch_fd = fd;
		ctl.watch_fn = fn;
		if (ctl.running)
			watch_add();
	}
	pthread_mutex_unlock(&ctl.lock);
	return rc;
}

bool sc__ctl_watching(void)
{
	return atomic_load_explicit(&ctl.watching, memory_order_acquire);
}

/* Start the control thread if needed (ctl.lock held). */
int sc__ctl_start(void)
{
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	int rc;

	if (ctl.running)
		return 0;
	ctl.epfd = sc__fd_park(epoll_create1(EPOLL_CLOEXEC));
	if (ctl.epfd < 0)
		return -errno;
	ctl.wakefd = sc__fd_park(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (ctl.wakefd < 0) {
		rc = -errno;
		goto err_ep;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	if (epoll_ctl(ctl.epfd, EPOLL_CTL_ADD, ctl.wakefd, &ev) < 0) {
		rc = -errno;
		goto err_wake;
	}
	/* the thread must never take the program's signals */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = -pthread_create(&t, &a, ctl_main, NULL);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		goto err_wake;
	ctl.reserve_fd = sc__fd_park(open("/dev/null", O_RDONLY | O_CLOEXEC));
	ctl.running = true;
	watch_add();
	return 0;
err_wake:
	close(ctl.wakefd);
err_ep:
	close(ctl.epfd);
	ctl.epfd = ctl.wakefd = -1;
	return rc;
}

void sc__ctl_kick(void)
{
	if (ctl.wakefd >= 0)
		sc__efd_wake(ctl.wakefd);
}

/* ---- listeners ------------------------------------------------------ */

int sc__listener_group_fds(struct sc_listener *l, int *fds, int max)
{
	int n = 0;

	pthread_mutex_lock(&ctl.lock);
	for (struct sc_group *g = ctl.groups; g && n < max; g = g->next)
		if (g->side == 1 && g->listener == l && !sc__group_dead(g))
			fds[n++] = g->sock;
	pthread_mutex_unlock(&ctl.lock);
	return n;
}

/* Drain the side-1 groups of l whose peer is ident (0: any) or whose socket
 * is in fds (when n > 0). */
static void listener_pump(struct sc_listener *l, uint64_t ident, const int *fds, int n)
{
	int saved = errno;

	pthread_mutex_lock(&ctl.lock);
	for (struct sc_group *g = ctl.groups; g; g = g->next) {
		if (g->side != 1 || g->listener != l || (ident && g->peer_ident != ident))
			continue;
		if (n > 0) {
			int i = 0;
			while (i < n && fds[i] != g->sock)
				i++;
			if (i == n)
				continue;
		}
		struct sc_conn *refused = NULL;
		pthread_mutex_lock(&g->lock);
		if (!sc__group_dead(g) && g->hello_done)
			sc__group_pump_locked(g, &refused);
		pthread_mutex_unlock(&g->lock);
		sc__group_finish_refused(refused);
	}
	pthread_mutex_unlock(&ctl.lock);
	errno = saved;
}

void sc__listener_pump(struct sc_listener *l)
{
	listener_pump(l, 0, NULL, 0);
}

void sc__listener_pump_peer(struct sc_listener *l, uint64_t ident)
{
	listener_pump(l, ident, NULL, 0);
}

void sc__listener_pump_socks(struct sc_listener *l, const int *fds, int n)
{
	if (n > 0)
		listener_pump(l, 0, fds, n);
}

int sc__listener_register(struct sc_listener *l)
{
	int rc;

	pthread_mutex_lock(&ctl.lock);
	rc = sc__ctl_start();
	if (!rc) {
		l->id = ++ctl.next_lid;
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = l->id | TAG_LISTENER };
		if (epoll_ctl(ctl.epfd, EPOLL_CTL_ADD, l->sock, &ev) < 0) {
			rc = -errno;
		} else {
			atomic_fetch_add_explicit(&ctl.nlisteners, 1, memory_order_relaxed);
			l->next = ctl.listeners;
			ctl.listeners = l;
		}
	}
	pthread_mutex_unlock(&ctl.lock);
	return rc;
}

/* Detach l from the control thread and its groups: no OPEN reaches it after
 * this returns.  The peers of its idle groups learn it by a CLOSE message. */
void sc__listener_unregister(struct sc_listener *l)
{
	pthread_mutex_lock(&ctl.lock);
	epoll_ctl(ctl.epfd, EPOLL_CTL_DEL, l->sock, NULL);
	atomic_fetch_sub_explicit(&ctl.nlisteners, 1, memory_order_relaxed);
	for (struct sc_listener **pp = &ctl.listeners; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	for (struct sc_group *g = ctl.groups; g; g = g->next) {
		pthread_mutex_lock(&g->lock);
		if (g->listener == l) {
			struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_CLOSE,
					    .version = SC_LAYOUT_VERSION };
			g->listener = NULL;
			if (!sc__group_dead(g))
				sc__group_send(g, &m, -1);
		}
		pthread_mutex_unlock(&g->lock);
	}
	sc__ctl_kick();
	pthread_mutex_unlock(&ctl.lock);
}

/* Control thread: new sockets on listener id (ctl.lock held). */
static void ctl_accept(uint64_t id)
{
	struct sc_listener *l = ctl.listeners;

	while (l && l->id != id)
		l = l->next;
	while (l) {
		int s = accept4(l->sock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s < 0 && (errno == EMFILE || errno == ENFILE) && ctl.reserve_fd >= 0) {
			/* out of fds: the pending connection would keep the
			 * listener readable and this thread spinning; shed it
			 * with the fd kept in reserve for that */
			close(ctl.reserve_fd);
			s = accept4(l->sock, NULL, NULL, SOCK_CLOEXEC);
			if (s >= 0)
				close(s);
			ctl.reserve_fd = sc__fd_park(open("/dev/null", O_RDONLY | O_CLOEXEC));
			/* EMFILE comes before EAGAIN: stop once none is pending */
			if (s < 0)
				return;
			continue;
		}
		if (s < 0)
			return;
		/* only our own user's processes share memory with us, or with
		 * SHORTCUT_GROUP the group's (another user who can reach the
		 * socket, by an abstract name or a directory left writable, is
		 * hung up on) */
		struct ucred cr;
		socklen_t crl = sizeof(cr);
		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 ||
		    !sc__peer_trusted(s, &cr)) {
			SC_STAT_ADD(conns_refused, 1);
			close(s);
			continue;
		}
		s = sc__fd_park(s);
		struct sc_group *g = sc__group_alloc(1, s);
		if (!g) {
			close(s);
			continue;
		}
		g->peer_pid = cr.pid;
		g->listener = l;
		if (sc__group_register(g)) {
			g->sock = -1;
			close(s);
			sc__group_free(g);
		}
	}
}

void (*sc__ctl_after_hook)(void);
uint64_t (*sc__ident_hook)(void);

static void ctl_event(struct sc_group *g, uint32_t events)
{
	struct sc_conn *refused = NULL;

	pthread_mutex_lock(&g->lock);
	sc__group_pump_locked(g, &refused);
	if (!sc__group_dead(g) && (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) {
		/* drained everything the peer sent before it hung up */
		sc__group_kill(g, -ECONNRESET);
	}
	if (sc__group_dead(g))
		epoll_ctl(ctl.epfd, EPOLL_CTL_DEL, g->sock, NULL);
	pthread_mutex_unlock(&g->lock);
	sc__group_finish_refused(refused);
	if (sc__ctl_after_hook)
		sc__ctl_after_hook();
}

/* Free zombie groups and decide whether to exit (ctl.lock held). */
static bool ctl_reap(void)
{
	struct sc_group **pp = &ctl.groups;

	while (*pp) {
		struct sc_group *g = *pp;
		pthread_mutex_lock(&g->lock);
		bool gone = g->zombie && !g->nconns && !g->holds;
		pthread_mutex_unlock(&g->lock);
		if (gone) {
			*pp = g->next;
			atomic_fetch_sub_explicit(&ctl.ngroups, 1, memory_order_relaxed);
			epoll_ctl(ctl.epfd, EPOLL_CTL_DEL, g->sock, NULL);
			sc__group_free(g);
		} else {
			pp = &g->next;
		}
	}
	if (atomic_load_explicit(&ctl.ngroups, memory_order_relaxed) ||
	    atomic_load_explicit(&ctl.nlisteners, memory_order_relaxed))
		return false;
	/* (the watched fd is not looked at until the thread starts again;
	 * seq_cst: as in ctl_main) */
	atomic_store_explicit(&ctl.watching, false, memory_order_seq_cst);
	atomic_store_explicit(&ctl.watch_new, false, memory_order_relaxed);
	close(ctl.epfd);
	close(ctl.wakefd);
	if (ctl.reserve_fd >= 0)
		close(ctl.reserve_fd);
	ctl.epfd = ctl.wakefd = ctl.reserve_fd = -1;
	ctl.running = false;
	return true;
}

static void *ctl_main(void *arg)
{
	struct epoll_event ev[32];
	uint64_t next_cork = 0, next_hook = 0;

	for (;;) {
		/* seq_cst: pairs with the store in watch_add */
		if (atomic_load_explicit(&ctl.watch_new, memory_order_seq_cst)) {
			ctl.watch_fn();
			atomic_store_explicit(&ctl.watch_new, false, memory_order_relaxed);
			/* seq_cst (release would do for sc__ctl_watching's
			 * acquire: what fn saw comes first; kept as it was) */
			atomic_store_explicit(&ctl.watching, true, memory_order_seq_cst);
		}
		/* (relaxed: a hold or a tick noted since is its sender's
		 * eventfd wake-up) */
		int n = epoll_wait(ctl.epfd, ev, 32,
				   atomic_load_explicit(&cork_tick, memory_order_relaxed) ||
				   atomic_load_explicit(&hook_tick, memory_order_relaxed) ?
				   CORK_TICK_MS : -1);
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;
			if (tag == TAG_WATCH) {
				ctl.watch_fn();
			} else if (!tag) {
				sc__efd_drain(ctl.wakefd);
				ctl_switch_requests();
			} else if (ev[i].data.u64 & TAG_LISTENER) {
				pthread_mutex_lock(&ctl.lock);
				ctl_accept(ev[i].data.u64 & ~TAG_LISTENER);
				pthread_mutex_unlock(&ctl.lock);
			} else {
				ctl_event((struct sc_group *)tag, ev[i].events);
			}
		}
		/* seq_cst: pairs with the store in sc__group_pump_locked (a
		 * KICK read by a thread other than this one, which kicks us) */
		if (atomic_exchange_explicit(&sc__ctl_kicked, false, memory_order_seq_cst))
			ctl_switch_requests();
		if (atomic_load_explicit(&cork_tick, memory_order_relaxed) &&
		    sc__now_ns() >= next_cork) {
			ctl_cork_scan();
			next_cork = sc__now_ns() + CORK_TICK_MS * 1000000ull;
		}
		if (atomic_load_explicit(&hook_tick, memory_order_relaxed) &&
		    sc__now_ns() >= next_hook) {
			ctl_hook_tick();
			next_hook = sc__now_ns() + CORK_TICK_MS * 1000000ull;
		}
		/* only when a group died, or nothing may be left to watch: each
		 * reap takes ctl.lock and every group's lock, and a waiting
		 * client takes them too to read its OPEN */
		/* seq_cst: pairs with the store in group_maybe_zombie (group.c);
		 * the counts are hints (ctl_reap counts again under the lock) */
		if (atomic_exchange_explicit(&ctl.reap_due, false, memory_order_seq_cst) ||
		    (!atomic_load_explicit(&ctl.ngroups, memory_order_relaxed) &&
		     !atomic_load_explicit(&ctl.nlisteners, memory_order_relaxed))) {
			pthread_mutex_lock(&ctl.lock);
			bool done = ctl_reap();
			pthread_mutex_unlock(&ctl.lock);
			if (done)
				return NULL;
		}
	}
}

/* fd still names an eventfd (a child may have closed the one it inherited
 * and got the number back for a file of its own) */
static bool is_eventfd(int fd)
{
	char path[40], link[40];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = 0;
	return strcmp(link, "anon_inode:[eventfd]") == 0;
}

/* KICK on owner's rendezvous socket: needs no fd of ours (a child may have
 * closed every fd it inherited, and reused their numbers). */
static int kick_rdv(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int rc;
	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_KICK,
			    .version = SC_LAYOUT_VERSION, .pid = sc__pid() };
	while ((rc = connect(s, (struct sockaddr *)&sa, sizeof(sa))) < 0 && errno == EINTR)
		;
	if (rc == 0 && send(s, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		rc = -1;
	rc = rc < 0 ? -errno : 0;
	close(s);
	return rc;
}

int sc__kick_owner(pid_t owner, const char *rdv_path)
{
	if (kick_rdv(rdv_path) == 0)
		return 0;
	/* no rendezvous (it could not be made): the owner's eventfd, kept
	 * across fork, if it is still that */
	if (owner == sc__pid() && ctl.wakefd >= 0)     /* a vfork child: our own memory */
		return !is_eventfd(ctl.wakefd) ? -ESRCH : sc__efd_wake(ctl.wakefd);
	for (int i = 0; i < ctl.nkick; i++)
		if (ctl.kick_pid[i] == owner)
			return !is_eventfd(ctl.kick_fd[i]) ? -ESRCH : sc__efd_wake(ctl.kick_fd[i]);
	return -ESRCH;
}

/* Control thread, after a kick: switch requests from processes that
 * inherited one of our connections (sw_req in our side of the slot). */
static void ctl_switch_requests(void)
{
	pthread_mutex_lock(&ctl.lock);
	for (struct sc_group *g = ctl.groups; g; g = g->next) {
		pthread_mutex_lock(&g->lock);
		for (uint32_t s = 0; s < g->nslots; s++) {
			struct sc_conn *c = g->conns[s];
			uint32_t why;
			if (c && atomic_load_explicit(&c->me->sw_req, memory_order_relaxed) &&
			    /* seq_cst: pairs with the requester's store
			     * before its kick (sc__kick_owner) */
			    (why = atomic_exchange_explicit(&c->me->sw_req, 0, memory_order_seq_cst))) {
				/* relaxed: before the seq_cst compare-exchange
				 * of c->sw (sc__conn_ask_sw) that the switch
				 * thread reads before it reads this */
				if (why & SC_SWREQ_EPOLL)
					atomic_store_explicit(&c->sw_child_set, true,
							      memory_order_relaxed);
				sc__group_switch_ask(c);
			}
		}
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&ctl.lock);
}

void sc__link_atfork_child(void)
{
	sc__mutex_reset(&ctl.lock);
	/* (a fork child: one thread, nobody to pair with) */
	SC_RESET_ATOMIC(cork_tick, false);
	SC_RESET_ATOMIC(hook_tick, false);
	/* the parent's control thread can still be asked to switch the
	 * connections we inherit (its eventfd stays open here) */
	if (ctl.wakefd >= 0 && ctl.nkick < 8) {
		ctl.kick_pid[ctl.nkick] = getppid();
		ctl.kick_fd[ctl.nkick++] = ctl.wakefd;
		ctl.wakefd = -1;
	}
	for (struct sc_group *g = ctl.groups; g; g = g->next) {
		if (g->sock >= 0)
			close(g->sock);
		g->sock = -1;
		for (int i = 0; i < SC_MAX_CELLS; i++) {
			int ws = atomic_load_explicit(&g->peer_wake[i], memory_order_relaxed);
			if (ws >= 0)
				close(ws);
		}
	}
	for (struct sc_listener *l = ctl.listeners; l; l = l->next)
		close(l->sock);
	if (ctl.epfd >= 0)
		close(ctl.epfd);
	if (ctl.wakefd >= 0)
		close(ctl.wakefd);
	if (ctl.reserve_fd >= 0)
		close(ctl.reserve_fd);
	/* the parent's structures stay allocated: its connections, copied
	 * into the child, still point at them (and are never used here) */
	SC_RESET(ctl.groups, NULL);
	SC_RESET(ctl.zombies, NULL);
	SC_RESET(ctl.listeners, NULL);
	SC_RESET_ATOMIC(ctl.ngroups, 0);
	SC_RESET_ATOMIC(ctl.nlisteners, 0);
	SC_RESET(ctl.running, false);
	SC_RESET(ctl.epfd, -1);
	SC_RESET(ctl.wakefd, -1);
	SC_RESET(ctl.reserve_fd, -1);
	/* the watched fd is the parent's (an inotify instance is shared
	 * across fork: both would read its events); the layer that set it
	 * sets its own */
	SC_RESET(ctl.watch_fd, -1);
	SC_RESET(ctl.watch_fn, NULL);
	SC_RESET_ATOMIC(ctl.watching, false);
	SC_RESET_ATOMIC(ctl.watch_new, false);
}

/* every field of struct sc_stats is a public entry of counters.def */
_Static_assert(sizeof(struct sc_stats) == 8 * (0
#define SC_COUNTER(field, public, ...) + public
#include "counters.def"
	       ), "struct sc_stats and counters.def's public entries differ");

#define SC_PUBLIC_1(field) \
	st->field = atomic_load_explicit(&sc__statp->field, memory_order_relaxed);
#define SC_PUBLIC_0(field)
/* The process's totals with its live connections' counters; a closing
 * connection moves its counters to the totals under its group lock, so
 * none is counted twice. */
SC_API void sc_stats_get(struct sc_stats *st)
{
	memset(st, 0, sizeof(*st));
#define SC_COUNTER(field, public, ...) SC_PUBLIC_##public(field)
#include "counters.def"
	pthread_mutex_lock(&ctl.lock);
	for (struct sc_group *g = ctl.groups; g; g = g->next) {
		pthread_mutex_lock(&g->lock);
		for (uint32_t s = 0; s < g->nslots; s++) {
			struct sc_conn *c = g->conns[s];
			if (!c)
				continue;
			st->bytes_sent += atomic_load_explicit(&c->bytes_sent, memory_order_relaxed);
			st->bytes_received += atomic_load_explicit(&c->bytes_received, memory_order_relaxed);
			st->spin_hits += atomic_load_explicit(&c->spin_hits, memory_order_relaxed);
		}
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&ctl.lock);
}

