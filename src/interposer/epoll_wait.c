/* SPDX-License-Identifier: MIT */
/*
 * epoll waits: re-arm, collect, evaluate, sleep; sets nested in other
 * sets or polled (exposed).
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
#include "rawsys.h"
#include "ring.h"
#include "rundir.h"
#include "stats.h"
#include "txrx.h"
#include "epoll.h"

_Atomic int nexp_sig;
/* sig_out of a pending client's entry: room ran out (sends the buffer
 * could not take, looks that found it wanting) as many times */
static uint64_t pending_room(const struct sc_epreg *r)
{
	return (uint64_t)r->s->pnospace + r->unwritable;
}

/* EPOLLET: ev if the state (reg_sig, taken before ev) changed since last
 * reported in a way the entry wants to hear of (new data, new room, a new
 * state, as the kernel's wake-ups are; room when only input is wanted is
 * no edge; a hang-up or error only when the state changed); an edge
 * reports the whole present mask, as the kernel's does (a data arrival
 * gives IN|OUT to an entry that wants both).  commit records it. */
static uint32_t reg_edge(struct sc_epreg *r, uint32_t ev, const uint64_t sig[3], bool commit)
{
	if (!r->s->c || sock_mode(r->s) != M_SHM) {
		/* pending: room is news after it ran out (its connect not
		 * complete, its buffer full), or as ADD or MOD poll it; the
		 * kernel socket's other wake-ups are none of the program's */
		bool edge = r->force_edge ||
			    ((r->events & EPOLLOUT) && pending_room(r) != r->sig_out);
		if (commit) {
			r->force_edge = false;
			r->sig_out = pending_room(r);
		}
		return edge ? ev : 0;
	}
	/* gone to shared memory since it last reported: what a pending
	 * client never reports (data, an end, an error) is news */
	bool edge = r->force_edge ||
		    (r->settled && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLPRI | EPOLLHUP | EPOLLERR |
					  (r->settled_out ? EPOLLOUT : 0)))) ||
		    ((ev & (EPOLLHUP | EPOLLERR)) && sig[2] != r->sig_fl) ||
		    ((r->events & (EPOLLIN | EPOLLRDHUP)) && sig[0] != r->sig_in) ||
		    ((r->events & EPOLLOUT) && sig[1] != r->sig_out);
	if (commit) {
		r->sig_in = sig[0];
		r->sig_out = sig[1];
		r->sig_fl = sig[2];
		r->force_edge = false;
		r->settled = false;
	}
	return edge ? ev : 0;
}

/* This thread's wait left an entry on the check list unreported: no room
 * for it, or news of one it reported already (r->seen == call), which
 * the next call reports (ep_leave_armed wakes a sleeper for it). */
static __thread bool ep_left;

/* Evaluate the check list into out[n..max); returns the new n. */
static int ep_harvest(struct sc_ep *e, struct epoll_event *out, int n, int max, uint64_t call)
{
	pthread_mutex_lock(&e->lock);
	struct sc_epreg *list = e->check;
	e->check = NULL;
	while (list) {
		struct sc_epreg *r = list;
		list = r->cnext;
		r->listed = false;
		if (r->disabled || r->deleted)
			continue;
		if (n >= max || r->seen == call) {
			check_add(e, r);
			ep_left = true;
			continue;
		}
		bool gone;
		uint64_t sig[3];
		int kind = r->kind;
		reg_sig(r, sig);
		uint32_t ev = reg_eval(e, r, &gone);
		if (!gone && r->kind != kind)
			reg_sig_settled(r, sig);
		if (!gone && r->foreign && !r->listed)
			check_add(e, r);        /* its wake-ups may be another set's */
		if (gone || !ev)
			continue;
		if ((r->events & EPOLLET) && !(ev = reg_edge(r, ev, sig, true)))
			continue;
		out[n].events = ev;
		out[n].data = r->data;
		n++;
		r->seen = call;
		if (r->events & EPOLLONESHOT)
			r->disabled = true;
		else if (!(r->events & EPOLLET))
			check_add(e, r);        /* level: ask again next time */
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

/* Re-arm every connection signalled since it was last armed, and queue it
 * for a look (armed first, then looked at); collect the channel, arming
 * its cells too when about to sleep.  Returns whether any was queued. */
bool ep_arm(struct sc_ep *e, bool sleep)
{
	bool any = false;
	pthread_mutex_lock(&e->lock);
	while (e->fired) {
		struct sc_epreg *r = e->fired;
		e->fired = r->fnext;
		r->fired = false;
		struct sc_sock *s = r->s;
		if (sock_where(s) == RT_SHM) {
			if (!r->shared)
				sc__chan_rearm_poll(s->c);
			sc__conn_poll_arm(s->c, (r->events & EPOLLOUT) ||
					  (r->second && s->c->polled_out));
		}
		check_add(e, r);
		any = true;
	}
	/* anything that came meanwhile (and the cells armed, to sleep) */
	if (ep_collect(e, sleep))
		any = true;
	pthread_mutex_unlock(&e->lock);
	return any;
}

/*
 * A set watched from outside (nested in another epoll set, or polled) is not
 * armed by our epoll_wait while the program sleeps elsewhere: arm its
 * channel now, and make its fd readable in the kernel if a registration is
 * ready already (the kernel's rule: an epoll fd is readable while it has
 * ready entries).  Called when it is added to a set or polled, and at the
 * end of each of its own epoll_waits.
 */
static bool ep_ready_now(struct sc_ep *e)
{
	bool ready = false;
	struct sc_epreg *r = e->check;
	while (r && !ready) {
		struct sc_epreg *next = r->cnext;       /* r may be freed */
		bool gone;
		uint32_t ev;
		uint64_t sig[3];
		int kind = r->kind;
		reg_sig(r, sig);
		if (!r->disabled && !r->deleted && (ev = reg_eval(e, r, &gone)) &&
		    (r->kind == kind || (reg_sig_settled(r, sig), true)) &&
		    (!(r->events & EPOLLET) || reg_edge(r, ev, sig, false)))
			ready = true;
		r = next;
	}
	return ready;
}

void ep_hold(struct sc_ep *e, bool ready)
{
	if (ready != e->held) {
		e->held = ready;
		/* relaxed: its readers read it relaxed (a fast path) */
		atomic_fetch_add_explicit(&nexp_sig, ready ? 1 : -1, memory_order_relaxed);
	}
}

static void ep_expose_depth(struct sc_ep *e, int depth);

/* The sets nested in e, armed and made readable as they should be. */
static void ep_expose_nests(struct sc_ep *e, int depth)
{
	int nests[8], nk = 0;
	if (!e->nests || depth >= 5)     /* the kernel nests no deeper */
		return;
	pthread_mutex_lock(&e->lock);
	for (struct sc_epnest *k = e->nests; k && nk < 8; k = k->next)
		nests[nk++] = k->fd;
	pthread_mutex_unlock(&e->lock);
	pthread_rwlock_rdlock(&ep_life);
	for (int i = 0; i < nk; i++) {
		struct sc_ep *k = ep_get(nests[i], false);
		if (k && k != e && k->exposed)
			ep_expose_depth(k, depth + 1);
	}
	pthread_rwlock_unlock(&ep_life);
}

static void ep_expose_depth(struct sc_ep *e, int depth)
{
	/* the sets nested in it first: their readiness is part of its own */
	ep_expose_nests(e, depth);
	pthread_mutex_lock(&e->lock);
	if (ep_chan_ensure(e) < 0) {
		pthread_mutex_unlock(&e->lock);
		return;
	}
	pthread_mutex_unlock(&e->lock);
	ep_arm(e, false);
	pthread_mutex_lock(&e->lock);
	bool ready = ep_ready_now(e);
	if (ready) {
		/* armed without a reset: the fd stays readable, and the
		 * next arrival signals it again (a new edge for an EPOLLET
		 * watcher, as the kernel gives one per arrival) */
		sc__chan_arm_keep(e->ch);
		if (!sc__chan_readable(e->ch))
			sc__chan_signal(e->ch);
	} else {
		/* a wake-up left readable by an earlier arm_keep, or for an
		 * entry since deleted or drained: reset, then arm */
		sc__chan_reset(e->ch);
		pthread_mutex_unlock(&e->lock);
		ep_arm(e, true);
		pthread_mutex_lock(&e->lock);
		if ((ready = ep_ready_now(e)))
			sc__chan_signal(e->ch);
	}
	ep_hold(e, ready);
	pthread_mutex_unlock(&e->lock);
}

void ep_expose(struct sc_ep *e)
{
	ep_expose_depth(e, 0);
}

/* An event the kernel reported for a set nested in e (data as registered):
 * is that set really ready?  Its channel may hold a wake-up for a
 * connection since deleted or drained. */
static bool ep_nest_ready(struct sc_ep *e, uint64_t *data)
{
	int fd = -1;
	pthread_mutex_lock(&e->lock);
	for (struct sc_epnest *k = e->nests; k; k = k->next)
		if (k->cookie == *data) {
			fd = k->fd;
			*data = k->data;        /* the program's */
		}
	pthread_mutex_unlock(&e->lock);
	if (fd < 0)
		return false;           /* deleted meanwhile */
	pthread_rwlock_rdlock(&ep_life);
	struct sc_ep *k = fd >= 0 ? ep_get(fd, false) : NULL;
	if (k && k != e)
		ep_expose(k);
	pthread_rwlock_unlock(&ep_life);
	if (!k || k == e)
		return true;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return R(poll)(&p, 1, 0) > 0;
}

/* e->lock held: remember (or forget) a set nested in e. */
void ep_nest_set(struct sc_ep *e, int fd, int op, uint64_t data)
{
	static _Atomic uint32_t next_id;
	struct sc_epnest **pp = &e->nests, *k;
	while ((k = *pp) && k->fd != fd)
		pp = &k->next;
	if (op == EPOLL_CTL_DEL) {
		if (k) {
			*pp = k->next;
			free(k);
		}
		return;
	}
	if (!k && (k = calloc(1, sizeof(*k)))) {
		k->fd = fd;
		/* relaxed: a unique number */
		k->cookie = nest_cookie(atomic_fetch_add_explicit(&next_id, 1,
				memory_order_relaxed));
		k->next = e->nests;
		e->nests = k;
	}
	if (k)
		k->data = data;
}

/* e->lock held: the kernel set's data for the nested set fd (0: none). */
uint64_t ep_nest_cookie(struct sc_ep *e, int fd)
{
	for (struct sc_epnest *k = e->nests; k; k = k->next)
		if (k->fd == fd)
			return k->cookie;
	return 0;
}

/* Bytes were read from an accelerated fd while an exposed set is held
 * readable: look again, as the kernel's nested poll would (LT: a set with
 * nothing ready left is not readable). */
void ep_refresh_exposed(void)
{
	struct sc_ep *list[16];
	int n = 0;
	KEEP_ERRNO();

	pthread_rwlock_rdlock(&ep_life);
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *e = eps; e && n < 16; e = e->next)
		if (e->exposed && e->held)
			list[n++] = e;
	pthread_mutex_unlock(&eps_lock);
	for (int i = 0; i < n; i++)
		ep_expose(list[i]);
	pthread_rwlock_unlock(&ep_life);
}

/* fd is watched from outside (epoll_ctl into another set, poll, select):
 * if it is an epoll set of the program's, expose it. */
void ep_expose_fd(int fd)
{
	struct sc_ep *f = ep_of(fd);
	if (!f)
		return;
	f->exposed = true;
	pthread_rwlock_rdlock(&ep_life);
	struct sc_ep *e = ep_get(fd, false);
	if (e) {
		KEEP_ERRNO();
		ep_expose(e);
	}
	pthread_rwlock_unlock(&ep_life);
}

static int ep_wait(struct sc_ep *e, int epfd, struct epoll_event *out, int max, int timeout,
		   const sigset_t *mask);

struct inh_nest inh_nests[64];
int n_inh_nests;

/* A kernel event with one of the cookies of a process sharing the set:
 * the data to report for it (a nested set we inherited), or false to drop
 * it (the other process's inner set, or a nested set we know nothing of). */
static bool cookie_inherited(uint64_t *data)
{
	if (!is_nest_cookie(*data))
		return false;
	for (int j = 0; j < n_inh_nests; j++)
		if (inh_nests[j].cookie == *data) {
			*data = inh_nests[j].data;
			return true;
		}
	return false;
}

/* The kernel's wait in ms.  One that cannot sleep (0) is made with the
 * instruction: glibc makes a cancellation point of epoll_wait, and in a
 * process with more than one thread (ours has the control thread, a
 * program alone would not) it enables and disables asynchronous
 * cancellation around the call: 15% of an idle epoll_wait(0) on a set of
 * 10,001 entries (perf).  A cancellation already pending is acted on
 * first, as the point would (pthread_testcancel). */
static int kernel_wait_ms(int epfd, struct epoll_event *out, int max, int ms,
			  const sigset_t *mask)
{
	if (ms == 0) {
		pthread_testcancel();
		return (int)SC_SYSCALL(SYS_epoll_pwait, epfd, out, max, 0, mask, _NSIG / 8);
	}
	return mask ? R(epoll_pwait)(epfd, out, max, ms, mask) : R(epoll_wait)(epfd, out, max, ms);
}

/* The kernel's wait itself: epoll_pwait2 with the program's own timespec
 * where it gave one (ms == EP_TS), else in ms. */
#define EP_TS INT_MIN
static int kernel_wait(int epfd, struct epoll_event *out, int max, int ms,
		       const struct timespec *ts, const sigset_t *mask)
{
	if (ms == EP_TS)
		return R(epoll_pwait2)(epfd, out, max, ts, mask);
	return kernel_wait_ms(epfd, out, max, ms, mask);
}

/* A zero-timeout poll walks 1 + (the channel's cells): once polls in a row
 * that found nothing have walked this many, the channel is armed (sockbench
 * setup: a walk of 41 cells ~200 ns; a wake-up's datagram and drain ~2-3
 * us, paid by the sender, on its path, for the first event after that).
 * Only with EP_ARM_IDLE_CELLS cells or more: a walk of a few cells costs
 * less than arming would cost a busy poller's peers (a Python poll(0)
 * echo server with one peer made that peer send a datagram per request). */
#define EP_ARM_IDLE_WALK 4096
#define EP_ARM_IDLE_CELLS 8
/* A poll on a quiet channel walks anyway once in this many: a token
 * taken without its datagram (a waker killed in between) delays an event
 * by that many polls at most, not for ever */
#define EP_QUIET_WALK 64

static int ms_left(uint64_t end)
{
	if (end == UINT64_MAX)
		return -1;
	uint64_t now = sc__now_ns();
	return now >= end ? 0 : (int)((end - now + 999999) / 1000000);
}

/*
 * A wait on a set with no shadow of ours (or an fd we know nothing of):
 * the kernel's, but no cookie may reach the program.  A cookie of ours
 * means the set got a shadow while we slept (another thread registered an
 * accelerated fd) or is a copy of a shadowed set we did not see made: the
 * wait goes on through the shadow.  Another process's (a set shared across
 * fork) is dropped, or translated (a nested set we inherited).
 */
static int ep_kernel_wait(struct sc_ep *f, int epfd, struct epoll_event *out, int max,
			  int timeout, const struct timespec *ts, const sigset_t *mask)
{
	uint64_t end = UINT64_MAX;
	if (timeout >= 0)
		end = sc__now_ns() + (uint64_t)timeout * 1000000u;
	else if (timeout == EP_TS)
		end = sc__now_ns() + (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
	int t = timeout, backoff = 1;
	for (;;) {
		if (f && t)
			/* seq_cst: Dekker's pattern: our count before our
			 * look at the set (ep_sleep_prepare); a
			 * registration's change before its load of sleepers
			 * (epoll_ctl) */
			atomic_fetch_add_explicit(&f->sleepers, 1, memory_order_seq_cst);
		int k = kernel_wait(epfd, out, max, t, ts, mask);
		if (f && t)
			/* (relaxed: done sleeping; a stale count costs a wake-up) */
			atomic_fetch_sub_explicit(&f->sleepers, 1, memory_order_relaxed);
		if (k <= 0)
			return k;
		int m = 0;
		uint64_t ours = 0;
		for (int i = 0; i < k; i++) {
			uint64_t v = out[i].data.u64;
			if ((is_cookie(v) || is_nest_cookie(v)) && cookie_mine(v)) {
				ours = v;
				continue;
			}
			if (is_cookie(v) || (is_nest_cookie(v) && !cookie_inherited(&v)))
				continue;
			out[m] = out[i];
			out[m++].data.u64 = v;
		}
		if (ours) {
			/* the set is (a copy of) one of our shadowed sets now */
			struct sc_ep *e = ep_get(epfd, false);
			if (!e)
				e = ep_copy_of(epfd, false);
			if (e) {
				int n = ep_wait(e, epfd, out + m, max - m, m ? 0 : ms_left(end), mask);
				return n < 0 ? (m ? m : -1) : m + n;
			}
		}
		if (m)
			return m;
		/* only cookies: wait on, for the time left.  Another process's
		 * inner set stays readable until that process waits (a set
		 * shared across fork): the kernel would hand it back at once,
		 * so look again after a pause that grows to 16 ms, not in a
		 * spin (a real event waits at most that long then) */
		t = ms_left(end);
		ts = NULL;
		if (t == 0)
			return 0;
		if (!ours) {
			int pause = backoff < t || t < 0 ? backoff : t;
			struct timespec ps = { 0, (long)pause * 1000000L };
			nanosleep(&ps, NULL);
			backoff = backoff < 16 ? backoff * 2 : 16;
			t = ms_left(end);
		}
	}
}

/* How often a spinning wait looks at the kernel's part of the set. */
#define SPIN_KERNEL_NS 2000u

/*
 * Before a wait sleeps: spin for the set's budget (SHORTCUT_SPIN_US,
 * learnt per set as a blocking receive learns it: spin.c), looking at the
 * channel and the check list as a call does.  A peer's bytes that come
 * within it are found without the sleep, the peer's wake-up datagram and
 * its reading: an event loop's request and its answer otherwise cost a
 * wake-up each way, as they do on kernel TCP (redis-benchmark -c 1 ran at
 * 1.0x kernel TCP's rate, sockbench's blocking round trip at 220x).  The
 * program's own fds in the set are looked at through the kernel's set
 * every SPIN_KERNEL_NS (poll of the epoll fd: readable while anything is
 * ready in it), and anything there ends the spin; none of the channel is
 * armed meanwhile, so a peer sends nothing.  Not on a crowded machine (a
 * spinner would take the CPU its peer needs).  Returns n plus the events
 * found.
 */
static int ep_spin(struct sc_ep *e, int epfd, struct epoll_event *out, int n, int max,
		   uint64_t call)
{
	uint32_t b = e->ch ? sc__spin_class_budget(&e->spin) : 0;
	if (!b || sc__spin_crowded())
		return n;
	uint64_t t0 = sc__now_ns(), looked = t0;
	bool hit = false;
	for (unsigned i = 1;; i++) {
		sc__cpu_relax();
		if (i & 15)
			continue;
		ep_arm(e, false);
		int m = ep_harvest(e, out, n, max, call);
		if (m > n) {
			n = m;
			hit = true;
			break;
		}
		uint64_t now = sc__now_ns();
		if (now - looked >= SPIN_KERNEL_NS) {
			struct pollfd p = { .fd = epfd, .events = POLLIN };
			looked = now;
			if (R(poll)(&p, 1, 0) > 0) {
				hit = true;     /* the kernel's wait has it at once */
				break;
			}
		}
		if (now - t0 >= b)
			break;
	}
	sc__spin_class_done(&e->spin, b, hit);
	return n;
}

static int do_epoll_wait(int epfd, struct epoll_event *out, int max, int timeout,
			 const struct timespec *ts, const sigset_t *mask)
{
	struct sc_ep *f = ep_of(epfd);
	if (!f && atomic_load_explicit(&neps, memory_order_acquire)) {
		/* an epoll fd we did not see made (SCM_RIGHTS): a copy of a
		 * set of ours?  (looked at once: then it is known) */
		ep_copy_of(epfd, true);
		f = ep_of(epfd);
	}
	if (f && atomic_load_explicit(&ep_inh, memory_order_relaxed))
		ep_inherited_use(f);
	struct sc_ep *e = f && f->inner >= 0 ? f : NULL;
	if (!e || max <= 0)
		return ep_kernel_wait(f, epfd, out, max, timeout, ts, mask);
	if (timeout == EP_TS) {
		/* our sets wait in milliseconds: round up, as the kernel's
		 * epoll_wait does (never wake before the time asked) */
		uint64_t m = (uint64_t)ts->tv_sec * 1000 + ((uint64_t)ts->tv_nsec + 999999) / 1000000;
		timeout = m > INT_MAX ? INT_MAX : (int)m;
	}
	int n = ep_wait(e, epfd, out, max, timeout, mask);
	if (n > 0 && atomic_load_explicit(&e->idle_walk, memory_order_relaxed))
		atomic_store_explicit(&e->idle_walk, 0, memory_order_relaxed);
	if (e->exposed) {
		KEEP_ERRNO();
		ep_expose(e);
	}
	return n;
}

/* A slice of a wait passed with nothing: the entries watching pending
 * clients are looked at again (their offer may have been declined). */
static void ep_check_pending(struct sc_ep *e)
{
	pthread_mutex_lock(&e->lock);
	for (struct sc_epreg *r = e->regs; r; r = r->next)
		if (r->kind == M_PENDING)
			check_add(e, r);
	pthread_mutex_unlock(&e->lock);
}

/* A poll (no wait) that found nothing: once such polls in a row have
 * walked as many cells as a wake-up costs, arm the channel, so that the
 * next ones skip the walk while nothing comes (what comes then costs its
 * waker a system call, as it would if we slept).  Returns n, and what the
 * arming's last look found. */
static int ep_idle_arm(struct sc_ep *e, struct epoll_event *out, int n, int max, uint64_t call)
{
	unsigned w = atomic_load_explicit(&e->idle_walk, memory_order_relaxed) + 1 +
		     (unsigned)sc__chan_cells(e->ch);
	atomic_store_explicit(&e->idle_walk, w, memory_order_relaxed);
	if (w < EP_ARM_IDLE_WALK)
		return n;
	ep_arm(e, true);
	return ep_harvest(e, out, n, max, call);
}

/* About to sleep: counted as a sleeper before the last look, so that a
 * registration made after it wakes us (epoll_ctl looks at sleepers once
 * it has put the new entry on the check list; its connection's bind
 * signals nobody); arm the channel, then look once more (whatever came
 * before the arming is in the collect); nested sets armed too, since
 * nobody waits on them.  Returns n; a sleeper still counted if it is 0. */
static int ep_sleep_prepare(struct sc_ep *e, struct epoll_event *out, int n, int max,
			    uint64_t call)
{
	/* seq_cst: Dekker's pattern: our count before our look at the set
	 * (ep_sleep_prepare); a registration's change before its load of
	 * sleepers (epoll_ctl) */
	atomic_fetch_add_explicit(&e->sleepers, 1, memory_order_seq_cst);
	ep_expose_nests(e, 0);
	ep_arm(e, true);
	n = ep_harvest(e, out, n, max, call);
	if (n)
		/* (relaxed: done sleeping; a stale count costs a wake-up) */
		atomic_fetch_sub_explicit(&e->sleepers, 1, memory_order_relaxed);
	return n;
}

/* The k events the kernel's set reported, into out after n: our cookie
 * (*inner: the inner set has news), another process's (dropped), a
 * nested set's (reported if it has something ready), the program's own.
 * Returns the new n. */
static int ep_kernel_events(struct sc_ep *e, const struct epoll_event *kbuf, int k,
			    struct epoll_event *out, int n, bool *inner)
{
	for (int i = 0; i < k; i++) {
		uint64_t d = kbuf[i].data.u64;
		if (d == e->cookie) {
			*inner = true;
		} else if (is_cookie(d)) {
			continue;       /* another process's (a set shared by fork) */
		} else if (is_nest_cookie(d)) {
			if (cookie_mine(d) ? !ep_nest_ready(e, &d) : !cookie_inherited(&d))
				continue;       /* a nested set with nothing ready */
			out[n] = kbuf[i];
			out[n++].data.u64 = d;
		} else {
			out[n++] = kbuf[i];     /* (the caller's room) */
		}
	}
	return n;
}

/* The inner set has news: a wake-up's datagram (the channel collected, its
 * fd reset now, or every call until we sleep again would find the cookie;
 * the tokens stay taken: no more datagrams while we are awake), or
 * registrations whose fds changed (to look at, and fired). */
/* After this thread took the channel's signal (its fd drained): whether
 * another thread sleeps in the kernel's wait on this set (a Go program's
 * netpoller, while its other threads poll with timeout 0).  Its arming
 * is spent (the waker took the token) and the signal is gone, so unless
 * the channel is armed again now, the next event signals nobody and the
 * sleeper sleeps on with bytes ready.  Read after the drain: a sleeper
 * counted after it arms after it, and its arming stands.  seq_cst: as the
 * sleeper's count (ep_sleep_prepare). */
static bool ep_others_asleep(struct sc_ep *e)
{
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&e->sleepers, memory_order_seq_cst) > 0;
}

static void ep_inner_news(struct sc_ep *e)
{
	struct epoll_event iev[64];
	int m = 1;
	/* no registration's fd in the inner set: its news is the channel's,
	 * and asking it would cost a system call per wake-up.  (Relaxed: one
	 * added meanwhile keeps the inner set readable, and the kernel's set
	 * reports the cookie again at the next wait.) */
	if (atomic_load_explicit(&e->nwatch, memory_order_relaxed))
		m = R(epoll_wait)(e->inner, iev, 64, 0);
	else
		iev[0].data.ptr = (void *)&ep_chan_mark;
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < m; i++) {
		if (iev[i].data.ptr == &ep_chan_mark) {
			if (!atomic_load_explicit(&nforeign, memory_order_relaxed))
				sc__chan_reset(e->ch);
			ep_collect(e, ep_others_asleep(e));
			continue;
		}
		/* still registered? (DEL may have raced) */
		struct sc_epreg *r = reg_of_token(e, iev[i].data.u64);
		if (r) {
			check_add(e, r);
			if (!r->fired) {
				r->fired = true;
				r->fnext = e->fired;
				e->fired = r;
			}
		}
	}
	pthread_mutex_unlock(&e->lock);
}

static int ep_wait_loop(struct sc_ep *e, int epfd, struct epoll_event *out, int max,
			int timeout, const sigset_t *mask, uint64_t *callp);

/*
 * A wait returns while another thread sleeps in the set (a Go netpoller's
 * poller, its sleeper asleep): leave the channel armed for the sleeper, or
 * a wake-up meant for it would not come.  What the arming queues must be
 * looked at too: a connection whose bytes came before its cell (or its
 * poll) was armed signals nobody, and the sleeper's own look is behind it
 * (it slept on with an echo unread, sem_epoll_poller_sleeper, 3 stalls in
 * 80 runs under load).  Looked at here, into the room left; what the room
 * could not take (or a failed wait's) wakes the sleeper, which looks.
 * seq_cst: the load of Dekker's pattern with ep_sleep_prepare.
 */
static int ep_leave_armed(struct sc_ep *e, struct epoll_event *out, int n, int max,
			  uint64_t call)
{
	bool left = ep_left;
	ep_left = false;
	if (!e->ch || !atomic_load_explicit(&e->sleepers, memory_order_seq_cst))
		return n;
	KEEP_ERRNO();
	if (!ep_arm(e, true) && !left)
		return n;
	if (n >= 0)     /* (a failed wait reports nothing) */
		n = ep_harvest(e, out, n, max, call);
	/* what this call left on the check list (no room, or news of an
	 * entry it reported) is the sleeper's to report: nothing else
	 * signals it, the channel's signal was drained by us */
	if (n < 0 || left || ep_left)
		sc__chan_signal(e->ch);
	ep_left = false;
	return n;
}

/* The kernel's wait cut to a slice while a pending client's offer may be
 * declined, which wakes nobody (*sliced: look at it again after
 * PENDING_SLICE_MS, growing).  The timeout to use. */
static int ep_slice(struct sc_ep *e, int t, int *pslice, bool *sliced)
{
	if (t && atomic_load_explicit(&e->npending, memory_order_relaxed) &&
	    (t < 0 || t > *pslice)) {
		t = *pslice;
		*pslice = pending_slice_next(*pslice);
		*sliced = true;
	}
	return t;
}

/* The wait of a set of ours: collect what our channel and registrations
 * have, spin a while, then sleep in the kernel's set (which holds the
 * program's other fds and our cookie), in slices while a pending client's
 * answer may come unannounced; then leave the set armed for the threads
 * still asleep in it.  Returns the events, or -1 with errno. */
static int ep_wait(struct sc_ep *e, int epfd, struct epoll_event *out, int max, int timeout,
		   const sigset_t *mask)
{
	uint64_t call;
	int n = ep_wait_loop(e, epfd, out, max, timeout, mask, &call);
	return ep_leave_armed(e, out, n, max, call);
}

static int ep_wait_loop(struct sc_ep *e, int epfd, struct epoll_event *out, int max,
			int timeout, const sigset_t *mask, uint64_t *callp)
{
	/* (a zero timeout reads no clock: one pass, as the kernel's) */
	uint64_t end = timeout < 0 ? UINT64_MAX : timeout == 0 ? 0 :
		       sc__now_ns() + (uint64_t)timeout * 1000000u;
	int n = 0, pslice = 1;  /* (a pending client's: PENDING_SLICE_MS) */
	bool spun = false;
	/* (relaxed: a number of the call's own, compared under the lock) */
	uint64_t call = *callp = atomic_fetch_add_explicit(&e->calls, 1, memory_order_relaxed) + 1;
	ep_left = false;
	/* nothing signalled, nothing to look at again, and the channel quiet
	 * (armed since its last collect found nothing: whatever became ready
	 * since signals its fd, which the kernel's wait below reports as the
	 * cookie): no collect, no harvest.  Read without the lock (an idle
	 * poll's cost, 10,001 entries: 135 ns against the kernel's 90): what
	 * another thread queues meanwhile races with this call as it would
	 * a moment later, and a wait that sleeps looks again under the lock
	 * first (ep_sleep_prepare).  Every EP_QUIET_WALK-th call walks. */
	bool idle = !__atomic_load_n(&e->fired, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&e->check, __ATOMIC_RELAXED) &&
		    (!e->ch || sc__chan_quiet(e->ch)) && call % EP_QUIET_WALK;
	for (;;) {
		/* re-arm what was signalled and collect the channel at every
		 * call, not only before sleeping: a program that polls with
		 * a zero timeout would otherwise never be told again */
		if (!idle) {
			ep_arm(e, false);
			n = ep_harvest(e, out, n, max, call);
		}
		idle = false;
		if (n >= max)
			return n;
		int t = n || !end ? 0 : end == UINT64_MAX ? -1 : ms_left(end);
		if (!t && !n && e->ch && !sc__chan_quiet(e->ch) &&
		    sc__chan_cells(e->ch) >= EP_ARM_IDLE_CELLS && (n = ep_idle_arm(e, out, n, max, call)))
			return n;
		if (t && !spun) {
			spun = true;
			n = ep_spin(e, epfd, out, n, max, call);
			if (n >= max)
				return n;
			/* what the spin found ends the wait, but the kernel's
			 * part is asked too (no sleep): a pipe or nested set
			 * ready beside a socket is reported with it, as the
			 * kernel's wait reports all that is ready */
			t = n ? 0 : end == UINT64_MAX ? -1 : ms_left(end);
		}
		if (t && (n = ep_sleep_prepare(e, out, n, max, call))) {
			if (n >= max)
				return n;
			t = 0;
		}
		/* in slices where a wake-up may not come (ep_slice) */
		bool sliced = false;
		t = ep_slice(e, t, &pslice, &sliced);
		/* no more than the room left: every event the kernel hands
		 * over fits (an EPOLLET one dropped would be lost); when the
		 * cookie takes a slot, the inner set's entries fill the rest */
		struct epoll_event kbuf[64];
		int room = max - n < 64 ? max - n : 64;
		int k = kernel_wait_ms(epfd, kbuf, room, t, mask);
		if (t)   /* (relaxed: done sleeping) */
			atomic_fetch_sub_explicit(&e->sleepers, 1, memory_order_relaxed);
		if (k < 0)
			return n ? n : -1;
		if (sliced && !k)
			ep_check_pending(e);
		bool inner = false;
		n = ep_kernel_events(e, kbuf, k, out, n, &inner);
		if (inner) {
			ep_inner_news(e);
			/* evaluate them now; the kernel's part is already in
			 * (asking it again would report a level fd twice) */
			n = ep_harvest(e, out, n, max, call);
		}
		if (n || !end || (t >= 0 && sc__now_ns() >= end))
			return n;
	}
}

SC_API int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	return do_epoll_wait(epfd, ev, max, timeout < 0 ? -1 : timeout, NULL, NULL);
}

SC_API int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
		       const sigset_t *mask)
{
	return do_epoll_wait(epfd, ev, max, timeout < 0 ? -1 : timeout, NULL, mask);
}

SC_API int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000))
		return R(epoll_pwait2)(epfd, ev, max, ts, mask);        /* the kernel's EINVAL */
	return do_epoll_wait(epfd, ev, max, ts ? EP_TS : -1, ts, mask);
}
