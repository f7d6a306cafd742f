/* SPDX-License-Identifier: MIT */
/* Nonblocking connect to a listener whose backlog is full: the SYN is
 * dropped, and the socket is not writable (poll, epoll; a send is EAGAIN)
 * until the server accepts and the retried SYN gets through.  (Issue 15:
 * with an accelerated listener, poll and epoll said POLLOUT at once, and
 * the send took the bytes.) */
#include <sys/epoll.h>

#include "common.h"

static void server(int lfd)
{
	char buf[8];
	res("listen(0)", listen(lfd, 0));       /* room for one connection */
	tell();
	await_peer();                           /* both connects under way */
	for (int i = 0; i < 2; i++) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			fatal("accept");
		ssize_t n = recv_all(fd, buf, 4);
		say("connection %d got \"%.*s\"", i, (int)(n > 0 ? n : 0), buf);
		res("send", send(fd, "ok", 2, 0));
		res("close", close(fd));
	}
}

static int nb_connect(void)
{
	struct sockaddr_in a = t_addr();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	say("in progress or connected: %s", yesno(rc == 0 || errno == EINPROGRESS));
	return fd;
}

static void client(void)
{
	char buf[8];
	int err = -1;
	socklen_t l = sizeof(err);

	await_peer();
	int fd1 = nb_connect();
	poll1("first connect", fd1, POLLOUT, 5000);
	int fd2 = nb_connect();
	poll1("second connect, the backlog full", fd2, POLLOUT, 0);
	res("send, the backlog full", send(fd2, "two!", 4, 0));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLOUT }, out;
	res("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, fd2, &ev));
	res("epoll_wait, the backlog full", epoll_wait(ep, &out, 1, 0));
	tell();
	int n = epoll_wait(ep, &out, 1, 10000);
	say("epoll_wait once accepted: %d events=%s", n, n == 1 && out.events & EPOLLOUT ?
	    "EPOLLOUT" : "-");
	res("getsockopt(SO_ERROR)", getsockopt(fd2, SOL_SOCKET, SO_ERROR, &err, &l));
	say("SO_ERROR = %s", err ? ename(err) : "0");
	int fds[2] = { fd1, fd2 };
	for (int i = 0; i < 2; i++) {
		res("send", send(fds[i], i ? "two!" : "one!", 4, 0));
		poll1("waiting for ok", fds[i], POLLIN, 5000);
		ssize_t r = recv(fds[i], buf, sizeof(buf), 0);
		say("got \"%.*s\"", (int)(r > 0 ? r : 0), buf);
		res("close", close(fds[i]));
	}
	close(ep);
}

int main(void)
{
	return run(server, client);
}
