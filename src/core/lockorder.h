/* SPDX-License-Identifier: MIT */
/*
 * The lock order of the interposer and the run directory, checked while
 * they run in the checking build (-DSC_LOCK_ORDER: the ASan interposer of
 * `make test-preload-asan`).  Each lock has a rank, its place in the order
 * of docs/interposer.md §6b; a thread may take a lock only if every lock
 * it holds ranks lower.  A read lock of ep_life it already holds for
 * reading may be taken again (the documented exception), a trylock is
 * never a deadlock (it is not checked, only recorded), and an LO_ALONE
 * lock is taken with nothing held and nothing is taken inside it.  A
 * breach prints both locks and where they were taken, then aborts.  The
 * core's own locks are not ranked: they come in between LO_SW_START and
 * LO_RDV (design.md §7).
 *
 * In other builds all of it is nothing: the locks are plain pthread calls.
 */
#ifndef SC_LOCKORDER_H
#define SC_LOCKORDER_H

#include <pthread.h>

enum sc_lock_rank {
	LO_EP_LIFE = 1, /* ep_life (read) */
	LO_EPS,         /* eps_lock */
	LO_SET,         /* an epoll set's lock */
	LO_SOCK,        /* a socket's lock */
	LO_CREATE,      /* interp.create_lock */
	LO_SW_START,    /* sw_start's lock */
	LO_RDV,         /* interp.rdv_lock (after the core's locks) */
	LO_SW,          /* sw_thread.lock */
	LO_TABLE,       /* table_lock */
	LO_HIDDEN,      /* hidden_lock */
	LO_KREG,        /* kreg_lock */
	LO_CHILDREN,    /* forked.lock */
	LO_CHILD,       /* child_lock */
	LO_RETIRED,     /* retired_lock */
	LO_BOARD,       /* board_lock */
	LO_LK,          /* lk_lock */
	LO_SELF,        /* self_lock */
	LO_NL,          /* nl_lock */
	LO_LINGER,      /* lg_lock (taken under a group's lock: linger_switched) */
	LO_ALONE = 100, /* a socket's wlock, ep_inh_lock */
};

#ifdef SC_LOCK_ORDER
void sc__lo_rank(const void *lock, int rank, const char *name);
void sc__lo_forget(const void *lock);
int sc__lo_mutex_lock(pthread_mutex_t *m, const char *where);
int sc__lo_mutex_trylock(pthread_mutex_t *m, const char *where);
int sc__lo_mutex_unlock(pthread_mutex_t *m);
int sc__lo_rdlock(pthread_rwlock_t *l, const char *where);
int sc__lo_wrlock(pthread_rwlock_t *l, const char *where);
int sc__lo_rwunlock(pthread_rwlock_t *l);

#define SC_LO_STR2(x) #x
#define SC_LO_STR(x) SC_LO_STR2(x)
#define SC_LO_WHERE __FILE__ ":" SC_LO_STR(__LINE__)
#define SC_LO_CAT2(a, b) a##b
#define SC_LO_CAT(a, b) SC_LO_CAT2(a, b)

#ifndef SC_LOCKORDER_IMPL
#define pthread_mutex_lock(m) sc__lo_mutex_lock((m), SC_LO_WHERE)
#define pthread_mutex_trylock(m) sc__lo_mutex_trylock((m), SC_LO_WHERE)
#define pthread_mutex_unlock(m) sc__lo_mutex_unlock(m)
#define pthread_rwlock_rdlock(l) sc__lo_rdlock((l), SC_LO_WHERE)
#define pthread_rwlock_wrlock(l) sc__lo_wrlock((l), SC_LO_WHERE)
#define pthread_rwlock_unlock(l) sc__lo_rwunlock(l)
#endif

/* A lock defined at file scope gets its rank when the library loads. */
#define SC_LOCK_RANK(lock, rank)                                                    \
	__attribute__((constructor(101))) static void SC_LO_CAT(sc_lo_rank_, __LINE__)(void) \
	{                                                                           \
		sc__lo_rank(&(lock), (rank), #lock);                                \
	}
#else
#define sc__lo_rank(lock, rank, name) ((void)0)
#define sc__lo_forget(lock) ((void)0)
#define SC_LOCK_RANK(lock, rank)
#endif

#endif
