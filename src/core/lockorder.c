/* SPDX-License-Identifier: MIT */
/*
 * The lock-order check of the checking build (lockorder.h): ranks by the
 * lock's address in an open-addressing table, and each thread's held
 * locks on a small stack.  Nothing of it is built otherwise.
 */
#ifdef SC_LOCK_ORDER
#define SC_LOCKORDER_IMPL
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lockorder.h"

#define LO_SLOTS (1u << 16)
#define LO_GONE ((const void *)1)       /* a forgotten lock's slot */
#define LO_DEPTH 16

static struct lo_slot {
	_Atomic(const void *) lock;
	_Atomic int rank;
	const char *_Atomic name;
} lo_tab[LO_SLOTS];

static __thread struct lo_held {
	const void *lock;
	int rank;
	bool read;
	const char *where;
} held[LO_DEPTH];
static __thread int nheld;

static uint32_t lo_hash(const void *p)
{
	return (uint32_t)(((uintptr_t)p >> 3) * 0x9e3779b97f4a7c15ull >> 40) & (LO_SLOTS - 1);
}

void sc__lo_rank(const void *lock, int rank, const char *name)
{
	for (uint32_t i = lo_hash(lock), n = 0; n < LO_SLOTS; i = (i + 1) & (LO_SLOTS - 1), n++) {
		const void *cur = atomic_load_explicit(&lo_tab[i].lock, memory_order_acquire);
		if (cur != lock && cur != NULL && cur != LO_GONE)
			continue;
		/* seq_cst (kept): the slot's claim; readers acquire the
		 * lock word, then the rank released below */
		if (cur != lock && !atomic_compare_exchange_strong_explicit(&lo_tab[i].lock, &cur, lock,
									    memory_order_seq_cst,
									    memory_order_seq_cst))
			continue;       /* (another thread took the slot) */
		atomic_store_explicit(&lo_tab[i].name, name, memory_order_relaxed);
		atomic_store_explicit(&lo_tab[i].rank, rank, memory_order_release);
		return;
	}
}

static struct lo_slot *lo_find(const void *lock)
{
	for (uint32_t i = lo_hash(lock), n = 0; n < LO_SLOTS; i = (i + 1) & (LO_SLOTS - 1), n++) {
		const void *cur = atomic_load_explicit(&lo_tab[i].lock, memory_order_acquire);
		if (cur == lock)
			return &lo_tab[i];
		if (cur == NULL)
			return NULL;
	}
	return NULL;
}

void sc__lo_forget(const void *lock)
{
	struct lo_slot *s = lo_find(lock);
	if (s)
		atomic_store_explicit(&s->lock, LO_GONE, memory_order_release);
}

static const char *lo_name(const void *lock)
{
	struct lo_slot *s = lo_find(lock);
	return s ? atomic_load_explicit(&s->name, memory_order_relaxed) : "?";
}

static __attribute__((noreturn)) void lo_breach(const void *lock, const char *where,
						const struct lo_held *h)
{
	fprintf(stderr, "shortcut: lock order: %s taken at %s while %s is held (taken at %s)\n",
		lo_name(lock), where, h ? lo_name(h->lock) : "another lock",
		h ? h->where : "?");
	abort();
}

/* Before taking lock: its rank against every lock held. */
static int lo_check(const void *lock, const char *where, bool read)
{
	struct lo_slot *s = lo_find(lock);
	int rank = s ? atomic_load_explicit(&s->rank, memory_order_acquire) : 0;
	if (!rank)
		return 0;
	if (rank == LO_ALONE && nheld)
		lo_breach(lock, where, &held[nheld - 1]);
	for (int i = 0; i < nheld; i++) {
		if (held[i].lock == lock && read && held[i].read)
			continue;       /* ep_life read again */
		if (held[i].rank >= rank)
			lo_breach(lock, where, &held[i]);
	}
	return rank;
}

static void lo_push(const void *lock, int rank, bool read, const char *where)
{
	if (rank && nheld < LO_DEPTH)
		held[nheld++] = (struct lo_held){ lock, rank, read, where };
}

static void lo_pop(const void *lock)
{
	for (int i = nheld - 1; i >= 0; i--) {
		if (held[i].lock != lock)
			continue;
		for (int j = i; j + 1 < nheld; j++)
			held[j] = held[j + 1];
		nheld--;
		return;
	}
}

int sc__lo_mutex_lock(pthread_mutex_t *m, const char *where)
{
	int rank = lo_check(m, where, false);
	int rc = pthread_mutex_lock(m);
	if (!rc)
		lo_push(m, rank, false, where);
	return rc;
}

int sc__lo_mutex_trylock(pthread_mutex_t *m, const char *where)
{
	struct lo_slot *s = lo_find(m);
	int rc = pthread_mutex_trylock(m);
	if (!rc && s)
		lo_push(m, atomic_load_explicit(&s->rank, memory_order_acquire), false, where);
	return rc;
}

int sc__lo_mutex_unlock(pthread_mutex_t *m)
{
	lo_pop(m);
	return pthread_mutex_unlock(m);
}

int sc__lo_rdlock(pthread_rwlock_t *l, const char *where)
{
	int rank = lo_check(l, where, true);
	int rc = pthread_rwlock_rdlock(l);
	if (!rc)
		lo_push(l, rank, true, where);
	return rc;
}

int sc__lo_wrlock(pthread_rwlock_t *l, const char *where)
{
	int rank = lo_check(l, where, false);
	int rc = pthread_rwlock_wrlock(l);
	if (!rc)
		lo_push(l, rank, false, where);
	return rc;
}

int sc__lo_rwunlock(pthread_rwlock_t *l)
{
	lo_pop(l);
	return pthread_rwlock_unlock(l);
}
#else
typedef int sc_lockorder_unused;        /* (ISO C: no empty unit) */
#endif
