/* SPDX-License-Identifier: MIT */
/* The program's fds get the numbers they get on kernel TCP: the lowest
 * free ones.  A client in an epoll loop (nonblocking connect, as wrk's)
 * and a server accepting in one, several accelerated connections, then
 * open(), pipe(), socket() and dup() in both, a low fd closed and its
 * number taken again, stdin closed and reopened (a daemon's 0, 1, 2):
 * every number is printed.  The library's own fds (its control thread's,
 * the rendezvous socket, link groups, epoll shadow sets and channels, the
 * pending client's eventfd, board and stats files) must not take any of
 * them: wrk sizes its event loop by its connections and counted a socket
 * numbered past it as a connect error. */
#include <sys/epoll.h>

#include "common.h"

#define N 4

/* until ep reports want on fd (other fds' events are passed over) */
static void wait_fd(int ep, int fd, uint32_t want)
{
	struct epoll_event ev[8];
	long t0 = t_now_ms();
	for (;;) {
		int n = epoll_wait(ep, ev, 8, T_GUARD_MS);
		for (int i = 0; i < n; i++)
			if (ev[i].data.fd == fd && (ev[i].events & want))
				return;
		if (n < 0 && errno != EINTR)
			fatal("epoll_wait");
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("fd %d: no event 0x%x", fd, want);
	}
}

static void add(int ep, int fd, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.fd = fd };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
		fatal("epoll_ctl add %d", fd);
}

/* what a program opens next: a file, a pipe, a socket, a copy */
static void others(const char *when)
{
	int f = open("/dev/null", O_RDONLY);
	int p[2] = { -1, -1 };
	if (pipe(p) < 0)
		fatal("pipe");
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int d = dup(1);
	say("%s: open %d, pipe %d %d, socket %d, dup %d", when, f, p[0], p[1], s, d);
	close(d);
	close(s);
	close(p[1]);
	close(p[0]);
	close(f);
}

/* a low fd closed: the next fd takes its number; stdin closed and opened
 * again is 0 */
static void reuse(int low)
{
	close(low);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	say("fd %d closed, then socket %d", low, s);
	close(0);
	int f = open("/dev/null", O_RDONLY);
	say("0 closed, then open %d", f);
	close(s);
}

static void server(int lfd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int c[N];
	char b;

	say("epoll set %d", ep);
	add(ep, lfd, EPOLLIN);
	for (int i = 0; i < N; i++) {
		wait_fd(ep, lfd, EPOLLIN);
		c[i] = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (c[i] < 0)
			fatal("accept");
		say("connection %d: accepted fd %d", i, c[i]);
		add(ep, c[i], EPOLLIN);
		wait_fd(ep, c[i], EPOLLIN);
		if (recv(c[i], &b, 1, 0) != 1 || send(c[i], &b, 1, 0) != 1)
			fatal("connection %d", i);
	}
	others("server");
	await_peer();                   /* the client is done */
	reuse(c[1]);
	others("server, again");
	for (int i = 0; i < N; i++)
		if (i != 1)
			close(c[i]);
	close(ep);
}

static void client(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct sockaddr_in a = t_addr();
	int c[N];
	char b = 'x';

	say("epoll set %d", ep);
	for (int i = 0; i < N; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		say("connection %d: socket fd %d", i, c[i]);
		if (connect(c[i], (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)
			fatal("connect %d", i);
		add(ep, c[i], EPOLLOUT);
		wait_fd(ep, c[i], EPOLLOUT);
		if (send(c[i], &b, 1, 0) != 1)
			fatal("send %d", i);
		struct epoll_event e = { .events = EPOLLIN, .data.fd = c[i] };
		epoll_ctl(ep, EPOLL_CTL_MOD, c[i], &e);
		wait_fd(ep, c[i], EPOLLIN);
		if (recv(c[i], &b, 1, 0) != 1)
			fatal("recv %d", i);
	}
	others("client");
	reuse(c[1]);
	others("client, again");
	tell();
	for (int i = 0; i < N; i++)
		if (i != 1)
			close(c[i]);
	close(ep);
}

int main(void)
{
	return run(server, client);
}
