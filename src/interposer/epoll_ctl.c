/* SPDX-License-Identifier: MIT */
/*
 * epoll registrations: an accelerated fd bound to its set's completion
 * channel (or watched through its own fd); epoll_create, epoll_ctl.
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
#include "epoll.h"

_Atomic int nforeign;
const char ep_chan_mark;
static void reg_unwatch(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->foreign) {
		r->foreign = false;
		/* relaxed: a count its readers read relaxed (a fast path) */
		atomic_fetch_sub_explicit(&nforeign, 1, memory_order_relaxed);
	}
	for (int i = 0; i < 2; i++)
		if (r->wfd[i] >= 0) {
			R(epoll_ctl)(e->inner, EPOLL_CTL_DEL, r->wfd[i], NULL);
			r->wfd[i] = -1;
			/* relaxed: read by ep_inner_news, see there */
			atomic_fetch_sub_explicit(&e->nwatch, 1, memory_order_relaxed);
		}
	if (r->kind == M_PENDING)
		atomic_fetch_sub_explicit(&e->npending, 1, memory_order_relaxed);
	r->kind = 0;
}

struct sc_epreg *reg_find(struct sc_ep *e, int fd)
{
	return fd >= 0 && fd < e->nbyfd ? e->byfd[fd] : NULL;
}

int reg_link(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->fd >= e->nbyfd) {
		int n = e->nbyfd ? e->nbyfd : 64;
		while (n <= r->fd)
			n *= 2;
		struct sc_epreg **p = realloc(e->byfd, (size_t)n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + e->nbyfd, 0, (size_t)(n - e->nbyfd) * sizeof(*p));
		e->byfd = p;
		e->nbyfd = n;
	}
	e->byfd[r->fd] = r;
	r->gen = ++e->gens & 0x7fffffffu;
	r->prev = NULL;
	r->next = e->regs;
	if (e->regs)
		e->regs->prev = r;
	e->regs = r;
	return 0;
}

static void reg_unlink(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else if (e->regs == r)
		e->regs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->next = r->prev = NULL;
	if (reg_find(e, r->fd) == r)
		e->byfd[r->fd] = NULL;
}

uint64_t reg_token(const struct sc_epreg *r)
{
	return REG_TOKEN_BIT | (uint64_t)r->gen << 32 | (uint32_t)r->fd;
}

struct sc_epreg *reg_of_token(struct sc_ep *e, uint64_t token)
{
	if (!(token & REG_TOKEN_BIT))
		return NULL;
	struct sc_epreg *r = reg_find(e, (int)(uint32_t)token);
	return r && r->gen == (uint32_t)(token >> 32 & 0x7fffffffu) ? r : NULL;
}

static void reg_watch_fd(struct sc_ep *e, struct sc_epreg *r, int i, int fd, uint32_t more)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | more, .data.u64 = reg_token(r) };
	if (R(epoll_ctl)(e->inner, EPOLL_CTL_ADD, fd, &ev) == 0) {
		r->wfd[i] = fd;
		/* relaxed: read by ep_inner_news, see there */
		atomic_fetch_add_explicit(&e->nwatch, 1, memory_order_relaxed);
	}
}

void check_add(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->listed || r->disabled || r->deleted)
		return;
	r->listed = true;
	r->cnext = e->check;
	e->check = r;
}

/* e->lock held: unlink r from the lists and free it. */
void reg_free(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->kernel) {
		pthread_mutex_lock(&kreg_lock);
		kreg_unlink(r);
		pthread_mutex_unlock(&kreg_lock);
	}
	reg_unwatch(e, r);
	if (r->shared && r->second && r->s->c) {
		struct sc_conn *c = r->s->c;
		pthread_mutex_lock(&c->bindlock);
		int x = sc__chan_xindex(c, e->ch);
		if (x >= 0) {
			struct sc_epreg *head = c->userx[x];
			if (head == r)
				c->userx[x] = r->sib;
			else
				for (struct sc_epreg *q = head; q; q = q->sib)
					if (q->sib == r) {
						q->sib = r->sib;
						break;
					}
			/* the last entry: the set stops watching it */
			if (!c->userx[x])
				sc__chan_detachx(e->ch, c, x);
		}
		pthread_mutex_unlock(&c->bindlock);
	} else if (r->shared && r->s->c) {
		struct sc_epreg *head = sc_conn_user(r->s->c);
		if (head == r)
			sc_conn_set_user(r->s->c, r->sib);     /* NULL: collected, ignored */
		else
			for (struct sc_epreg *q = head; q; q = q->sib)
				if (q->sib == r) {
					q->sib = r->sib;
					break;
				}
	}
	for (struct sc_epreg **pp = &e->fired; *pp; pp = &(*pp)->fnext)
		if (*pp == r) {
			*pp = r->fnext;
			break;
		}
	for (struct sc_epreg **pp = &e->check; *pp; pp = &(*pp)->cnext)
		if (*pp == r) {
			*pp = r->cnext;
			break;
		}
	reg_unlink(e, r);
	free(r);
}

static uint32_t poll_to_epoll(short r)
{
	uint32_t ev = 0;
	if (r & POLLIN) ev |= EPOLLIN | EPOLLRDNORM;
	if (r & POLLOUT) ev |= EPOLLOUT | EPOLLWRNORM;
	if (r & POLLRDHUP) ev |= EPOLLRDHUP;
	if (r & POLLHUP) ev |= EPOLLHUP;
	if (r & POLLERR) ev |= EPOLLERR;
	if (r & POLLPRI) ev |= EPOLLPRI;
	return ev;
}

/* e->lock held: r's readiness now, keeping what the inner set watches in
 * step with the connection's mode.  Returns 0 and frees r if the fd went
 * back to plain TCP (the kernel set then watches it itself); *gone set. */
/* e->lock held: the set's channel, created on first use, in the inner set. */
int ep_chan_ensure(struct sc_ep *e)
{
	if (e->ch)
		return 0;
	struct sc_chan *ch;
	if (sc_chan_open(&ch) < 0)
		return -ENOMEM;
	int cfd = sc_chan_fd(ch);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = (void *)&ep_chan_mark };
	if (cfd < 0 || R(epoll_ctl)(e->inner, EPOLL_CTL_ADD, cfd, &ev) < 0) {
		sc_chan_close(ch);
		return -ENOMEM;
	}
	e->ch = ch;
	return 0;
}

/* Set around an ADD's first look: the connection's bind signals nobody
 * even if it has something to report now.  The new entry goes on the
 * check list, evaluated at the set's next wait, and a thread that may be
 * past its last look (a sleeper: counted before that look) is woken by
 * epoll_ctl itself.  A set watched from outside or shared with another
 * process is signalled as the C API's bind does (its fd readable now). */
static __thread bool bind_quiet;

/* e->lock held: bind c to the set's channel (created on first use). */
static int ep_bind(struct sc_ep *e, struct sc_epreg *r, struct sc_conn *c)
{
	if (ep_chan_ensure(e) < 0)
		return -ENOMEM;
	struct sc_chan *cur = sc__conn_chan(c);
	if (cur && cur != c->own && cur != e->ch) {
		/* in another epoll set's channel: ours watches it as one of
		 * the connection's extra channels (the peer wakes every one),
		 * if one is free */
		pthread_mutex_lock(&c->bindlock);
		int x = sc__chan_xindex(c, e->ch), rc = 0;
		if (x >= 0) {
			struct sc_epreg *q = c->userx[x];
			while (q && q != r)
				q = q->sib;
			if (!q) {
				r->sib = ((struct sc_epreg *)c->userx[x])->sib;
				((struct sc_epreg *)c->userx[x])->sib = r;
			}
		} else {
			x = sc__chan_xindex(c, NULL);   /* a free one */
			if (x < 0)
				rc = -EBUSY;    /* too many sets: it polls the first's fd */
			else if ((rc = sc__chan_attachx(e->ch, c, x)) == 0) {
				r->sib = NULL;
				c->userx[x] = r;
			}
		}
		pthread_mutex_unlock(&c->bindlock);
		if (rc == 0) {
			r->second = true;
			/* what happened before the watch began is seen by
			 * the caller's look; the next change wakes us */
			/* seq_cst: our flag before the caller's look at the
			 * ring; the producer's publish before its load of
			 * rx_armed (Dekker's pattern) */
			atomic_fetch_or_explicit(&c->rx.h->rx_armed, SC_ARM_EDGE,
					memory_order_seq_cst);
		}
		return rc;
	}
	struct sc_epreg *head = cur == e->ch ? sc_conn_user(c) : NULL;
	if (head) {
		/* another entry of ours has it (a dup'd fd): chain r to it */
		for (struct sc_epreg *q = head; q; q = q->sib)
			if (q == r)
				return 0;
		r->sib = head->sib;
		head->sib = r;
		return 0;
	}
	/* quiet (an ADD): see bind_quiet */
	if (cur != e->ch && sc__chan_bind(c, e->ch, bind_quiet && !e->exposed && !e->shared) < 0)
		return -ENOMEM;
	r->sib = NULL;
	sc_conn_set_user(c, r);
	return 0;
}

void fired_add(struct sc_ep *e, struct sc_epreg *r);

/* e->lock held: the connections of the set's channel that became ready
 * since the last collect go on the check list; returns how many.  With
 * arm, the channel's cells are armed first (sc_chan_wait with no wait):
 * only a caller about to sleep arms them, so that a waker finding us
 * awake makes no system call. */
int ep_collect(struct sc_ep *e, bool arm)
{
	struct sc_conn *cs[64];
	int total = 0, k;

	if (!e->ch)
		return 0;
	do {
		k = arm ? sc_chan_wait(e->ch, cs, 64, 0) : sc__chan_collect(e->ch, cs, 64);
		if (k < 0)
			k = 0;
		for (int i = 0; i < k; i++) {
			int x = sc__conn_chan(cs[i]) == e->ch ? -1 : sc__chan_xindex(cs[i], e->ch);
			struct sc_epreg *head = x >= 0 ? cs[i]->userx[x] : sc_conn_user(cs[i]);
			for (struct sc_epreg *r = head; r; r = r->sib) {
				check_add(e, r);
				fired_add(e, r);
			}
			total++;
		}
	} while (k == 64);
	return total;
}

/* EPOLLET: the connection's state as edges are told from (its input
 * cursor, its room, its flags).  Taken before its readiness is evaluated:
 * a change after that shows at the next look instead of being counted as
 * reported. */
void reg_sig(struct sc_epreg *r, uint64_t sig[3])
{
	sig[0] = r->sig_in;
	sig[1] = r->sig_out;
	sig[2] = r->sig_fl;
	if (!r->s->c || sock_mode(r->s) != M_SHM)
		return;
	struct sc_conn *c = r->s->c;
	/* (the error too: a peer that died with bytes unread sets only it,
	 * the reset an ET entry must hear of) */
	uint64_t fl = atomic_load_explicit(&c->peer->flags, memory_order_acquire) |
		      (uint64_t)sc__conn_lflags(c) << 32 |
		      (uint64_t)(sc__conn_err(c) != 0) << 30;
	sig[0] = atomic_load_explicit(&c->rx.h->prod, memory_order_acquire) ^ fl * 0x9e3779b97f4a7c15ull;
	/* room is news after a send ran out of it, or a look found none (the
	 * kernel's SOCK_NOSPACE, which tcp_poll and a full send set): the
	 * peer's every read, publishing its cursor, is not */
	uint64_t nospace = (uint64_t)atomic_load_explicit(&c->tx_nospace, memory_order_relaxed) +
			   r->unwritable;
	sig[1] = nospace ^ fl * 0x9e3779b97f4a7c15ull;
	sig[2] = fl | (uint64_t)r->s->sent_to_closed << 31;
}

/* r's look (reg_eval) changed what it watches: sig, taken before it, is
 * of the old mode; a pending client's settle to shared memory took its
 * state when the watch began (r->settled), which edges are told from. */
void reg_sig_settled(const struct sc_epreg *r, uint64_t sig[3])
{
	if (r->settled) {
		sig[0] = r->sig_in;
		sig[1] = r->sig_out;
		sig[2] = r->sig_fl;
	}
}

/* A registration of a connection of ours on shared memory, watched from
 * now on: through the set's channel (bound), or its own pollable fd in
 * the inner set.  settle: a pending client just settled, whose EPOLLET
 * edges are changes from its state as the watch begins (watched already:
 * a change from here on wakes us, and is an edge at the next look if this
 * one does not see it; room is news if it ran out since the entry last
 * reported, reg_edge). */
static void reg_watch_shm(struct sc_ep *e, struct sc_epreg *r, struct sc_sock *s, bool settle)
{
	if (ep_bind(e, r, s->c) == 0) {
		r->shared = true;
		sc__conn_poll_arm(s->c, (r->events & EPOLLOUT) || (r->second && s->c->polled_out));
	} else {
		int pfd = sc__conn_poll_arm(s->c, r->events & EPOLLOUT);
		if (pfd >= 0)
			reg_watch_fd(e, r, 0, pfd, 0);
		r->foreign = true;
		/* relaxed: as in reg_unwatch */
		atomic_fetch_add_explicit(&nforeign, 1, memory_order_relaxed);
	}
	if (!settle)
		return;
	uint64_t sig[3];
	r->settled_out = (uint64_t)s->pnospace + r->unwritable != r->sig_out;
	reg_sig(r, sig);
	r->sig_in = sig[0];
	r->sig_out = sig[1];
	r->sig_fl = sig[2];
	r->settled = true;
}

uint32_t reg_eval(struct sc_ep *e, struct sc_epreg *r, bool *gone)
{
	struct sc_sock *s = r->s;
	short want = POLLIN | POLLOUT | POLLRDHUP | POLLPRI;
	int wfd;
	*gone = false;
	short rv = sock_revents(r->fd, s, want, &wfd, false);
	int mode = sock_mode(s);
	if (rv < 0 && mode != M_SHM) {
		/* fell back to TCP: hand the fd to the kernel's own set */
		struct epoll_event ev = { .events = r->events, .data = r->data };
		if (!r->disabled)
			R(epoll_ctl)(e->fd, EPOLL_CTL_ADD, r->fd, &ev);
		reg_free(e, r);
		*gone = true;
		return 0;
	}
	if (rv < 0)
		rv = 0;
	if (r->kind != mode) {
		/* a pending client settling: EPOLLET edges from now on are
		 * changes from its state as the watch begins (below) */
		bool settle = r->kind == M_PENDING && mode == M_SHM && (r->events & EPOLLET);
		reg_unwatch(e, r);
		int efd = -1;
		if (mode == M_PENDING) {
			pthread_mutex_lock(&s->lock);
			mode = sock_mode(s);
			if (mode == M_PENDING) {
				s->efd_exposed = true;  /* the inner set watches it */
				efd = s->efd;
			}
			pthread_mutex_unlock(&s->lock);
			if (mode != M_PENDING)
				check_add(e, r);        /* settled meanwhile: look again */
		}
		r->kind = mode;
		if (mode == M_PENDING) {
			/* (looked at by slices: ep_wait) */
			atomic_fetch_add_explicit(&e->npending, 1, memory_order_relaxed);
			reg_watch_fd(e, r, 0, efd, 0);
			/* its kernel socket: data or an end (a plain peer),
			 * and the connect's completion (pending_tcp_up); each
			 * change once, the registration is looked at anew */
			reg_watch_fd(e, r, 1, r->fd, EPOLLOUT | EPOLLET);
		} else if (mode == M_SHM && sock_ours(s)) {
			reg_watch_shm(e, r, s, settle);
			/* anything that happened before the watch began */
			rv = sock_revents(r->fd, s, want, &wfd, false);
			if (rv < 0)
				rv = 0;
		}
	}
	uint32_t ev = poll_to_epoll(rv) & (r->events | EPOLLHUP | EPOLLERR);
	if ((r->events & EPOLLOUT) && !(ev & EPOLLOUT) && (mode == M_SHM || mode == M_PENDING))
		r->unwritable++;        /* (reg_sig, reg_edge: room is news now) */
	return ev;
}

void fired_add(struct sc_ep *e, struct sc_epreg *r)
{
	if (!r->fired) {
		r->fired = true;
		r->fnext = e->fired;
		e->fired = r;
	}
}

/* e->lock held: r starts as an ADD makes it (a fired EPOLLONESHOT one
 * disabled): polled afresh, watched as its socket's mode wants, or handed
 * to the kernel's set (freed) if that is TCP now. */
static void reg_start(struct sc_ep *e, struct sc_epreg *r, uint32_t events, epoll_data_t data,
		      bool disabled)
{
	r->deleted = false;
	r->exclusive = events & EPOLLEXCLUSIVE;
	r->events = events & ~(EPOLLEXCLUSIVE | EPOLLWAKEUP);
	r->data = data;
	r->disabled = disabled;
	r->seen = 0;
	r->sig_in = r->sig_out = r->sig_fl = 0;
	r->force_edge = true;
	r->settled = false;
	if (r->kind == M_SHM)
		fired_add(e, r);        /* re-arm for this interest */
	bool gone;
	bind_quiet = true;
	reg_eval(e, r, &gone);  /* sets up the watch; may hand back to TCP */
	bind_quiet = false;
	if (!gone)
		check_add(e, r);
}

/* A registration was made while threads sleep in the kernel's wait on e:
 * arm the channel (its next event wakes them) and wake them now, to look
 * (a look finding nothing sleeps again). */
static void ep_wake_sleepers(struct sc_ep *e)
{
	ep_arm(e, true);
	pthread_mutex_lock(&e->lock);
	if (ep_chan_ensure(e) == 0)
		sc__chan_signal(e->ch);
	pthread_mutex_unlock(&e->lock);
}

/* ---- registrations of fresh sockets --------------------------------------
 *
 * A socket added to a set before it connects (nginx's upstream connect,
 * Netty's channels, registered at creation) is plain TCP then, and the
 * kernel's set holds it.  Its connect() may make it a client of ours,
 * pending and then on shared memory, where the kernel's set would report
 * what the kernel socket does (the connect's completion) and never the
 * reply, which is in the ring.  So each such registration is recorded,
 * as a kernel entry in the set's index (no system call), and follows its
 * socket once connect() decided: a pending or shared-memory socket's
 * becomes ours (the kernel's registration goes, with its EPOLLONESHOT
 * state), one that stayed on TCP only loses the record (the kernel's set
 * keeps what it always had).
 */
pthread_mutex_t kreg_lock = PTHREAD_MUTEX_INITIALIZER;        /* order: docs/interposer.md §6b */
SC_LOCK_RANK(kreg_lock, LO_KREG)

/* kreg_lock held (or a fork child's only thread): r off its socket's
 * list; a registration of ours from now on, or freed */
void kreg_unlink(struct sc_epreg *r)
{
	struct sc_sock *s = r->s;
	struct sc_epreg *head = atomic_load_explicit(&s->kregs, memory_order_relaxed);
	if (head == r) {
		/* (pairs with the hints' acquire loads) */
		atomic_store_explicit(&s->kregs, r->knext, memory_order_release);
	} else {
		for (struct sc_epreg *q = head; q; q = q->knext)
			if (q->knext == r) {
				q->knext = r->knext;
				break;
			}
	}
	r->knext = NULL;
	r->kernel = false;
}

/* The set is closing (its last fd): its records leave their sockets
 * before it goes, so that no socket leads to it any more. */
void ep_kregs_purge(struct sc_ep *e)
{
	pthread_mutex_lock(&e->lock);
	struct sc_epreg *r = e->regs;
	while (r) {
		struct sc_epreg *next = r->next;
		if (r->kernel)
			reg_free(e, r);
		r = next;
	}
	pthread_mutex_unlock(&e->lock);
}

/* epoll_ctl on a fresh socket s: the kernel's, recorded. */
static int kreg_ctl(int epfd, int op, int fd, struct sc_sock *s, struct epoll_event *ev)
{
	int rc = R(epoll_ctl)(epfd, op, fd, ev);
	struct sc_ep *f = ep_of(epfd);
	if (rc < 0 || !f)
		return rc;      /* (a set we did not see made: not recorded) */
	pthread_mutex_lock(&f->lock);
	struct sc_epreg *r = reg_find(f, fd);
	if (r && (r->s != s || !r->kernel)) {
		reg_free(f, r);         /* the fd number named another socket */
		r = NULL;
	}
	if (op == EPOLL_CTL_ADD && !r && (r = calloc(1, sizeof(*r)))) {
		r->fd = fd;
		r->s = s;
		r->ep = f;
		r->wfd[0] = r->wfd[1] = -1;
		if (reg_link(f, r) < 0) {
			free(r);
		} else {
			pthread_mutex_lock(&kreg_lock);
			r->kernel = true;
			r->knext = atomic_load_explicit(&s->kregs, memory_order_relaxed);
			/* (pairs with the hints' acquire loads) */
			atomic_store_explicit(&s->kregs, r, memory_order_release);
			pthread_mutex_unlock(&kreg_lock);
		}
	}
	if (r && op != EPOLL_CTL_DEL) {
		r->events = ev->events;
		r->data = ev->data;
	} else if (r) {
		reg_free(f, r);
	}
	pthread_mutex_unlock(&f->lock);
	/* connected meanwhile by another thread, whose connect() may have
	 * looked for records before this one was made */
	ep_kregs_follow(s);
	return rc;
}

/* Has the kernel's set epfd disabled fd's EPOLLONESHOT registration (it
 * reported, and no MOD re-armed it)?  The set's fdinfo lists each entry's
 * events, which the kernel clears but for its private bits when it fires. */
static bool kernel_oneshot_off(int epfd, int fd)
{
	char path[64], buf[4096];
	size_t have = 0;
	ssize_t n;
	bool found = false, off = false;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epfd);
	int pf = open(path, O_RDONLY | O_CLOEXEC);
	if (pf < 0)
		return false;
	while (!found && (n = R(read)(pf, buf + have, sizeof(buf) - 1 - have)) > 0) {
		have += (size_t)n;
		buf[have] = 0;
		char *line = buf, *nl;
		while (!found && (nl = strchr(line, '\n'))) {
			int tfd;
			unsigned evs;
			*nl = 0;
			if (sscanf(line, "tfd: %d events: %x", &tfd, &evs) == 2 && tfd == fd) {
				found = true;
				off = !(evs & ~(unsigned)(EPOLLONESHOT | EPOLLET | EPOLLWAKEUP |
							 EPOLLEXCLUSIVE));
			}
			line = nl + 1;
		}
		have = strlen(line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0;       /* (no line is that long) */
	}
	R(close)(pf);
	return off;
}

/* ep_life held for reading: s's record r (of fd, in e) leaves s's list.
 * take: it becomes ours (s is pending or on shared memory), else only the
 * record goes. */
static void kreg_follow(struct sc_ep *e, struct sc_epreg *r, int fd, struct sc_sock *s, bool take)
{
	/* the set's shadow first (it registers in the kernel's set) */
	if (take && !ep_shadow(e)) {
		LOG(1, "an epoll registration made before connect stays the kernel's");
		take = false;   /* (no memory or fds; or the set is closing) */
	}
	pthread_mutex_lock(&e->lock);
	if (reg_find(e, fd) != r || !r->kernel || r->s != s) {
		pthread_mutex_unlock(&e->lock);
		return;         /* freed meanwhile: off the list already */
	}
	bool off = take && (r->events & EPOLLONESHOT) && kernel_oneshot_off(e->fd, fd);
	if (!take || R(epoll_ctl)(e->fd, EPOLL_CTL_DEL, fd, NULL) < 0) {
		reg_free(e, r);
		pthread_mutex_unlock(&e->lock);
		return;
	}
	pthread_mutex_lock(&kreg_lock);
	kreg_unlink(r);
	pthread_mutex_unlock(&kreg_lock);
	reg_start(e, r, r->events, r->data, off);
	pthread_mutex_unlock(&e->lock);
	/* seq_cst: the load of Dekker's pattern with ep_sleep_prepare
	 * (epoll_wait.c): our change before it, the sleeper's count before
	 * its look */
	if (atomic_load_explicit(&e->sleepers, memory_order_seq_cst))
		ep_wake_sleepers(e);    /* (as epoll_ctl: see there) */
	if (e->exposed)
		ep_expose(e);
}

/* s's records each follow it (release: the socket is gone, only the
 * records go).  No lock held. */
static void kregs_each(struct sc_sock *s, bool release)
{
	KEEP_ERRNO();
	pthread_rwlock_rdlock(&ep_life);        /* the records' sets stay */
	for (;;) {
		pthread_mutex_lock(&kreg_lock);
		struct sc_epreg *r = atomic_load_explicit(&s->kregs, memory_order_relaxed);
		struct sc_ep *e = r ? r->ep : NULL;
		int fd = r ? r->fd : -1;
		pthread_mutex_unlock(&kreg_lock);
		if (!r)
			break;
		int mode = sock_mode(s);
		kreg_follow(e, r, fd, s, !release && (mode == M_PENDING || mode == M_SHM) &&
					sock_ours(s));
	}
	pthread_rwlock_unlock(&ep_life);
}

/* The last fd of s closed: its records go (the kernel's registrations
 * go with the socket). */
void ep_kregs_drop(struct sc_sock *s)
{
	kregs_each(s, true);
}

/* s is no longer fresh (connect() decided, or it listens): the
 * registrations made while it was follow it.  No lock held.  Called
 * after each side's store (connect: the mode; kreg_ctl: s->kregs): the
 * fence makes one of the two see the other's (Dekker's pattern), so that
 * no registration is left behind. */
void ep_kregs_follow(struct sc_sock *s)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&s->kregs, memory_order_acquire) && !sock_fresh(s))
		kregs_each(s, false);
}

SC_API int epoll_create(int size)
{
	int fd = R(epoll_create)(size);
	ep_created(fd);
	return fd;
}

SC_API int epoll_create1(int flags)
{
	int fd = R(epoll_create1)(flags);
	ep_created(fd);
	return fd;
}

/* An epoll set of the program's going into another one (fd is a set):
 * the outer set gets a shadow that checks it before reporting, and the
 * kernel's set knows it by a cookie of ours (the program's data may be
 * another fd's too). */
static int nested_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct sc_ep *o = op == EPOLL_CTL_DEL || !ev ? NULL : ep_get(epfd, op == EPOLL_CTL_ADD);
	if (o) {
		pthread_mutex_lock(&o->lock);
		uint64_t had = ep_nest_cookie(o, fd);
		ep_nest_set(o, fd, EPOLL_CTL_ADD, ev->data.u64);
		struct epoll_event kev = *ev;
		kev.data.u64 = ep_nest_cookie(o, fd);
		int rc = kev.data.u64 ? R(epoll_ctl)(epfd, op, fd, &kev)
				      : R(epoll_ctl)(epfd, op, fd, ev);
		if (rc < 0 && !had) {
			KEEP_ERRNO();
			ep_nest_set(o, fd, EPOLL_CTL_DEL, 0);
		}
		pthread_mutex_unlock(&o->lock);
		if (rc == 0)
			ep_expose_fd(fd);
		return rc;
	}
	int rc = R(epoll_ctl)(epfd, op, fd, ev);
	if (rc == 0 && op == EPOLL_CTL_DEL && (o = ep_get(epfd, false))) {
		pthread_mutex_lock(&o->lock);
		ep_nest_set(o, fd, EPOLL_CTL_DEL, 0);
		pthread_mutex_unlock(&o->lock);
	}
	return rc;
}

/* fd's registration in our shadow of e, with e locked; NULL (e unlocked)
 * if there is none, or only a stale one (the fd number now names another
 * socket, or it records a registration of the kernel's). */
static struct sc_epreg *reg_held(struct sc_ep *e, int fd, struct sc_sock *s)
{
	pthread_mutex_lock(&e->lock);
	struct sc_epreg *r = reg_find(e, fd);
	if (r && (r->s != s || r->kernel)) {
		reg_free(e, r);
		r = NULL;
	}
	if (!r)
		pthread_mutex_unlock(&e->lock);
	return r;
}

/* A registration our shadow does not hold yet: is it ours to make (an ADD
 * of a socket pending or on shared memory), rather than the kernel's?  A
 * socket accepted but not claimed is settled first; one on shared memory
 * goes back to TCP if a child waits in the set too (it can only see a
 * kernel socket, so long as it lives). */
static bool ctl_ours(int epfd, int op, int fd, struct sc_sock *s, const struct epoll_event *ev)
{
	if (!s || op != EPOLL_CTL_ADD || !ev)
		return false;
	enum sc_route rt = sock_route(fd, s);
	struct sc_ep *f = ep_of(epfd);
	/* seq_cst (kept; acquire would do): set by ep_switched (epoll_set.c)
	 * in the switch thread */
	if ((rt == RT_SHM || rt == RT_INHERITED) && f && atomic_load_explicit(&f->child_used,
			memory_order_seq_cst)) {
		if (child_may_hold(0)) {
			sock_switch(fd, s);
			rt = sock_where(s);
		} else {
			atomic_store_explicit(&f->child_used, false, memory_order_seq_cst);
		}
	}
	return rt == RT_PENDING || rt == RT_SHM || rt == RT_INHERITED;
}

/* A new, dormant registration of fd in epfd's shadow (made now: that
 * registers the cookie in epfd, and the kernel checks epfd there: EBADF,
 * EINVAL), linked, with *ep locked; NULL with errno set. */
static struct sc_epreg *reg_new_locked(struct sc_ep **ep, int epfd, int fd, struct sc_sock *s)
{
	struct sc_ep *e = *ep = ep_get(epfd, true);
	if (!e)
		return NULL;
	struct sc_epreg *r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->fd = fd;
	r->s = s;
	r->deleted = true;
	r->wfd[0] = r->wfd[1] = -1;
	pthread_mutex_lock(&e->lock);
	if (reg_find(e, fd) || reg_link(e, r) < 0) {
		/* (another thread registered it meanwhile: the kernel
		 * would have told one of us EEXIST) */
		bool dup = reg_find(e, fd);
		pthread_mutex_unlock(&e->lock);
		free(r);
		errno = dup ? EEXIST : ENOMEM;
		return NULL;
	}
	return r;
}

/* ADD, DEL or MOD of a registration of ours (e locked), by the kernel's
 * rules: 0 or -errno.  A deleted registration stays (dormant, its watch
 * in place) so that the DEL/ADD pairs event loops make per request cost
 * no system call; *unbind: it held a shared channel, which it may now
 * have to let go of (reg_let_go). */
static int reg_op(struct sc_ep *e, struct sc_epreg *r, int op, const struct epoll_event *ev,
		  bool *unbind)
{
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!r->deleted)
			return -EEXIST;
		/* the kernel's rule: EPOLLEXCLUSIVE goes with these only */
		if ((ev->events & EPOLLEXCLUSIVE) &&
		    (ev->events & ~(uint32_t)(EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP |
					      EPOLLET | EPOLLEXCLUSIVE)))
			return -EINVAL;
		reg_start(e, r, ev->events, ev->data, false);
		return 0;
	case EPOLL_CTL_DEL:
		if (r->deleted)
			return -ENOENT;
		r->deleted = true;
		*unbind = r->shared && !r->second;     /* (a second channel stays) */
		return 0;
	case EPOLL_CTL_MOD:
		if (r->deleted)
			return -ENOENT;
		if (!ev || (ev->events & EPOLLEXCLUSIVE) || r->exclusive)
			return -EINVAL;
		r->events = ev->events & ~EPOLLWAKEUP;
		r->data = ev->data;
		r->disabled = false;
		r->force_edge = true;   /* polled afresh: an edge if ready */
		check_add(e, r);
		fired_add(e, r);        /* re-arm for the new interest before sleeping */
		return 0;
	default:
		return -EINVAL;
	}
}

/* A deleted registration (token) of s, whose shared channel another set
 * watches it through (which only our waits arm): unless another live
 * entry of ours holds it (a dup'd fd), every entry of the chain lets go
 * of the channel for good, and is watched anew if it is ADDed again. */
static void reg_let_go(struct sc_ep *e, struct sc_epreg *r, struct sc_sock *s, uint64_t token)
{
	pthread_mutex_lock(&e->lock);
	struct sc_epreg *q = reg_of_token(e, token);
	bool sibs = false;
	if (q && s->c)
		for (struct sc_epreg *x = sc_conn_user(s->c); x; x = x->sib)
			sibs |= x != r && !x->deleted;
	if (q && r->deleted && r->shared && s->c && !sibs) {
		for (struct sc_epreg *x = sc_conn_user(s->c), *nx; x; x = nx) {
			nx = x->sib;
			x->sib = NULL;
			if (x != r) {
				x->shared = false;
				reg_unwatch(e, x);
			}
		}
		sc_conn_set_user(s->c, NULL);
		sc_chan_bind(s->c, NULL);
		r->shared = false;
		reg_unwatch(e, r);
	}
	pthread_mutex_unlock(&e->lock);
	ep_rewatch(e, &s, 1);
}

/* After an operation (rc) on a registration of e (no lock held): the
 * sleepers, the channel let go of (unbind), the exposed set; errno is the
 * program's. */
static void ctl_done(struct sc_ep *e, struct sc_epreg *r, struct sc_sock *s, int op, int rc,
		     bool unbind, uint64_t token)
{
	KEEP_ERRNO();
	/* seq_cst: the load of Dekker's pattern with ep_sleep_prepare
	 * (epoll_wait.c): our change before it, the sleeper's count before
	 * its look */
	if (rc == 0 && op != EPOLL_CTL_DEL && atomic_load_explicit(&e->sleepers,
			memory_order_seq_cst))
		/* another thread is asleep in the kernel's wait on this set
		 * (in ours, or passed through before the set had a shadow):
		 * the kernel would wake it for an entry ready now, and for
		 * the next event of this one */
		ep_wake_sleepers(e);
	if (unbind && ep_elsewhere(e, s))
		reg_let_go(e, r, s, token);
	if (e->exposed)
		ep_expose(e);   /* watched from outside: readable as its entries now are */
}

SC_API int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (atomic_load_explicit(&ep_inh, memory_order_relaxed))
		ep_inherited_use(ep_of(epfd));
	if (ep_of(fd))
		return nested_ctl(epfd, op, fd, ev);

	struct sc_sock *s = sock_get(fd);
	if (s && (atomic_load_explicit(&s->kregs, memory_order_acquire) ||
		  (op == EPOLL_CTL_ADD && sock_fresh(s)))) {
		if (sock_fresh(s))
			return kreg_ctl(epfd, op, fd, s, ev);
		ep_kregs_follow(s);     /* (connected in another thread) */
	}
	struct sc_ep *e = ep_get(epfd, false);
	if (!e && s && atomic_load_explicit(&neps, memory_order_acquire) && !ep_of(epfd))
		e = ep_copy_of(epfd, false);    /* a copy of a set of ours we did not see made? */
	struct sc_epreg *r = e ? reg_held(e, fd, s) : NULL;
	if (!r) {
		if (!ctl_ours(epfd, op, fd, s, ev))
			return R(epoll_ctl)(epfd, op, fd, ev);
		if (fd == epfd) {
			errno = EINVAL;
			return -1;
		}
		if (!(r = reg_new_locked(&e, epfd, fd, s)))
			return -1;
	}
	bool unbind = false;
	int rc = reg_op(e, r, op, ev, &unbind);
	uint64_t token = reg_token(r);  /* (r may be freed once we unlock) */
	pthread_mutex_unlock(&e->lock);
	ctl_done(e, r, s, op, rc, unbind, token);
	return (int)sc_ret(rc);
}

/* Connections in socks left a channel that other sets watched them
 * through: those sets (but except) watch them anew, on their own channel. */
void ep_rewatch(struct sc_ep *except, struct sc_sock **socks, size_t n)
{
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *o = eps; o; o = o->next) {
		if (o == except)
			continue;
		pthread_mutex_lock(&o->lock);
		struct sc_epreg *r = o->regs;
		while (r) {
			struct sc_epreg *next = r->next;        /* r may be freed */
			for (size_t i = 0; i < n; i++)
				if (r->s == socks[i] && r->kind == M_SHM && !r->shared && !r->deleted) {
					bool gone;
					reg_unwatch(o, r);
					reg_eval(o, r, &gone);  /* binds it here now */
					if (!gone)
						check_add(o, r);
					break;
				}
			r = next;
		}
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&eps_lock);
}

/* Is s registered in a set other than e? */
bool ep_elsewhere(struct sc_ep *e, struct sc_sock *s)
{
	bool found = false;
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *o = eps; o && !found; o = o->next) {
		if (o == e)
			continue;
		pthread_mutex_lock(&o->lock);
		for (struct sc_epreg *r = o->regs; r && !found; r = r->next)
			found = r->s == s && !r->deleted && !r->kernel;
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&eps_lock);
	return found;
}
