/* SPDX-License-Identifier: MIT */
/*
 * The library's own fds live high (compat.h).  The kernel gives a new fd
 * the lowest free number, and programs count on it: a daemon closes 0, 1
 * and 2 and opens /dev/null three times; wrk sizes its event loop by its
 * connections and takes a socket numbered past it for a failed connect;
 * select() takes fds below FD_SETSIZE.  Every fd we keep is moved, as
 * soon as it is made, to the lowest free number from a base: half of
 * RLIMIT_NOFILE, at most 1024, far from an ordinary program's numbers and
 * near enough that the fd table (which fork copies up to the highest open
 * fd) stays small.  Where no fd is free from the base, ours stays where
 * the kernel put it: never an operation failed for this.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

#include "compat.h"
#include "sys.h"

#define FD_BASE_MAX 1024

/* Both hints, relaxed: any value read is a usable base, and a stale top
 * only makes sc__fd_in_use a little off (as the program's own lowest free
 * number is, a moment later). */
static _Atomic int fd_base;     /* 0: not known yet */
static _Atomic int fd_top;      /* the last fd we were given from the base */

void sc__fd_limit(long limit)
{
	long b = limit / 2 < FD_BASE_MAX ? limit / 2 : FD_BASE_MAX;
	if (b < 3)
		b = 3;
	/* ours from another base are not counted from this one */
	if (atomic_exchange_explicit(&fd_base, (int)b, memory_order_relaxed) != (int)b)
		atomic_store_explicit(&fd_top, 0, memory_order_relaxed);
}

static void limit_read(void)
{
	struct rlimit rl;
	int saved = errno;
	sc__fd_limit(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ?
		     (long)rl.rlim_cur : 1L << 20);
	errno = saved;
}

static int base(void)
{
	int b = atomic_load_explicit(&fd_base, memory_order_relaxed);
	if (!b) {
		limit_read();
		b = atomic_load_explicit(&fd_base, memory_order_relaxed);
	}
	return b;
}

/* A close-on-exec copy of fd from the base, or -1 (errno). */
static int dup_high(int fd)
{
	int n = fcntl(fd, F_DUPFD_CLOEXEC, base());
	if (n < 0 && errno == EINVAL) {
		/* the program lowered its limit below the base */
		limit_read();
		n = fcntl(fd, F_DUPFD_CLOEXEC, base());
	}
#ifndef SC_SYS_DIRECT
	/* the sanitizer builds: ThreadSanitizer knows an fd by the call that
	 * made it (its epoll_ctl -> epoll_wait ordering is kept per epoll
	 * fd), and fcntl is not one it follows; dup3 onto the copy is */
	if (n >= 0 && dup3(fd, n, O_CLOEXEC) < 0) {
		close(n);
		n = -1;
	}
#endif
	if (n >= 0)
		atomic_store_explicit(&fd_top, n, memory_order_relaxed);
	return n;
}

int sc__fd_park(int fd)
{
	if (fd < 0 || fd >= base())
		return fd;
	int saved = errno;
	int n = dup_high(fd);
	if (n >= 0)
		close(fd);
	errno = saved;
	return n >= 0 ? n : fd;
}

/* A copy from the base (high), or, if low, a low one; -errno. */
static int fd_dup(int fd, bool low)
{
	int saved = errno;
	int n = dup_high(fd);
	if (n < 0 && low && errno != EBADF)
		n = fcntl(fd, F_DUPFD_CLOEXEC, 0);      /* none high: a low one */
	int rc = n < 0 ? -errno : n;
	errno = saved;
	return rc;
}

int sc__fd_dup(int fd)
{
	return fd_dup(fd, true);
}

int sc__fd_dup_high(int fd)
{
	return fd_dup(fd, false);
}

long sc__fd_in_use(int fd)
{
	int b = base(), top = atomic_load_explicit(&fd_top, memory_order_relaxed);
	if (top < b)
		return fd;
	if (fd < b)
		return (long)fd + (top - b + 1);
	return fd > top ? fd : top;
}

int sc__efd_wake(int fd)
{
	uint64_t one = 1;
	int saved = errno;
	ssize_t n = write(fd, &one, sizeof(one));
	int rc = n == (ssize_t)sizeof(one) || (n < 0 && errno == EAGAIN) ? 0 : n < 0 ? -errno : -EIO;
	errno = saved;
	return rc;
}

bool sc__efd_drain(int fd)
{
	uint64_t v;
	int saved = errno;
	ssize_t n = read(fd, &v, sizeof(v));
	errno = saved;
	return n == sizeof(v);
}

void sc__write_stderr(const char *buf, size_t len)
{
	int saved = errno;
	ssize_t n = write(2, buf, len);
	(void)n;
	errno = saved;
}
