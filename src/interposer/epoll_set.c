/* SPDX-License-Identifier: MIT */
/*
 * epoll sets: one object per open file description, whatever fds
 * name it; the shadow made for it; fork and close.
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
#include "forkreset.h"

struct ep_inh *_Atomic ep_inh;
/* guards ep_inh; order: docs/interposer.md §6b */
pthread_mutex_t ep_inh_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(ep_inh_lock, LO_ALONE)
/* ---- readiness: epoll ------------------------------------------------------
 *
 * An epoll set that holds accelerated fds gets an inner epoll set of ours,
 * registered in it under a magic cookie.  The inner set watches, per
 * accelerated fd, what signals a change: the connection's pollable fd (or,
 * for a pending client, its attach eventfd and its kernel socket).  When
 * the cookie fires, epoll_wait asks each signalled registration for its
 * real readiness.  Level-triggered registrations that reported stay on a
 * check list and are asked again at every epoll_wait until they are not
 * ready, so a wait costs O(ready), not O(registered).
 */

/* guards eps, neps, ep_pages, each set's fds and shadow; order: docs/interposer.md §6b */
pthread_mutex_t eps_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(eps_lock, LO_EPS)
/* Paths that use a set found by its fd after dropping eps_lock (the exposed
 * and nested-set ones: a read in one thread may expose a set another
 * thread closes) hold this for reading; ep_close frees a set only with it
 * held for writing. */
pthread_rwlock_t ep_life = PTHREAD_RWLOCK_INITIALIZER;       /* order: docs/interposer.md §6b */
SC_LOCK_RANK(ep_life, LO_EP_LIFE)
struct sc_ep *eps;       /* the sets with a shadow */
_Atomic int neps;        /* fast path: no shadow at all */

/* fd -> its epoll set, pages as the socket table's (written under eps_lock) */
static struct sc_ep *_Atomic *_Atomic ep_pages[NPAGES];

struct sc_ep *ep_of(int fd)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return NULL;
	struct sc_ep *_Atomic *p = atomic_load_explicit(&ep_pages[fd >> PAGE_BITS],
						       memory_order_acquire);
	return p ? atomic_load_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], memory_order_acquire)
		 : NULL;
}

/* eps_lock held */
static bool ep_tab_set(int fd, struct sc_ep *e)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return false;
	/* (relaxed: eps_lock held, under which the pages change) */
	struct sc_ep *_Atomic *p = atomic_load_explicit(&ep_pages[fd >> PAGE_BITS],
			memory_order_relaxed);
	if (!p) {
		if (!e)
			return true;
		p = calloc(1u << PAGE_BITS, sizeof(*p));
		if (!p)
			return false;
		atomic_store_explicit(&ep_pages[fd >> PAGE_BITS], p, memory_order_release);
	}
	atomic_store_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], e, memory_order_release);
	return true;
}

/* eps_lock held: fd names e too */
static bool ep_fd_add(struct sc_ep *e, int fd)
{
	if (e->nfds == e->fds_cap) {
		int cap = e->fds_cap ? e->fds_cap * 2 : 4;
		int *p = realloc(e->fds, (size_t)cap * sizeof(*p));
		if (!p)
			return false;
		e->fds = p;
		e->fds_cap = cap;
	}
	if (!ep_tab_set(fd, e))
		return false;
	e->fds[e->nfds++] = fd;
	return true;
}

/* eps_lock held: fd no longer names e; returns how many still do */
static int ep_fd_del(struct sc_ep *e, int fd)
{
	ep_tab_set(fd, NULL);
	for (int i = 0; i < e->nfds; i++)
		if (e->fds[i] == fd) {
			e->fds[i] = e->fds[--e->nfds];
			break;
		}
	if (e->fd == fd && e->nfds)
		e->fd = e->fds[0];
	return e->nfds;
}

/* eps_lock held: a set object for the epoll fd `fd`, no shadow yet */
static struct sc_ep *ep_new(int fd)
{
	struct sc_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->fd = fd;
	e->inner = -1;
	e->spin = (struct sc_spin_class)SC_SPIN_CLASS_INIT;
	pthread_mutex_init(&e->lock, NULL);
	sc__lo_rank(&e->lock, LO_SET, "a set's lock");
	if (!ep_fd_add(e, fd)) {
		free(e->fds);
		free(e);
		return NULL;
	}
	return e;
}

/* Free a set no fd names, whose shadow is gone (no user left: ep_life) */
static void ep_free(struct sc_ep *e)
{
	pthread_mutex_destroy(&e->lock);
	sc__lo_forget(&e->lock);
	free(e->byfd);
	free(e->fds);
	free(e);
}

/* eps_lock held: fd is an epoll fd we did not see made (received with
 * SCM_RIGHTS, made by a raw system call): the set of ours it is a copy of,
 * or a new one.  A copy of a shadowed set holds that set's inner set: the
 * kernel accepts a MOD of it there and nowhere else. */
static struct sc_ep *ep_copy_locked(int fd, bool *is_epoll)
{
	for (struct sc_ep *e = eps; e; e = e->next) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = e->cookie };
		if (R(epoll_ctl)(fd, EPOLL_CTL_MOD, e->inner, &ev) == 0)
			return ep_fd_add(e, fd) ? e : NULL;
		if (errno == ENOENT && is_epoll)
			*is_epoll = true;       /* an epoll set, not that one */
	}
	return NULL;
}

static struct sc_ep *ep_adopt(int fd)
{
	struct sc_ep *e = ep_copy_locked(fd, NULL);
	return e ? e : ep_new(fd);
}

/* eps_lock held: e's shadow, an inner set registered in the kernel's set
 * under a cookie; 0, or -1 with errno (the kernel's EBADF or EINVAL for an
 * fd that is no epoll set) */
static int ep_shadow_locked(struct sc_ep *e)
{
	static _Atomic uint32_t next_id;
	e->inner = sc__fd_park(R(epoll_create1)(EPOLL_CLOEXEC));
	/* relaxed: a unique number, nothing published with it */
	e->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) + 1;
	e->cookie = ep_mkcookie(EP_MAGIC_SET, e->id);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = e->cookie };
	if (e->inner < 0 || R(epoll_ctl)(e->fd, EPOLL_CTL_ADD, e->inner, &ev) < 0) {
		int err = errno;
		if (e->inner >= 0)
			R(close)(e->inner);
		e->inner = -1;
		errno = err;
		return -1;
	}
	e->next = eps;
	eps = e;
	/* seq_cst (kept; release would do): the fast path's acquire loads of neps */
	atomic_fetch_add_explicit(&neps, 1, memory_order_seq_cst);
	return 0;
}

/* The shadowed set of epfd; with create, made if need be (the fd's set
 * object too, if it is a copy we did not see made).  NULL, errno set, if
 * it cannot be (the kernel's EBADF or EINVAL for an fd that is no epoll
 * set). */
struct sc_ep *ep_get(int epfd, bool create)
{
	if (!create) {
		if (!atomic_load_explicit(&neps, memory_order_acquire))
			return NULL;
		struct sc_ep *e = ep_of(epfd);
		return e && e->inner >= 0 ? e : NULL;
	}
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(epfd);
	bool adopted = false;
	if (!e) {
		e = ep_adopt(epfd);
		adopted = e && e->nfds == 1;
	}
	if (e && e->inner < 0 && ep_shadow_locked(e) < 0) {
		int err = errno;
		if (adopted) {          /* no epoll set: forget it */
			ep_fd_del(e, epfd);
			ep_free(e);
		}
		errno = err;
		e = NULL;
	}
	pthread_mutex_unlock(&eps_lock);
	return e;
}

/* The set e, which an fd of the program's names still (not being closed),
 * with its shadow, made if need be; false if it cannot be (errno). */
bool ep_shadow(struct sc_ep *e)
{
	pthread_mutex_lock(&eps_lock);
	int rc = e->nfds ? 0 : -1;
	if (rc < 0)
		errno = EBADF;
	else if (e->inner < 0)
		rc = ep_shadow_locked(e);
	pthread_mutex_unlock(&eps_lock);
	return rc == 0;
}

/* epfd, which names no set we know, is a copy of one of our shadowed sets
 * (received with SCM_RIGHTS): that set, now named by epfd too; or NULL.
 * With known, an epoll set that is no copy of ours is known from now on
 * (so that it is looked at once). */
struct sc_ep *ep_copy_of(int epfd, bool known)
{
	bool is_epoll = false;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(epfd);
	if (!e) {
		e = ep_copy_locked(epfd, &is_epoll);
		if (!e && known && is_epoll)
			ep_new(epfd);
	} else if (e->inner < 0) {
		e = NULL;
	}
	pthread_mutex_unlock(&eps_lock);
	return e;
}

/* An epoll fd the program made (epoll_create*): a set of its own.  The
 * number may have named a set closed behind our back: that is gone. */
void ep_created(int fd)
{
	if (fd < 0)
		return;
	if (ep_of(fd))
		ep_close(fd);
	pthread_mutex_lock(&eps_lock);
	ep_new(fd);
	pthread_mutex_unlock(&eps_lock);
}

/* newfd is a copy of oldfd (dup, dup2, dup3, F_DUPFD): if oldfd names an
 * epoll set, newfd names the same one (the caller closed newfd's old set) */
void ep_dup(int oldfd, int newfd)
{
	if (!ep_of(oldfd) || in_vfork_child())
		return;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(oldfd);
	if (e && ep_of(newfd) != e)
		ep_fd_add(e, newfd);
	pthread_mutex_unlock(&eps_lock);
}

/* fork (in the parent, and the child): every set is now shared with the
 * other process (the kernel's set is one object): its events may carry the
 * other's cookie, which we must drop (ep_wait, ep_kernel_wait). */
void ep_mark_shared(void)
{
	for (unsigned p = 0; p < NPAGES; p++) {
		/* acquire: pairs with the release in ep_tab_set */
		struct sc_ep *_Atomic *pg = atomic_load_explicit(&ep_pages[p],
				memory_order_acquire);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			struct sc_ep *e = atomic_load_explicit(&pg[i], memory_order_relaxed);
			if (e)
				e->shared = true;
		}
	}
}

/* e->lock held */

/* In the child after fork: the shadows are the parent's (their inner sets,
 * channels and entries).  Drop our copies without touching what they name;
 * a set the child uses gets a shadow of its own, under its own cookie. */
/* s went back to TCP: every set of ours that watches it hands it to the
 * kernel's set now, as its next epoll_wait would. */
void ep_switched(struct sc_sock *s, bool child_set)
{
	if (!atomic_load_explicit(&neps, memory_order_acquire))
		return;
	pthread_rwlock_rdlock(&ep_life);
	struct sc_ep *sets[64];
	int n = 0;
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *e = eps; e && n < 64; e = e->next)
		sets[n++] = e;
	pthread_mutex_unlock(&eps_lock);
	for (int i = 0; i < n; i++) {
		struct sc_ep *e = sets[i];
		pthread_mutex_lock(&e->lock);
		struct sc_epreg *r = e->regs;
		while (r) {
			struct sc_epreg *next = r->next;
			if (r->s == s && !r->kernel) {
				struct epoll_event ev = { .events = r->events, .data = r->data };
				if (child_set)
					/* seq_cst (kept; release would do):
					 * read by a later epoll_ctl ADD
					 * (epoll_ctl.c) */
					atomic_store_explicit(&e->child_used, true,
							memory_order_seq_cst);
				/* a fired EPOLLONESHOT entry stays in the set,
				 * silent but for a hang-up, until MOD re-arms it */
				if (r->disabled)
					ev.events = EPOLLONESHOT | EPOLLET;
				/* (the fd may have been closed meanwhile, and
				 * its number reused: then it is gone) */
				if (!r->deleted && sock_get(r->fd) == s)
					R(epoll_ctl)(e->fd, EPOLL_CTL_ADD, r->fd, &ev);
				reg_free(e, r);
			}
			r = next;
		}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_rwlock_unlock(&ep_life);
}

/* In a fork child: the accelerated fds of the sets we inherited (our
 * parent's, registered before the fork; the list is only ever touched by
 * the child's first calls on those sets).  Our first call on such a set
 * has the owner switch them back to TCP, which puts them in the kernel's
 * set that parent and child share. */
void ep_inherited_use(struct sc_ep *e)
{
	struct ep_inh *mine = NULL;
	if (!e)
		return;
	pthread_mutex_lock(&ep_inh_lock);
	/* (relaxed, all: under ep_inh_lock; the list's lock-free reader,
	 * epoll_ctl's look at ep_inh, is a hint) */
	struct ep_inh *_Atomic *pp = &ep_inh, *x;
	while ((x = atomic_load_explicit(pp, memory_order_relaxed))) {
		if (x->ep == e) {
			atomic_store_explicit(pp, atomic_load_explicit(&x->next,
					memory_order_relaxed),
					      memory_order_relaxed);
			atomic_store_explicit(&x->next, mine, memory_order_relaxed);
			mine = x;
		} else {
			pp = &x->next;
		}
	}
	pthread_mutex_unlock(&ep_inh_lock);
	while (mine) {
		x = mine;
		mine = atomic_load_explicit(&x->next, memory_order_relaxed);
		struct sc_sock *s = sock_get(x->fd);
		if (s && sock_mode(s) == M_SHM)
			sw_request_owner_for(x->fd, s, SC_SWREQ_USE | SC_SWREQ_EPOLL, 30000000000ull);
		free(x);
	}
}

_Atomic uint32_t ep_key;

static uint32_t key_new(uint32_t not)
{
	for (;;) {
		uint32_t k = 0;
		if (getentropy(&k, sizeof(k)) < 0)
			k = (uint32_t)sc__now_ns() ^ (uint32_t)sc__pid() * 2654435761u;
		k &= EP_PID_MASK;
		if (k && k != not)
			return k;
	}
}

uint32_t ep_key_get(void)
{
	uint32_t k = atomic_load_explicit(&ep_key, memory_order_relaxed);
	if (k)
		return k;
	uint32_t zero = 0;
	k = key_new(0);
	/* (two threads making it at once: one wins, both use it) */
	/* relaxed: the key alone (nothing published with it; read relaxed) */
	if (!atomic_compare_exchange_strong_explicit(&ep_key, &zero, k,
			memory_order_relaxed, memory_order_relaxed))
		k = zero;
	return k;
}

void ep_atfork_child(void)
{
	/* our cookies are not our parent's, in the sets we share with it */
	/* (relaxed: the fork child's only thread, as the rest of this function) */
	uint32_t old = atomic_load_explicit(&ep_key, memory_order_relaxed);
	if (old)        /* (none yet: ep_key_get makes ours when we need one) */
		atomic_store_explicit(&ep_key, key_new(old), memory_order_relaxed);
	sc__mutex_reset(&eps_lock);
	sc__mutex_reset(&kreg_lock);
	sc__mutex_reset(&ep_inh_lock);
	sc__rwlock_reset(&ep_life);
	struct sc_ep *e = eps;
	SC_RESET(eps, NULL);
	SC_RESET_ATOMIC(neps, 0);
	SC_RESET_ATOMIC(nexp_sig, 0);
	SC_RESET_ATOMIC(nforeign, 0);
	/* the sets are the same objects here (our fds name them), shared */
	for (unsigned p = 0; p < NPAGES; p++) {
		/* acquire: pairs with the release in ep_tab_set */
		struct sc_ep *_Atomic *pg = atomic_load_explicit(&ep_pages[p],
				memory_order_acquire);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			struct sc_ep *f = atomic_load_explicit(&pg[i], memory_order_relaxed);
			if (f) {
				f->shared = true;
				pthread_mutex_init(&f->lock, NULL);
				atomic_store_explicit(&f->sleepers, 0, memory_order_relaxed);
			}
		}
	}
	while (e) {
		struct sc_ep *next = e->next;
		e->next = NULL;
		free(e->byfd);          /* (every registration goes) */
		e->byfd = NULL;
		e->nbyfd = 0;
		while (e->regs) {
			struct sc_epreg *r = e->regs;
			e->regs = r->next;
			struct ep_inh *x;
			if (r->kernel)
				kreg_unlink(r);         /* (the kernel's set keeps it) */
			if (r->kind == M_SHM && !r->deleted && (x = malloc(sizeof(*x)))) {
				x->ep = e;
				x->fd = r->fd;
				/* (relaxed: the fork child's only thread) */
				atomic_store_explicit(&x->next,
						      atomic_load_explicit(&ep_inh,
						      		memory_order_relaxed),
						      memory_order_relaxed);
				atomic_store_explicit(&ep_inh, x, memory_order_relaxed);
			}
			free(r);
		}
		while (e->nests) {
			struct sc_epnest *k = e->nests;
			e->nests = k->next;
			if (n_inh_nests < 64)    /* ep_kernel_wait puts their data back */
				inh_nests[n_inh_nests++] = (struct inh_nest){ k->cookie, k->data };
			free(k);
		}
		if (e->ch)
			sc__chan_abandon(e->ch);
		e->ch = NULL;
		R(close)(e->inner);
		/* the parent's shadow: the child makes one of its own if need be */
		e->inner = -1;
		e->cookie = 0;
		e->check = e->fired = NULL;
		atomic_store_explicit(&e->npending, 0, memory_order_relaxed);
		e->held = false;
		e = next;
	}
}

/* close_range / closefrom: the epoll fds in [first, last] */
void ep_close_range(unsigned first, unsigned last)
{
	for (unsigned p = first >> PAGE_BITS; p < NPAGES && (p << PAGE_BITS) <= last; p++) {
		/* acquire: pairs with the release in ep_tab_set */
		struct sc_ep *_Atomic *pg = atomic_load_explicit(&ep_pages[p],
				memory_order_acquire);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			unsigned fd = (p << PAGE_BITS) | i;
			if (fd >= first && fd <= last && atomic_load_explicit(&pg[i],
					memory_order_acquire))
				ep_close((int)fd);
		}
	}
}

/* An epoll fd is closed: it no longer names its set; the set's last fd
 * closed, the set is gone (as the kernel's), and our shadow of it. */
void ep_close(int epfd)
{
	if (!ep_of(epfd) || in_vfork_child())
		return;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(epfd);
	if (!e || ep_fd_del(e, epfd) > 0) {
		pthread_mutex_unlock(&eps_lock);
		return;
	}
	bool shadow = e->inner >= 0;
	/* before the wait for its users: no socket's record leads to it
	 * after that (ep_kregs_follow finds sets through them) */
	ep_kregs_purge(e);
	if (shadow) {
		struct sc_ep **pp = &eps;
		while (*pp && *pp != e)
			pp = &(*pp)->next;
		if (*pp) {
			*pp = e->next;
			/* seq_cst (kept): as the add in ep_shadow_locked */
			atomic_fetch_sub_explicit(&neps, 1, memory_order_seq_cst);
		}
	}
	pthread_mutex_unlock(&eps_lock);
	if (!shadow) {
		pthread_rwlock_wrlock(&ep_life);
		pthread_rwlock_unlock(&ep_life);
		ep_free(e);
		return;
	}
	/* unlinked: no new user finds it; wait for those that did */
	pthread_rwlock_wrlock(&ep_life);
	pthread_rwlock_unlock(&ep_life);
	pthread_mutex_lock(&e->lock);
	/* connections bound to its channel: other sets watching them
	 * through it must watch them anew once they are back on their own */
	size_t nmoved = 0, cap = 0;
	struct sc_sock **moved = NULL;
	for (struct sc_epreg *r = e->regs; r; r = r->next)
		if (r->shared) {
			if (nmoved == cap) {
				cap = cap ? cap * 2 : 16;
				void *p = realloc(moved, cap * sizeof(*moved));
				if (!p)
					break;
				moved = p;
			}
			moved[nmoved++] = r->s;
		}
	while (e->regs)
		reg_free(e, e->regs);
	ep_hold(e, false);
	while (e->nests) {
		struct sc_epnest *k = e->nests;
		e->nests = k->next;
		free(k);
	}
	pthread_mutex_unlock(&e->lock);
	if (e->ch)
		sc_chan_close(e->ch);   /* its connections go back to their own */
	R(close)(e->inner);
	ep_free(e);
	if (nmoved)
		ep_rewatch(NULL, moved, nmoved);
	free(moved);
}

/* The last fd of s closed: it leaves every epoll set, as in the kernel. */
void ep_forget_sock(struct sc_sock *s)
{
	if (atomic_load_explicit(&s->kregs, memory_order_acquire))
		ep_kregs_drop(s);       /* registered while fresh */
	if (!atomic_load_explicit(&neps, memory_order_acquire))
		return;
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *e = eps; e; e = e->next) {
		pthread_mutex_lock(&e->lock);
		struct sc_epreg *r = e->regs;
		while (r) {
			struct sc_epreg *next = r->next;
			if (r->s == s)
				reg_free(e, r);
			r = next;
		}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&eps_lock);
}

