/* SPDX-License-Identifier: MIT */
/*
 * Resetting the library's state in a fork child without storing what is
 * already as wanted.  Every store to a page the child still shares with its
 * parent is a copy-on-write fault (a page allocated and copied: 2-3 us on a
 * VM), and a server forking per connection pays them in every child: the
 * library's handlers used to touch a dozen pages of its own per fork.
 */
#ifndef SC_FORKRESET_H
#define SC_FORKRESET_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* A mutex a thread of the parent's may have held at the fork, free again.
 * A free one that nobody waits for is bytewise its initializer (glibc:
 * lock word, owner and user count back to 0), and is left alone; any
 * other state is initialised anew, as before. */
static inline void sc__mutex_reset(pthread_mutex_t *m)
{
	static const pthread_mutex_t z = PTHREAD_MUTEX_INITIALIZER;
	if (memcmp(m, &z, sizeof(z)))
		pthread_mutex_init(m, NULL);
}

static inline void sc__rwlock_reset(pthread_rwlock_t *l)
{
	static const pthread_rwlock_t z = PTHREAD_RWLOCK_INITIALIZER;
	if (memcmp(l, &z, sizeof(z)))
		pthread_rwlock_init(l, NULL);
}

/* x = v, unless it is v already (a plain variable; an _Atomic one with
 * SC_RESET_ATOMIC: relaxed, the fork child's only thread). */
#define SC_RESET(x, v) do { if ((x) != (v)) (x) = (v); } while (0)
#define SC_RESET_ATOMIC(x, v) do { \
	if (atomic_load_explicit(&(x), memory_order_relaxed) != (v)) \
		atomic_store_explicit(&(x), (v), memory_order_relaxed); \
} while (0)

#endif
