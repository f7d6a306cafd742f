/* SPDX-License-Identifier: MIT */
/*
 * What every layer shares, defined once: the visibility of the public API,
 * the clock, the process's pid.
 */
#ifndef SC_COMPAT_H
#define SC_COMPAT_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* Exported from libshortcut.so (everything else is hidden): the public
 * sc_* API, and the interposer's libc functions (calls.h). */
#define SC_API __attribute__((visibility("default")))

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t sc__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A spinning loop's pause: lets the sibling hyperthread (or the peer on a
 * shared core) run, and saves power. */
static inline void sc__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Our pid, cached (glibc no longer caches it); a fork child's is its own
 * (pid.c).  A vfork child shares our memory, and so sees our pid here:
 * getpid() != sc__pid() tells it apart. */
extern _Atomic int32_t sc__cached_pid;
int32_t sc__pid_slow(void);
static inline int32_t sc__pid(void)
{
	int32_t p = atomic_load_explicit(&sc__cached_pid, memory_order_relaxed);
	return p ? p : sc__pid_slow();
}
/* Forget the cached pid (a fork child calls it before anything else). */
void sc__pid_reset(void);

#endif
