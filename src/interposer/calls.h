/* SPDX-License-Identifier: MIT */
/*
 * Every libc function the interposer defines, listed once.
 *
 *   X(name, file)            the prototype is libc's (<sys/socket.h>...)
 *   XT(name, file, type)     a function type of our own (liburing's calls,
 *                            which the build may not have headers for)
 *
 * `file` is where its shim lives (src/interposer/FILE.c).  From this list
 * come the pointers to the real functions and their loader (real.c), the
 * exported symbols (the version script, build/libshortcut.map, is made from
 * it: `make`), and the table in docs/calls.md (`make docs/calls.md`; a test
 * checks both against the built library).
 */
#ifndef SC_CALLS_H
#define SC_CALLS_H

#define SC_CALLS(X, XT) \
	/* sockets: set-up */ \
	X(socket, connect) X(connect, connect) X(listen, handshake) \
	X(accept, handshake) X(accept4, handshake) \
	/* data */ \
	X(read, data) X(write, data) X(readv, data) X(writev, data) \
	X(send, data) X(recv, data) X(sendto, data) X(recvfrom, data) \
	X(sendmsg, data) X(recvmsg, data) X(sendmmsg, data) X(recvmmsg, data) \
	X(sendfile, splice) X(sendfile64, splice) X(splice, splice) \
	X(__read_chk, data) X(__recv_chk, data) X(__recvfrom_chk, data) \
	/* options and control */ \
	X(getsockopt, sockopt) X(setsockopt, sockopt) X(ioctl, sockopt) \
	X(fcntl, sockopt) X(fcntl64, sockopt) \
	/* ending and copying an fd */ \
	X(shutdown, close) X(close, close) X(close_range, close) X(closefrom, close) \
	X(dup, close) X(dup2, close) X(dup3, close) \
	/* readiness */ \
	X(poll, poll) X(ppoll, poll) X(select, poll) X(pselect, poll) \
	X(__poll_chk, poll) X(__ppoll_chk, poll) \
	X(epoll_create, epoll_ctl) X(epoll_create1, epoll_ctl) X(epoll_ctl, epoll_ctl) \
	X(epoll_wait, epoll_wait) X(epoll_pwait, epoll_wait) X(epoll_pwait2, epoll_wait) \
	/* processes */ \
	X(fork, fork) \
	X(execve, exec) X(execv, exec) X(execvp, exec) X(execvpe, exec) X(execveat, exec) \
	X(fexecve, exec) X(execl, exec) X(execlp, exec) X(execle, exec) \
	X(posix_spawn, exec) X(posix_spawnp, exec) X(system, exec) X(popen, exec) \
	/* io_uring, and system calls made by number */ \
	X(syscall, uring) \
	XT(io_uring_queue_init, uring, int(unsigned, struct io_uring *, unsigned)) \
	XT(io_uring_queue_init_params, uring, int(unsigned, struct io_uring *, \
						  struct io_uring_params *)) \
	XT(io_uring_setup, uring, int(unsigned, struct io_uring_params *))

#endif
