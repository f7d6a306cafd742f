/* SPDX-License-Identifier: MIT */
/* Two SO_REUSEPORT listeners on one port, one of which defers its accepts
 * (TCP_DEFER_ACCEPT 1, set before listen(), as HAProxy's `defer-accept`):
 * the kernel spreads connections between them by their addresses, and a
 * client cannot know which it gets.  100 connections, blocking and
 * nonblocking clients, each sending 5 bytes that the server (nonblocking
 * accepts on both, one epoll loop) echoes, five times (a connection that
 * is not short: all of them are offered).
 *
 * Under shortcut a client's first bytes went with its offer, never on
 * TCP: each connection to the deferring listener waited a full deferral
 * (1 s) before the kernel let it be accepted, about 50 s in all (the run's
 * 20 s alarm ends it).  A client now sends its first byte on TCP, and the
 * listener that does not defer takes it too, from its kernel socket. */
#include <sys/epoll.h>

#include "common.h"

#define N 100
#define ROUNDS 5

static int listener(uint16_t port, int defer)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    (defer && setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) < 0) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		fatal("listener: %s", ename(errno));
	return fd;
}

static void server(int lfd)
{
	close(lfd);
	int l[2];
	l[0] = listener(0, 1);
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	getsockname(l[0], (struct sockaddr *)&a, &al);
	l[1] = listener(ntohs(a.sin_port), 0);
	int got = 0;
	socklen_t vl = sizeof(got);
	getsockopt(l[0], IPPROTO_TCP, TCP_DEFER_ACCEPT, &got, &vl);
	say("the first listener's TCP_DEFER_ACCEPT reads %d", got);
	tell_u64(ntohs(a.sin_port));

	int ep = epoll_create1(EPOLL_CLOEXEC), served = 0;
	struct epoll_event ev = { .events = EPOLLIN };
	for (int k = 0; k < 2; k++) {
		ev.data.fd = l[k];
		epoll_ctl(ep, EPOLL_CTL_ADD, l[k], &ev);
	}
	ev.data.fd = t_c2p[0];
	epoll_ctl(ep, EPOLL_CTL_ADD, t_c2p[0], &ev);
	for (bool done = false; !done;) {
		struct epoll_event out[3];
		int n = epoll_wait(ep, out, 3, -1), fd;
		for (int i = 0; i < n; i++) {
			if (out[i].data.fd == t_c2p[0]) {
				done = true;
				continue;
			}
			while ((fd = accept4(out[i].data.fd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
				char buf[5];
				for (int r = 0; r < ROUNDS; r++)
					if (recv_all(fd, buf, 5) != 5 ||
					    send(fd, buf, 5, MSG_NOSIGNAL) != 5)
						fatal("echo");
				close(fd);
				served++;
			}
			if (errno != EAGAIN)
				fatal("accept: %s", ename(errno));
		}
	}
	await_peer();
	say("served %d connections", served);
	close(ep);
	close(l[0]);
	close(l[1]);
}

static void client(void)
{
	struct sockaddr_in a = t_addr();
	a.sin_port = htons((uint16_t)await_u64());
	int ok = 0;
	for (int i = 0; i < N; i++) {
		char msg[6], buf[5];
		bool nb = i & 1;
		snprintf(msg, sizeof(msg), "r%04d", i);
		int fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 &&
		    !(nb && errno == EINPROGRESS))
			fatal("connect: %s", ename(errno));
		for (int r = 0; r < ROUNDS; r++)
			if (send_all(fd, msg, 5) != 5 || recv_all(fd, buf, 5) != 5 ||
			    memcmp(buf, msg, 5))
				fatal("connection %d: round %d", i, r);
		close(fd);
		ok++;
	}
	say("%d of %d connections echoed", ok, N);
	tell();
}

int main(void)
{
	return run(server, client);
}
