/* SPDX-License-Identifier: MIT */
/*
 * Switching a live connection back to TCP at a clean cut (exec,
 * SCM_RIGHTS, io_uring, `shortcut off`, a child using it): freeze, re-send
 * what the peer never read, go on over TCP.  docs/interposer.md §6a.
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
#include "dmint.h"
#include "forkreset.h"
static struct {
	pthread_mutex_t lock;   /* efd, running, sw_orphans; order: docs/interposer.md §6b */
	int efd;                /* kicks the switch thread */
	bool running;
} sw_thread = { .lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1 };
SC_LOCK_RANK(sw_thread.lock, LO_SW)

/* Re-send [from, to) of c's send ring on fd (the kernel socket).  Blocks,
 * within SW_SEND_MS, while the kernel's buffers are full.  Returns the
 * bytes that could not be sent. */
/* A framed ring's record at cursor pos (devmem): the payload it names in
 * the peer's region, or NULL if it is not one (then the rest is lost, as
 * from a peer that broke the protocol). */
static const uint8_t *resend_record(struct sc_conn *c, uint64_t pos, size_t *len)
{
	struct sc_dm_rec r;
	uint8_t *p = (uint8_t *)&r;
	for (size_t i = 0; i < sizeof(r); i++)
		p[i] = c->tx.data[(pos + i) & (c->tx.size - 1)];
	const struct sc_dm_peer *dp = c->dm_peer;
	if (!dp || r.check != (SC_DM_REC_MAGIC ^ r.id ^ r.chunk ^ r.len) || r.id != dp->id ||
	    r.chunk >= dp->nchunks || !r.len || r.len > dp->chunk)
		return NULL;
	*len = r.len;
	return dp->base + (size_t)r.chunk * dp->chunk;
}

uint64_t sw_resend(int fd, struct sc_conn *c, uint64_t from, uint64_t to, int max_ms)
{
	uint64_t end = max_ms < 0 ? UINT64_MAX : sc__now_ns() + (uint64_t)max_ms * 1000000u;
	uint64_t ff = atomic_load_explicit(&c->tx.h->framed_from, memory_order_acquire);
	while (from < to) {
		uint32_t pos = (uint32_t)(from & (c->tx.size - 1));
		size_t n = c->tx.size - pos;
		if (n > to - from)
			n = (size_t)(to - from);
		const uint8_t *src = c->tx.data + pos;
		bool rec = ff && from >= ff - 1;
		if (ff && !rec && n > ff - 1 - from)
			n = (size_t)(ff - 1 - from);    /* plain bytes up to the records */
		if (rec) {
			/* devmem: the payload goes, from the receiver's region
			 * (the record itself is ours alone) */
			size_t len;
			const uint8_t *pl = resend_record(c, from, &len);
			if (!pl || to - from < sizeof(struct sc_dm_rec))
				break;
			src = pl + c->dm_resend_off;
			n = len - c->dm_resend_off;
		}
		ssize_t k = R(send)(fd, src, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0 && rec) {
			c->dm_resend_off += (uint32_t)k;
			if ((size_t)k == n) {
				c->dm_resend_off = 0;
				from += sizeof(struct sc_dm_rec);
			}
			continue;
		}
		if (k > 0) {
			from += (uint64_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		uint64_t now = sc__now_ns();
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || now >= end)
			break;  /* the connection is gone: nothing reads it */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		R(poll)(&p, 1, end == UINT64_MAX ? 1000 : (int)((end - now) / 1000000u) + 1);
	}
	return to - from;
}

/* fds of ours that name a program's kernel socket (re-sends, the switch
 * thread's batch): a fork child must not keep them (its peer would wait
 * for their close to see EOF) */
static pthread_mutex_t hidden_lock = PTHREAD_MUTEX_INITIALIZER; /* order: docs/interposer.md §6b */
SC_LOCK_RANK(hidden_lock, LO_HIDDEN)
static int hidden[64], nhidden;

static void hidden_add(int fd)
{
	pthread_mutex_lock(&hidden_lock);
	if (nhidden < 64)
		hidden[nhidden++] = fd;
	pthread_mutex_unlock(&hidden_lock);
}

static void hidden_del(int fd)
{
	pthread_mutex_lock(&hidden_lock);
	for (int i = 0; i < nhidden; i++)
		if (hidden[i] == fd) {
			hidden[i] = hidden[--nhidden];
			break;
		}
	pthread_mutex_unlock(&hidden_lock);
}

/* In a fork child: close the parent's hidden fds. */
static void hidden_atfork_child(void)
{
	sc__mutex_reset(&hidden_lock);
	for (int i = 0; i < nhidden; i++)
		R(close)(hidden[i]);
	SC_RESET(nhidden, 0);
}

/* The fds of ours among [first, last] (close_range leaves them out). */
int hidden_in(unsigned first, unsigned last, int *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&hidden_lock);
	for (int i = 0; i < nhidden && n < max; i++)
		if ((unsigned)hidden[i] >= first && (unsigned)hidden[i] <= last)
			out[n++] = hidden[i];
	pthread_mutex_unlock(&hidden_lock);
	return n;
}

/* Drop a reference taken on s (the last frees it). */
static void sock_unref(struct sc_sock *s)
{
	pthread_mutex_lock(&table_lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&table_lock);
	if (last)
		sock_release(s, -1);
}

/* The re-send of a switch: what the peer never read of ours, then the
 * bytes a client buffered before its connection was set up that never
 * reached the ring (the peer froze first). */
struct sw_job {
	struct sc_sock *s;
	struct sc_conn *c;
	int kfd;
	uint64_t from, to;
	char *pbuf;
	size_t plen;
	bool fin;               /* we shut down writing: our FIN goes after */
	uint64_t lost;
};

/* Send what there is to send, waiting up to max_ms (-1: as long as it
 * takes, 0: not at all); true when all of it went (or cannot go). */
static bool sw_job_run(struct sw_job *j, int max_ms)
{
	if (j->kfd < 0) {
		j->lost = j->to - j->from + j->plen;
		return true;
	}
	uint64_t left = sw_resend(j->kfd, j->c, j->from, j->to, max_ms);
	j->from = j->to - left;
	if (left && max_ms != 0) {
		j->lost = left;         /* gone, or the exec could not wait */
		return true;
	}
	if (left)
		return false;
	while (j->plen) {
		ssize_t n = R(send)(j->kfd, j->pbuf, j->plen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			memmove(j->pbuf, j->pbuf + n, j->plen - (size_t)n);
			j->plen -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (max_ms == 0)
				return false;
			struct pollfd p = { .fd = j->kfd, .events = POLLOUT };
			R(poll)(&p, 1, 1000);
			continue;
		}
		j->lost += j->plen;
		break;
	}
	return true;
}

/* The re-send is done: ONTCP (a child waiting to write sees it only now),
 * our sends go on, the references go. */
static void sw_job_finish(struct sw_job *j, bool heap)
{
	struct sc_sock *s = j->s;
	if (j->kfd >= 0 && j->fin)
		R(shutdown)(j->kfd, SHUT_WR);   /* our FIN, held back till now */
	if (j->kfd >= 0) {
		hidden_del(j->kfd);
		R(close)(j->kfd);
	}
	free(j->pbuf);
	sc__switch_done(j->c);
	pthread_mutex_lock(&s->wlock);
	/* release: the re-send done; pairs with tcp_gate's acquire */
	atomic_store_explicit(&s->resending, false, memory_order_release);
	pthread_cond_broadcast(&s->wcond);
	pthread_mutex_unlock(&s->wlock);
	if (j->lost)
		LOG(1, "switch to TCP: %llu bytes the peer had not read are lost (%s)",
		    (unsigned long long)j->lost, "the connection is gone");
	else
		LOG(1, "connection switched back to TCP");
	sock_unref(s);
	if (heap)
		free(j);
}

/* Switches under way in other threads (a re-send in a thread of its own,
 * an orphan): the process's exit waits for them (sw_atexit). */
static _Atomic int sw_inflight;

static void *sw_job_main(void *arg)
{
	struct sw_job *j = arg;
	sw_job_run(j, -1);
	sw_job_finish(j, true);
	/* seq_cst (kept; release would do): sw_atexit waits for 0 */
	atomic_fetch_sub_explicit(&sw_inflight, 1, memory_order_seq_cst);
	return NULL;
}

/* A re-send the kernel does not take at once gets a thread of its own (it
 * waits for the peer to read: one slow peer must hold up nothing else). */
static void sw_job_thread(struct sw_job *j)
{
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* seq_cst (kept): as the sub */
	atomic_fetch_add_explicit(&sw_inflight, 1, memory_order_seq_cst);
	int rc = pthread_create(&t, &a, sw_job_main, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc) {
		/* seq_cst (kept; release would do): sw_atexit waits for 0 */
		atomic_fetch_sub_explicit(&sw_inflight, 1, memory_order_seq_cst);
		sw_job_run(j, -1);
		sw_job_finish(j, true);
	}
}

/* Before a send (or a FIN, or the fd leaving) on a socket switched back
 * to TCP: the re-send goes first.  In a process that inherited it across
 * fork, the owner's re-send: its ONTCP.  (tcp_gate: while one is under
 * way.) */
void tcp_gate_wait(struct sc_sock *s)
{
	if (!sock_ours(s)) {
		uint64_t dl = sc__now_ns() + 30000000000ull;
		while (!(atomic_load_explicit(&s->c->me->flags, memory_order_acquire) & SC_SF_ONTCP) &&
		       sc__now_ns() < dl)
			usleep(200);
		/* release: as in the switch's end (pairs with the acquire above) */
		atomic_store_explicit(&s->resending, false, memory_order_release);
		return;
	}
	pthread_mutex_lock(&s->wlock);
	/* (relaxed: under wlock, as its stores) */
	while (atomic_load_explicit(&s->resending, memory_order_relaxed))
		pthread_cond_wait(&s->wcond, &s->wlock);
	pthread_mutex_unlock(&s->wlock);
}

/* Our half of c frozen, then up to wait_ns for the peer's: true once both
 * are, with the range of our bytes the peer never read (from, to).  Our
 * calls on it meanwhile find it frozen and wait for s->lock. */
static bool switch_freeze_both(struct sc_conn *c, uint64_t wait_ns, uint64_t *from, uint64_t *to)
{
	sc__lock(&c->txlock);
	sc__lock(&c->rxlock);
	sc__switch_freeze(c);
	sc__unlock(&c->rxlock);
	sc__unlock(&c->txlock);
	uint64_t dl = sc__now_ns() + wait_ns;
	unsigned us = 20;
	bool ready;
	while (!(ready = sc__switch_range(c, from, to)) && sc__now_ns() < dl) {
		usleep(us);
		if (us < 2000)
			us *= 2;
	}
	return ready;
}

/* Switch s (an accelerated connection of ours named by fd) back to TCP.
 * Freezes our half, then waits up to wait_ns for the peer's; once both
 * are frozen the socket is TCP for readers at once (what the peer never
 * read of ours is re-sent by it), while writers wait on s->wlock until
 * we re-sent what the peer never read (for up to resend_ms; -1: as long
 * as it takes, as a kernel send would).  Returns 1 when switched (or not
 * ours to switch any more), 0 if the peer has not frozen yet (our half
 * stays frozen: the peer's SWITCH brings the switch thread back), or
 * -ENOTCONN for a connection another process owns. */
int sock_switch_bounded(int fd, struct sc_sock *s, uint64_t wait_ns, int resend_ms)
{
	KEEP_ERRNO();
	pthread_mutex_lock(&s->lock);
	struct sc_conn *c = s->c;
	if (sock_where(s) != RT_SHM || !c) {
		int mode = sock_mode(s);
		pthread_mutex_unlock(&s->lock);
		return mode == M_SHM ? -ENOTCONN : 1;
	}
	uint64_t from, to;
	if (!switch_freeze_both(c, wait_ns, &from, &to)) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	/* the re-send: our own fd for it (the program may close its fd once
	 * we let go of s->lock), and a reference on s */
	struct sw_job *j = calloc(1, sizeof(*j));
	int kfd = from != to || s->plen || s->shut_wr ? sc__fd_dup(fd) : -1;
	if (kfd >= 0)
		hidden_add(kfd);
	pthread_mutex_lock(&table_lock);
	s->refs++;
	pthread_mutex_unlock(&table_lock);
	if (j) {
		*j = (struct sw_job){ .s = s, .c = c, .kfd = kfd, .from = from, .to = to,
				      .pbuf = s->pbuf, .plen = s->plen, .fin = s->shut_wr };
		s->pbuf = NULL;
		s->plen = 0;
	}
	/* seq_cst (kept; release would do): tcp_gate's acquire */
	atomic_store_explicit(&s->resending, true,
			memory_order_seq_cst);      /* sends wait (tcp_gate) */
	sock_set_mode(s, M_TCP);
	SC_STAT_ADD(fallback[SC_FB_SWITCHED], 1);
	if (s->rec) {
		__atomic_store_n(&s->rec->reason, SC_FB_SWITCHED + 1, __ATOMIC_RELAXED);
		atomic_store_explicit(&s->rec->mode, SC_REC_TCP, memory_order_release);
	}
	pthread_mutex_unlock(&s->lock);
	/* the kernel's epoll sets watch it from now on (at once: a process
	 * sharing a set with us may be waiting in it).  Not under s->lock: a
	 * set's lock comes before a socket's (an epoll_wait evaluating a
	 * pending socket holds its set's and takes the socket's:
	 * docs/interposer.md §6b); our reference keeps s, and an fd closed
	 * meanwhile is not added (ep_switched) */
	ep_switched(s, atomic_load_explicit(&c->sw_child_set, memory_order_relaxed));
	/* pollers and epoll sets look again: readers go on over TCP now,
	 * while we re-send (the peer may have to read for it to go) */
	pthread_mutex_lock(&c->g->lock);
	sc__notify_self(c);
	pthread_mutex_unlock(&c->g->lock);
	if (!j) {
		/* no memory for the job: do it here */
		struct sw_job local = { .s = s, .c = c, .kfd = kfd, .from = from, .to = to,
					.fin = s->shut_wr };
		sw_job_run(&local, resend_ms);
		sw_job_finish(&local, false);
	} else if (resend_ms >= 0 || sw_job_run(j, 0)) {
		/* an exec waits (the thread would not survive it); else
		 * done at once */
		if (resend_ms >= 0)
			sw_job_run(j, resend_ms);
		sw_job_finish(j, true);
	} else {
		sw_job_thread(j);
	}
	return 1;
}

/* A program's call that needs the switch done: wait for the peer as long
 * as it takes (as a call on a socket whose peer is stopped would). */
int sock_switch(int fd, struct sc_sock *s)
{
	int rc;
	while ((rc = sock_switch_bounded(fd, s, SW_WAIT_NS, -1)) == 0)
		;
	return rc < 0 ? rc : 0;
}

/* Connections closed by the program while a child may hold them (see
 * sock_release): the switch thread finishes their switch, then frees
 * them.  Each holds its own fd for the kernel socket. */
static struct sw_orphan {
	struct sc_sock *s;
	int fd;
	struct sw_orphan *next;
} *sw_orphans;

static void sw_orphans_run(void)
{
	pthread_mutex_lock(&sw_thread.lock);
	struct sw_orphan *list = sw_orphans;
	sw_orphans = NULL;
	pthread_mutex_unlock(&sw_thread.lock);
	while (list) {
		struct sw_orphan *o = list;
		list = o->next;
		if (sock_switch_bounded(o->fd, o->s, 0, -1) == 0) {
			pthread_mutex_lock(&sw_thread.lock);   /* the peer's SWITCH brings us back */
			o->next = sw_orphans;
			sw_orphans = o;
			pthread_mutex_unlock(&sw_thread.lock);
			continue;
		}
		hidden_del(o->fd);
		R(close)(o->fd);
		sock_unref(o->s);
		free(o);
		/* seq_cst (kept; release would do): sw_atexit waits for 0 */
		atomic_fetch_sub_explicit(&sw_inflight, 1, memory_order_seq_cst);
	}
}

/* Hand s (its last fd being closed) to the switch thread; false if it
 * cannot take it (then it closes as usual). */
bool sw_orphan(int fd, struct sc_sock *s)
{
	struct sw_orphan *o = malloc(sizeof(*o));
	int kfd = o ? sc__fd_dup(fd) : -1;
	if (kfd < 0) {
		free(o);
		return false;
	}
	o->s = s;
	o->fd = kfd;
	hidden_add(kfd);
	pthread_mutex_lock(&table_lock);
	s->refs = 1;            /* the orphan's own (sock_unref frees it) */
	pthread_mutex_unlock(&table_lock);
	sw_ask(s->c);
	/* seq_cst (kept): as the sub */
	atomic_fetch_add_explicit(&sw_inflight, 1, memory_order_seq_cst);
	pthread_mutex_lock(&sw_thread.lock);
	o->next = sw_orphans;
	sw_orphans = o;
	pthread_mutex_unlock(&sw_thread.lock);
	sw_kick();
	return true;
}

/* ---- a peer that died having forked ---------------------------------------
 *
 * Its connections with us wait for what it left in our ring to be read,
 * then switch to TCP, where a child of its may go on (SC_LF_DEATH_SWITCH).
 * Meanwhile nothing on shared memory moves: a send waits for room nobody
 * makes, a poller for POLLOUT.  The switch thread watches each one's
 * kernel socket: its end (a FIN or a reset: the last process holding the
 * peer's socket is gone) is the peer's death after all (a send blocked in
 * it, or a poller, or an epoll set, waited for ever: an echo server, its
 * peer and the peer's child killed; test_soak's fork/exec soak). */
static struct sw_death {
	struct sc_sock *s;      /* a reference of ours */
	int kfd;                /* our dup of its kernel socket (hidden) */
	bool ended;
	struct sw_death *next;
} *sw_deaths;                   /* the switch thread's */
#define SW_DEATHS_MAX 256       /* watched at once; more wait their turn */
static int sw_ndeaths;
static bool sw_deaths_more;     /* some were left out: look again */

/* Switch thread: watch the connections whose peer died having forked that
 * are not watched yet. */
static void deaths_scan(void)
{
	sw_deaths_more = false;
	pthread_mutex_lock(&table_lock);
	for (int p = 0, end = tab_end_get(); p < NPAGES && (p << PAGE_BITS) < end; p++) {
		/* acquire: pairs with the release in sock_set (fdtable.c) */
		struct sc_sock *_Atomic *pg = atomic_load_explicit(&pages[p],
				memory_order_acquire);
		for (int i = 0; pg && i < tab_in_page(end, p); i++) {
			struct sc_sock *s = atomic_load_explicit(&pg[i], memory_order_acquire);
			if (sw_ndeaths == SW_DEATHS_MAX) {
				sw_deaths_more = true;
				break;
			}
			if (!s || s->death_watched || sock_where(s) != RT_SHM || !s->c ||
			    !(sc__conn_lflags(s->c) & SC_LF_DEATH_SWITCH))
				continue;
			struct sw_death *d = malloc(sizeof(*d));
			int kfd = d ? sc__fd_dup((p << PAGE_BITS) | i) : -1;
			if (kfd < 0) {
				free(d);
				continue;
			}
			hidden_add(kfd);
			s->refs++;
			s->death_watched = true;
			*d = (struct sw_death){ .s = s, .kfd = kfd, .next = sw_deaths };
			sw_deaths = d;
			sw_ndeaths++;
		}
	}
	pthread_mutex_unlock(&table_lock);
}

/* Switch thread: the watched connections whose kernel connection ended
 * learn their peer's death; those that switched meanwhile (a child went on
 * with it), or that the program closed (ours the last reference: its
 * release must not wait, a child of the peer's may wait for our FIN), are
 * let go. */
static void deaths_run(void)
{
	for (struct sw_death **dp = &sw_deaths, *d; (d = *dp);) {
		struct sc_sock *s = d->s;
		struct sc_conn *c = s->c;      /* (kept while we hold s) */
		pthread_mutex_lock(&table_lock);
		bool closed = s->refs == 1;
		pthread_mutex_unlock(&table_lock);
		bool done = closed || sock_mode(s) != M_SHM || !c ||
			    sc__conn_sw(c) != SC_SW_NONE ||
			    (atomic_load_explicit(&c->peer->flags, memory_order_acquire) &
			     SC_SF_FROZEN);
		if (!done && d->ended) {
			pthread_mutex_lock(&c->g->lock);
			sc__conn_peer_dead(c);
			pthread_mutex_unlock(&c->g->lock);
			done = true;
		}
		if (!done) {
			dp = &d->next;
			continue;
		}
		if (closed && sock_mode(s) == M_SHM && c &&
		    (sc__conn_lflags(c) & SC_LF_DEATH_SWITCH))
			/* closed: to TCP first, as an orphan (sock_release),
			 * so that what the dead peer left unread reaches a
			 * child of its that goes on */
			sock_switch_bounded(d->kfd, s, 0, -1);
		*dp = d->next;
		sw_ndeaths--;
		hidden_del(d->kfd);
		R(close)(d->kfd);
		sock_unref(s);
		free(d);
	}
	if (sw_deaths_more)
		deaths_scan();
}

/* Switch every accelerated connection of ours that wants it: asked by the
 * peer or frozen and waiting for the peer (the switch thread: block
 * false, it does not wait), or all of them (all: before an exec, which
 * waits).  No lock held. */
void sw_scan(bool all, bool cloexec_too, bool block)
{
	size_t n = 0, cap = 0;
	struct sw_item { struct sc_sock *s; int fd; } *batch = NULL;
	pthread_mutex_lock(&table_lock);
	for (int p = 0, end = tab_end_get(); p < NPAGES && (p << PAGE_BITS) < end; p++) {
		/* acquire: pairs with the release in sock_set (fdtable.c) */
		struct sc_sock *_Atomic *pg = atomic_load_explicit(&pages[p],
				memory_order_acquire);
		if (!pg)
			continue;
		for (int i = 0; i < tab_in_page(end, p); i++) {
			struct sc_sock *s = atomic_load_explicit(&pg[i], memory_order_acquire);
			int fd = (p << PAGE_BITS) | i;
			if (!s || sock_where(s) != RT_SHM || !s->c)
				continue;
			int sw = sc__conn_sw(s->c);
			if (!all && sw != SC_SW_ASKED && sw != SC_SW_FROZEN)
				continue;
			if (!cloexec_too && (R(fcntl)(fd, F_GETFD) & FD_CLOEXEC))
				continue;
			bool dup = false;
			for (size_t j = 0; j < n && !dup; j++)
				dup = batch[j].s == s;
			if (dup)
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 32;
				void *q = realloc(batch, nc * sizeof(*batch));
				if (!q)
					break;
				batch = q;
				cap = nc;
			}
			/* our own fd for the kernel socket: the program may
			 * close its fd meanwhile */
			int kfd = sc__fd_dup(fd);
			if (kfd < 0)
				continue;
			hidden_add(kfd);
			s->refs++;
			batch[n].s = s;
			batch[n++].fd = kfd;
		}
	}
	pthread_mutex_unlock(&table_lock);
	for (size_t j = 0; j < n; j++) {
		if (block) {
			/* an exec: waits, but not for ever for a peer that
			 * does not answer or read */
			if (sock_switch_bounded(batch[j].fd, batch[j].s, SW_WAIT_NS, SW_SEND_MS) == 0)
				LOG(1, "exec: the peer of a connection did not answer; it stays on "
				    "shared memory, which the new image cannot read");
		} else {
			sock_switch_bounded(batch[j].fd, batch[j].s, 0, -1);
		}
		hidden_del(batch[j].fd);
		R(close)(batch[j].fd);
		sock_unref(batch[j].s);
	}
	free(batch);
}

/* The switch thread: started when there is something to switch (the
 * kill switch turned on, a peer's or a child's request, an orphan). */
static void *sw_main(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd p[1 + SW_DEATHS_MAX];
		struct sw_death *who[SW_DEATHS_MAX];
		nfds_t n = 1;
		p[0] = (struct pollfd){ .fd = sw_thread.efd, .events = POLLIN };
		for (struct sw_death *d = sw_deaths; d; d = d->next) {
			who[n - 1] = d;
			p[n++] = (struct pollfd){ .fd = d->kfd, .events = POLLRDHUP };
		}
		/* orphans waiting for a peer that may close instead of
		 * freezing (no SWITCH then): looked at every second */
		int rc = R(poll)(p, n, sw_orphans ? 1000 : -1);
		if (rc < 0)
			continue;
		if (rc == 0) {
			sw_orphans_run();
			continue;
		}
		for (nfds_t i = 1; i < n; i++)
			if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR))
				who[i - 1]->ended = true;
		uint64_t v;
		if ((p[0].revents & POLLIN) && R(read)(sw_thread.efd, &v, sizeof(v)) > 0) {
			sw_scan(off_file(), true, false);
			sw_orphans_run();
			deaths_scan();
		}
		deaths_run();
	}
	return NULL;
}

/* ---- the kill switch ------------------------------------------------------
 *
 * `shortcut off` creates SC_OFF_FILE in the run directory.  Once we have an
 * accelerated connection, an inotify watch on the directory, read by the
 * control thread while it runs (sc__ctl_watch), keeps off_on current and
 * kicks the switch thread when it turns on; before that, or while the
 * control thread is not running, each question is an access(). */
static char off_path[PATH_MAX];
static pthread_once_t off_once = PTHREAD_ONCE_INIT;
static _Atomic bool off_on;             /* written by off_look only */
static _Atomic int off_ino = -1;        /* the watch's inotify (this process's) */

static void off_init(void)
{
	if (sc__rundir())
		snprintf(off_path, sizeof(off_path), "%s/%s", sc__rundir(), SC_OFF_FILE);
}

static bool off_access(void)
{
	pthread_once(&off_once, off_init);
	KEEP_ERRNO();
	return off_path[0] && access(off_path, F_OK) == 0;
}

/* Control thread: the run directory changed (a name created, moved,
 * removed). */
static void off_look(void)
{
	char buf[4096];
	/* (relaxed: ours, the control thread's, since sw_start stored it
	 * before sc__ctl_watch) */
	int ino = atomic_load_explicit(&off_ino, memory_order_relaxed);
	while (ino >= 0 && R(read)(ino, buf, sizeof(buf)) > 0)
		;
	bool on = off_access();
	/* seq_cst (kept; release would do): read by off_file after
	 * sc__ctl_watching's acquire */
	atomic_store_explicit(&off_on, on, memory_order_seq_cst);
	if (on)
		sw_kick();      /* switch what we have back to TCP */
}

bool off_file(void)
{
	/* watched: what the last event left (off_look runs before any
	 * switch thread's scan that an event starts) */
	if (atomic_load_explicit(&off_ino, memory_order_relaxed) >= 0 && sc__ctl_watching())
		/* seq_cst: pairs with the stores in off_look and sw_start */
		return atomic_load_explicit(&off_on, memory_order_seq_cst);
	return off_access();
}

/* guards making the watch (off_ino); order: docs/interposer.md §6b */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(start_lock, LO_SW_START)

/* The first accelerated connection (and each after it): watch the kill
 * switch from now on.  A connection that became shared memory after the
 * switch thread's scan for `off` is switched by another scan. */
void sw_start(void)
{
	if (atomic_load_explicit(&off_ino, memory_order_acquire) < 0 && sc__rundir()) {
		pthread_mutex_lock(&start_lock);
		/* (relaxed: under start_lock, as its store) */
		if (atomic_load_explicit(&off_ino, memory_order_relaxed) < 0) {
			int ino = sc__fd_park(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
			if (ino >= 0 &&
			    (inotify_add_watch(ino, sc__rundir(), IN_CREATE | IN_MOVED_TO |
					       IN_DELETE | IN_MOVED_FROM) < 0 ||
			     sc__ctl_watch(ino, off_look) < 0)) {
				R(close)(ino);
				ino = -1;
			}
			if (ino >= 0) {
				/* watched from here on: what is there now */
				/* seq_cst: off_on before off_ino (pairs with
				 * off_file's loads) */
				atomic_store_explicit(&off_on, off_access(),
						memory_order_seq_cst);
				/* seq_cst (release at least): pairs with the
				 * acquire at the top of sw_start */
				atomic_store_explicit(&off_ino, ino, memory_order_seq_cst);
			}
		}
		pthread_mutex_unlock(&start_lock);
	}
	if (off_file())
		sw_kick();
}


/* exit(): the switches under way in our threads finish first (an owner
 * that closed a connection a child holds and then exits would otherwise
 * leave the bytes the peer had not read in shared memory, unsent); not for
 * ever, as a stopped peer cannot answer.  _exit and a crash do not wait. */
static void sw_atexit(void)
{
	/* seq_cst: pairs with the subs (a switch done) */
	for (int i = 0; i < SW_EXIT_MS && atomic_load_explicit(&sw_inflight,
			memory_order_seq_cst) > 0; i++)
		usleep(1000);
	/* our rendezvous socket's name goes with us (every process with an
	 * accelerated connection has one: prefork servers would fill the
	 * run directory); a killed process leaves it, a stale name that the
	 * run directory's collection removes (its identity is dead) */
	char path[128];
	if (interp.rdv && getpid() == sc__pid() && sc__rendezvous_path(sc__self(), path, sizeof(path)) == 0)
		unlink(path);
}

static void sw_atexit_once(void)
{
	atexit(sw_atexit);
}

/* Wake the switch thread (started on first use). */
void sw_kick(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, sw_atexit_once);
	pthread_mutex_lock(&sw_thread.lock);
	if (!sw_thread.running) {
		if (sw_thread.efd < 0)
			sw_thread.efd = sc__fd_park(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		pthread_t t;
		pthread_attr_t a;
		sigset_t all, old;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		/* born with every signal blocked: none is delivered to it */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (sw_thread.efd >= 0 && pthread_create(&t, &a, sw_main, NULL) == 0)
			sw_thread.running = true;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	if (sw_thread.efd >= 0)
		sc__efd_wake(sw_thread.efd);
	pthread_mutex_unlock(&sw_thread.lock);
}

/* The peer froze c: switch our half too (the switch thread does it). */
void sw_ask(struct sc_conn *c)
{
	if (sc__conn_ask_sw(c) == SC_SW_NONE)
		sw_kick();
}

/* An fd going to code without the library: switch it first. */
/* A listener of ours that can no longer deliver shared memory (its fd
 * passed to another process, io_uring set up): its board entry goes at
 * once, so that no client waits for an answer that will not come; its
 * connections are plain TCP from now on. */
void listener_withdraw(struct sc_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (sock_mode(s) == M_LISTEN && s->board && sock_ours(s)) {
		sc__board_unlisten(s->board, s->ino);
		sock_set_mode(s, M_TCP);
		LOG(2, "listener withdrawn from the board");
	}
	pthread_mutex_unlock(&s->lock);
}

static void sw_fd(int fd)
{
	struct sc_sock *s = sock_get(fd);
	enum sc_route rt = s ? sock_where(s) : RT_TCP;
	if (rt == RT_LISTEN)
		listener_withdraw(s);   /* the receiver accepts past us */
	if (rt == RT_SETTLING || rt == RT_PENDING) {
		settle_now(fd, s);
		rt = sock_where(s);
	}
	if (rt == RT_SHM)
		sock_switch(fd, s);
	else if (rt == RT_INHERITED)
		sw_request_owner(fd, s);
	tcp_gate(s);            /* the receiver writes after our re-send */
}

/* The accelerated fds in an SCM_RIGHTS message. */
void sw_rights(const struct msghdr *m)
{
	if (!m || !m->msg_controllen || !m->msg_control)
		return;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR((struct msghdr *)m, cm)) {
		/* a malformed header is the kernel's to refuse (EINVAL) */
		size_t room = m->msg_controllen - (size_t)((char *)cm - (char *)m->msg_control);
		if (cm->cmsg_len < CMSG_LEN(0) || cm->cmsg_len > room)
			break;
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfd; i++) {
				int pfd;
				memcpy(&pfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				sw_fd(pfd);
			}
		}
	}
}

/* In a fork child: the switch thread, its jobs and orphans stayed with
 * the parent, and so did our dups of kernel sockets. */
void sw_atfork_child(void)
{
	sc__mutex_reset(&start_lock);       /* (a parent's thread may have held it) */
	hidden_atfork_child();
	for (struct sw_orphan *o = sw_orphans, *next; o; o = next) {
		next = o->next;         /* (their fds were hidden ones) */
		free(o);
	}
	SC_RESET(sw_orphans, NULL);
	for (struct sw_death *d = sw_deaths, *next; d; d = next) {
		next = d->next;         /* (their fds were hidden ones) */
		if (d->s->refs > 1)
			d->s->refs--;   /* the parent's thread's reference */
		d->s->death_watched = false;
		free(d);
	}
	SC_RESET(sw_deaths, NULL);
	SC_RESET(sw_ndeaths, 0);
	SC_RESET_ATOMIC(sw_inflight, 0);
	sc__mutex_reset(&sw_thread.lock);
	if (sw_thread.efd >= 0)
		R(close)(sw_thread.efd);
	SC_RESET(sw_thread.efd, -1);
	SC_RESET(sw_thread.running, false);
	/* the parent's kill-switch watch is the parent's (sc__ctl_watch has
	 * forgotten it); we watch anew at our first connection.  (relaxed:
	 * the fork child's only thread) */
	if (atomic_load_explicit(&off_ino, memory_order_relaxed) >= 0)
		R(close)(atomic_exchange_explicit(&off_ino, -1, memory_order_relaxed));
}
