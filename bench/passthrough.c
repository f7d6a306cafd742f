/* SPDX-License-Identifier: MIT */
/*
 * The interposer's cost on calls it does not accelerate: a syscall-heavy
 * loop on fds that are not accelerated TCP connections (a pipe, a Unix
 * socket pair, poll and epoll on them, fcntl).  Run it plain and under
 * `shortcut run`; bench/run.sh prints the difference per call.
 *   passthrough [ITERATIONS]   -> one line per call kind: "name ns_per_call"
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int p[2], u[2];
	char b = 'x';
	if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, u))
		return 1;
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN }, out[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);

	double t = now();
	for (long i = 0; i < n; i++)
		if (write(p[1], &b, 1) != 1 || read(p[0], &b, 1) != 1)
			return 1;
	printf("pipe_write_read %.1f\n", (now() - t) / n / 2 * 1e9);

	t = now();
	for (long i = 0; i < n; i++)
		if (send(u[0], &b, 1, 0) != 1 || recv(u[1], &b, 1, 0) != 1)
			return 1;
	printf("unix_send_recv %.1f\n", (now() - t) / n / 2 * 1e9);

	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	t = now();
	for (long i = 0; i < n; i++)
		if (poll(&pf, 1, 0) < 0)
			return 1;
	printf("poll_1fd %.1f\n", (now() - t) / n * 1e9);

	t = now();
	for (long i = 0; i < n; i++)
		if (epoll_wait(ep, out, 4, 0) < 0)
			return 1;
	printf("epoll_wait_0 %.1f\n", (now() - t) / n * 1e9);

	t = now();
	for (long i = 0; i < n; i++)
		if (fcntl(p[0], F_GETFL) < 0)
			return 1;
	printf("fcntl_getfl %.1f\n", (now() - t) / n * 1e9);
	return 0;
}
