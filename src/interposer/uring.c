/* SPDX-License-Identifier: MIT */
/*
 * io_uring (its rings read sockets past us: every connection goes back
 * to TCP) and system calls made by number (syscall()).
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
#include "rawsys.h"
/* ---- io_uring ----------------------------------------------------------------
 *
 * A ring reads and writes sockets in the kernel, past our table: once the
 * program sets one up (through liburing, whose entry points we wrap), every
 * accelerated connection switches back to TCP and no new one is made, on
 * either side (fallback unsupported_option: connections being set up then,
 * those connected or accepted after).  So is io_uring_setup through libc's
 * syscall() (below); a program making the system call with its own
 * instruction (static liburing builds, Go) is not seen (README Limits).
 */

struct io_uring;
struct io_uring_params;

/* Its accepts may go past us: no client may wait for our answer.  A
 * connection still being set up is decided now (the ring may be all that
 * uses it): an accepted one declines its client's offer, a connecting one
 * withdraws its own unless claimed (then it is switched below), each
 * counted with its reason. */
static void uring_sock(int fd, struct sc_sock *s, bool vforked)
{
	int mode = sock_mode(s);
	if (mode == M_LISTEN)
		listener_withdraw(s);
	else if (mode == M_SPENDING || mode == M_PENDING)
		settle_now(fd, s);
}

static void uring_seen(void)
{
	KEEP_ERRNO();
	if (!interp.uring) {
		interp.uring = true;
		LOG(1, "io_uring in use: connections go back to TCP, new ones stay there");
	}
	fds_each(uring_sock, false);
	sw_scan(true, true, true);
}

SC_API int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	static int (*real)(unsigned, struct io_uring *, unsigned);
	uring_seen();
	if (!real)
		real = (int (*)(unsigned, struct io_uring *, unsigned))
			dlsym(RTLD_NEXT, "io_uring_queue_init");
	return real ? real(entries, ring, flags) : -ENOSYS;
}

SC_API int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p)
{
	static int (*real)(unsigned, struct io_uring *, struct io_uring_params *);
	uring_seen();
	if (!real)
		real = (int (*)(unsigned, struct io_uring *, struct io_uring_params *))
			dlsym(RTLD_NEXT, "io_uring_queue_init_params");
	return real ? real(entries, ring, p) : -ENOSYS;
}

SC_API int io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	static int (*real)(unsigned, struct io_uring_params *);
	uring_seen();
	if (!real)
		real = (int (*)(unsigned, struct io_uring_params *))dlsym(RTLD_NEXT, "io_uring_setup");
	return real ? real(entries, p) : -ENOSYS;
}

/* syscall(): io_uring_setup made through it (the io-uring crate of Rust,
 * programs without liburing) is seen as liburing's is; so are execve and
 * close.  Every other call goes straight to the kernel.  The library's own
 * system calls never come here (rawsys.h).  (Like libc's, it takes six
 * arguments whatever the call: the ones not passed are read from the
 * caller's registers and stack, unused, which a sanitizer would take for
 * an overflow.) */
__attribute__((no_sanitize_address))
SC_API long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_io_uring_setup) {
		uring_seen();
	} else if (SC_RAW_SYSCALL_IS_RAW && (nr == SYS_execve || nr == SYS_execveat)) {
		exec_prepare(false);    /* an exec all the same */
	} else if (SC_RAW_SYSCALL_IS_RAW && nr == SYS_close && a >= 0 && a <= INT_MAX) {
		if (sock_get((int)a))   /* as close() */
			fd_drop((int)a, true);
		ep_close((int)a);
	}
	return sc_raw_syscall6(nr, a, b, c, d, e, f);
}
