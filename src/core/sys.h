/* SPDX-License-Identifier: MIT */
/*
 * The library's own system calls, made directly.  Under LD_PRELOAD the
 * library exports send, recv, close, epoll_wait... for the program; its own
 * calls on its own fds (wake sockets, link sockets, eventfds, epoll sets)
 * must not go through those interposers (their locks, their fd table).
 * Include after every system header: the names below become macros.
 *
 * Only with SC_SYS_DIRECT (the library's own builds).  The sanitizer test
 * builds leave it out: ThreadSanitizer learns the ordering between threads
 * from the libc calls it intercepts (epoll_ctl before epoll_wait, send
 * before recv), which raw system calls would hide from it.
 */
#ifndef SC_SYS_H
#define SC_SYS_H
#ifdef SC_SYS_DIRECT

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rawsys.h"

static inline ssize_t sc_sys_send(int fd, const void *b, size_t n, int f)
{
	return SC_SYSCALL(SYS_sendto, fd, b, n, f, NULL, 0);
}
static inline ssize_t sc_sys_recv(int fd, void *b, size_t n, int f)
{
	return SC_SYSCALL(SYS_recvfrom, fd, b, n, f, NULL, NULL);
}
static inline ssize_t sc_sys_sendmsg(int fd, const struct msghdr *m, int f)
{
	return SC_SYSCALL(SYS_sendmsg, fd, m, f, 0, 0, 0);
}
static inline ssize_t sc_sys_recvmsg(int fd, struct msghdr *m, int f)
{
	return SC_SYSCALL(SYS_recvmsg, fd, m, f, 0, 0, 0);
}
static inline int sc_sys_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int f,
				  struct timespec *t)
{
	return (int)SC_SYSCALL(SYS_recvmmsg, fd, v, n, f, t, 0);
}
static inline ssize_t sc_sys_read(int fd, void *b, size_t n)
{
	return SC_SYSCALL(SYS_read, fd, b, n, 0, 0, 0);
}
static inline ssize_t sc_sys_write(int fd, const void *b, size_t n)
{
	return SC_SYSCALL(SYS_write, fd, b, n, 0, 0, 0);
}
static inline int sc_sys_close(int fd)
{
	return (int)SC_SYSCALL(SYS_close, fd, 0, 0, 0, 0, 0);
}
static inline int sc_sys_epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	return (int)SC_SYSCALL(SYS_epoll_pwait, ep, ev, n, t, NULL, _NSIG / 8);
}
static inline int sc_sys_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
	return (int)SC_SYSCALL(SYS_epoll_ctl, ep, op, fd, ev, 0, 0);
}
static inline int sc_sys_poll(struct pollfd *p, nfds_t n, int t)
{
	struct timespec ts = { t / 1000, (long)(t % 1000) * 1000000L };
	return (int)SC_SYSCALL(SYS_ppoll, p, n, t < 0 ? NULL : &ts, NULL, _NSIG / 8, 0);
}
static inline int sc_sys_accept4(int fd, struct sockaddr *a, socklen_t *l, int f)
{
	return (int)SC_SYSCALL(SYS_accept4, fd, a, l, f, 0, 0);
}
/* the interposer marks the program's epoll fds: the library's own are
 * made past it */
static inline int sc_sys_epoll_create1(int flags)
{
	return (int)SC_SYSCALL(SYS_epoll_create1, flags, 0, 0, 0, 0, 0);
}
static inline int sc_sys_connect(int fd, const struct sockaddr *a, socklen_t l)
{
	return (int)SC_SYSCALL(SYS_connect, fd, a, l, 0, 0, 0);
}

static inline int sc_sys_socket(int d, int t, int p)
{
	return (int)SC_SYSCALL(SYS_socket, d, t, p, 0, 0, 0);
}
static inline int sc_sys_listen(int fd, int backlog)
{
	return (int)SC_SYSCALL(SYS_listen, fd, backlog, 0, 0, 0, 0);
}
static inline int sc_sys_shutdown(int fd, int how)
{
	return (int)SC_SYSCALL(SYS_shutdown, fd, how, 0, 0, 0, 0);
}
static inline int sc_sys_dup3(int fd, int nfd, int flags)
{
	return (int)SC_SYSCALL(SYS_dup3, fd, nfd, flags, 0, 0, 0);
}
static inline int sc_sys_fcntl(int fd, int cmd, long arg)
{
	return (int)SC_SYSCALL(SYS_fcntl, fd, cmd, arg, 0, 0, 0);
}
static inline int sc_sys_getsockopt(int fd, int lvl, int opt, void *v, socklen_t *l)
{
	return (int)SC_SYSCALL(SYS_getsockopt, fd, lvl, opt, v, l, 0);
}

#define send(fd, b, n, f)       sc_sys_send(fd, b, n, f)
#define recv(fd, b, n, f)       sc_sys_recv(fd, b, n, f)
#define sendmsg(fd, m, f)       sc_sys_sendmsg(fd, m, f)
#define recvmsg(fd, m, f)       sc_sys_recvmsg(fd, m, f)
#define recvmmsg(fd, v, n, f, t) sc_sys_recvmmsg(fd, v, n, f, t)
#define read(fd, b, n)          sc_sys_read(fd, b, n)
#define write(fd, b, n)         sc_sys_write(fd, b, n)
#define close(fd)               sc_sys_close(fd)
#define epoll_wait(e, v, n, t)  sc_sys_epoll_wait(e, v, n, t)
#define epoll_ctl(e, o, f, v)   sc_sys_epoll_ctl(e, o, f, v)
#define poll(p, n, t)           sc_sys_poll(p, n, t)
#define accept4(fd, a, l, f)    sc_sys_accept4(fd, a, l, f)
#define connect(fd, a, l)       sc_sys_connect(fd, a, l)
#define epoll_create1(f)        sc_sys_epoll_create1(f)
#define socket(d, t, p)         sc_sys_socket(d, t, p)
#define listen(fd, b)           sc_sys_listen(fd, b)
#define shutdown(fd, h)         sc_sys_shutdown(fd, h)
#define dup3(fd, n, f)          sc_sys_dup3(fd, n, f)
#define getsockopt(fd, l, o, v, n) sc_sys_getsockopt(fd, l, o, v, n)
/* fcntl(fd, cmd) or fcntl(fd, cmd, arg) */
#define fcntl(...)              SC_SYS_FCNTL_(__VA_ARGS__, 0, 0)
#define SC_SYS_FCNTL_(fd, cmd, arg, ...) sc_sys_fcntl(fd, cmd, (long)(arg))

#endif /* SC_SYS_DIRECT */
#endif
