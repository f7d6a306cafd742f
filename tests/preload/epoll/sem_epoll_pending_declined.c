/* SPDX-License-Identifier: MIT */
// expect: tcp
/* A client whose offer the acceptor claims and then declines (its process
 * near RLIMIT_NOFILE: no room for a connection's fds), after the client
 * wrote its request and while it waits for the reply: the client learns of
 * the decline while it waits in epoll_wait (its registration made before
 * connect, or after it) or in poll, sends its request over TCP, and the
 * registration goes to the kernel's set, which reports the reply.  Under
 * the interposer the client waited for ever: nothing wakes a waiter for a
 * decline, and the server waited for the request in the client's buffer. */
#include "epoll_common.h"
#include <sys/resource.h>

#define NCONN 3
#define WAIT_MS 3000            /* an event due: a hang guard, not a deadline */

static void server(int lfd)
{
	/* no room for another accelerated connection from here on (the
	 * interposer wants 64 fds of headroom under three quarters of it) */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		fatal("getrlimit");
	rl.rlim_cur = 64;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fatal("setrlimit");
	for (int i = 1; i <= NCONN; i++) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			fatal("accept");
		/* the client wrote its request and waits for the reply:
		 * only then is the offer claimed (the first use), and
		 * declined */
		await_peer();
		await_peer_asleep();
		serve_request(fd, i);
	}
}

static int nb_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		fatal("socket");
	return fd;
}

/* registered before connect (before) or after it */
static void in_epoll(const char *name, bool before, uint64_t tag)
{
	char l[128];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = nb_socket();
	if (before) {
		snprintf(l, sizeof(l), "%s: ADD OUT before connect", name);
		ctl(l, ep, EPOLL_CTL_ADD, fd, EPOLLOUT, tag);
	}
	connect_said(fd);
	if (!before) {
		snprintf(l, sizeof(l), "%s: ADD OUT", name);
		ctl(l, ep, EPOLL_CTL_ADD, fd, EPOLLOUT, tag);
	}
	snprintf(l, sizeof(l), "%s: connected", name);
	wait_report(ep, l, WAIT_MS);
	res("send request", send(fd, "hello", 5, 0));
	snprintf(l, sizeof(l), "%s: MOD IN|RDHUP|ET", name);
	ctl(l, ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLRDHUP | EPOLLET, tag);
	tell();
	snprintf(l, sizeof(l), "%s: reply", name);
	wait_report(ep, l, WAIT_MS);
	get_reply(fd);
	snprintf(l, sizeof(l), "%s: nothing new", name);
	wait_report(ep, l, 100);
	close(fd);
	close(ep);
}

static void in_poll(void)
{
	int fd = nb_socket();
	connect_said(fd);
	poll1("poll: connected", fd, POLLOUT, WAIT_MS);
	res("send request", send(fd, "hello", 5, 0));
	tell();
	poll1("poll: reply", fd, POLLIN, WAIT_MS);
	get_reply(fd);
	close(fd);
}

static void client(void)
{
	in_epoll("before connect", true, 1);
	in_epoll("after connect", false, 2);
	in_poll();
}

int main(void)
{
	return run(server, client);
}
