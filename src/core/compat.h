/* SPDX-License-Identifier: MIT */
/*
 * What every layer shares, defined once: the visibility of the public API,
 * the clock, the process's pid, where the library's own fds go.
 */
#ifndef SC_COMPAT_H
#define SC_COMPAT_H

#include <stdbool.h>
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

/* The library's own fds are kept high, out of the program's way (fd.c):
 * the program's fds get the numbers they would get without us.
 * sc__fd_park: fd (ours, close-on-exec, just made) moved from the lowest
 * free number to the lowest free one from the base, the original closed;
 * fd itself if it is there already or no fd is free there (errno kept).
 * sc__fd_dup: a close-on-exec copy of fd, high if it can be, else low; the
 * copy or -errno; sc__fd_dup_high: only high (one we may do without).
 * Every fd the library keeps goes through one of them as soon as it is
 * made. */
int sc__fd_park(int fd);
int sc__fd_dup(int fd);
int sc__fd_dup_high(int fd);
/* RLIMIT_NOFILE as the caller just read it: the base follows it. */
void sc__fd_limit(long limit);
/* About how many fds the process has open, fd being the one it was just
 * given (the lowest free number): those below it, and ours from the base
 * up to the last one we were given. */
long sc__fd_in_use(int fd);
/* Wake an eventfd: add 1 to its counter.  0 (a saturated counter, whose
 * write fails with EAGAIN, is readable all the same) or -errno; errno
 * kept.  sc__write_stderr: a message to fd 2, as much as goes (nothing to
 * do if it fails); errno kept. */
int sc__efd_wake(int fd);
/* Reset an eventfd's counter (not readable until woken again; already
 * empty is no failure); errno kept. */
bool sc__efd_drain(int fd);      /* whether it was signalled */
void sc__write_stderr(const char *buf, size_t len);

#endif
