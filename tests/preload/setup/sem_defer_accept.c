/* SPDX-License-Identifier: MIT */
/* A listener that defers its accepts (TCP_DEFER_ACCEPT, 30 s, set after
 * listen(), as pgbouncer does; nginx's `listen ... deferred`): the kernel
 * queues a connection only once data came on it.
 *
 * 1. A client that connects and sends nothing is not accepted (a
 *    nonblocking accept is EAGAIN once a second client's connection,
 *    with data, was); once it sends, it is.  A client whose first bytes
 *    are held back (MSG_MORE, TCP_CORK) and that then only waits for the
 *    answer (poll) is accepted when the kernel sends them anyway, after
 *    its 200 ms.
 * 2. 50 connections, blocking and nonblocking clients, first sends plain,
 *    with MSG_MORE, under TCP_CORK: each sends 5 bytes, the server (a
 *    nonblocking accept in an epoll loop) echoes them, then four more
 *    exchanges (a connection that is not short: all of them are offered).
 *
 * Under shortcut a client's first bytes went with its offer, never on
 * TCP, so the kernel kept each connection out of the accept queue for the
 * whole deferral (here past the claim timeout, 10 s, then on TCP; 1 s per
 * connection with TCP_DEFER_ACCEPT=1: sem_defer_reuseport).  A client that
 * has no echo 5 s after its send says so: on kernel TCP it has it at once. */
#include <sys/epoll.h>

#include "common.h"

#define N 50
#define ROUNDS 5
#define ECHO_WAIT_MS 5000

static void echo(int fd, int rounds)
{
	char buf[5];
	for (int r = 0; r < rounds; r++)
		if (recv_all(fd, buf, 5) != 5 || send(fd, buf, 5, MSG_NOSIGNAL) != 5)
			fatal("echo");
}

/* client: the echo of what fd sent (its 5 bytes), or the stall said */
static bool echoed(int fd, int i, const char *sent)
{
	char buf[5];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ECHO_WAIT_MS) != 1) {
		say("connection %d: no echo within %d ms", i, ECHO_WAIT_MS);
		return false;
	}
	if (recv_all(fd, buf, 5) != 5 || memcmp(buf, sent, 5))
		fatal("connection %d: echo", i);
	return true;
}

static void server(int lfd)
{
	int v = 30, got = 0;
	socklen_t vl = sizeof(got);
	res("setsockopt(TCP_DEFER_ACCEPT, 30)",
	    setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v)));
	getsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &got, &vl);
	say("TCP_DEFER_ACCEPT reads %d", got);
	fcntl(lfd, F_SETFL, O_NONBLOCK);
	tell();

	/* 1 */
	await_peer();                   /* the silent one connected, then one with data */
	wait_ev(lfd, POLLIN);
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	if (fd < 0)
		fatal("accept");
	echo(fd, 1);
	close(fd);
	int silent = accept(lfd, NULL, NULL);
	say("accept of the silent connection: %s", silent < 0 ? ename(errno) : "accepted");
	tell();                         /* it sends now */
	wait_ev(lfd, POLLIN);
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	say("once it sent: %s", fd < 0 ? ename(errno) : "accepted");
	if (fd >= 0) {
		echo(fd, 1);
		close(fd);
	}
	for (int k = 0; k < 2; k++) {   /* held back, MSG_MORE then cork */
		wait_ev(lfd, POLLIN);
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (fd < 0)
			fatal("accept");
		echo(fd, 1);
		close(fd);
	}

	/* 2: until the client says it is done */
	int ep = epoll_create1(EPOLL_CLOEXEC), served = 0;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	ev.data.fd = t_c2p[0];
	epoll_ctl(ep, EPOLL_CTL_ADD, t_c2p[0], &ev);
	for (bool done = false; !done;) {
		struct epoll_event out[2];
		int n = epoll_wait(ep, out, 2, -1);
		for (int i = 0; i < n; i++) {
			if (out[i].data.fd != lfd) {
				done = true;
				continue;
			}
			while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
				echo(fd, ROUNDS);
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
}

static int connect_to(bool nonblock)
{
	struct sockaddr_in a = t_addr();
	int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	if (rc < 0 && !(nonblock && errno == EINPROGRESS))
		fatal("connect: %s", ename(errno));
	if (nonblock)
		wait_ev(fd, POLLOUT);
	return fd;
}

static void client(void)
{
	int zero = 0, one = 1;
	await_peer();

	/* 1 */
	int silent = raw_connect();
	int fd = raw_connect();
	if (send(fd, "first", 5, 0) != 5)
		fatal("send");
	tell();
	say("with data: echoed %s", yesno(echoed(fd, -1, "first")));
	close(fd);
	await_peer();                   /* the silent one was not accepted */
	res("send on the silent connection", send(silent, "later", 5, 0));
	say("silent, then sent: echoed %s", yesno(echoed(silent, -2, "later")));
	close(silent);
	fd = raw_connect();
	res("send(MSG_MORE)", send(fd, "held1", 5, MSG_MORE));
	say("held back: echoed %s", yesno(echoed(fd, -3, "held1")));
	close(fd);
	fd = raw_connect();
	setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof(one));
	res("send, corked", send(fd, "held2", 5, 0));
	say("corked: echoed %s", yesno(echoed(fd, -4, "held2")));
	close(fd);

	/* 2 */
	int ok = 0;
	for (int i = 0; i < N; i++) {
		char msg[6];
		snprintf(msg, sizeof(msg), "m%04d", i);
		fd = connect_to(i % 4 == 1);
		ssize_t n;
		switch (i % 4) {
		case 2:         /* held, then pushed by the rest */
			n = send(fd, msg, 2, MSG_MORE);
			n += send(fd, msg + 2, 3, 0);
			break;
		case 3:         /* corked, then uncorked */
			setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof(one));
			n = send(fd, msg, 5, 0);
			setsockopt(fd, IPPROTO_TCP, TCP_CORK, &zero, sizeof(zero));
			break;
		default:
			n = send_all(fd, msg, 5);
		}
		if (n != 5)
			fatal("connection %d: send", i);
		bool e = echoed(fd, i, msg);
		for (int r = 1; e && r < ROUNDS; r++) {
			char buf[5];
			if (send_all(fd, msg, 5) != 5 || recv_all(fd, buf, 5) != 5 ||
			    memcmp(buf, msg, 5))
				fatal("connection %d: round %d", i, r);
		}
		close(fd);
		if (!e)
			break;
		ok++;
	}
	say("%d of %d connections echoed", ok, N);
	tell();
}

int main(void)
{
	return run(server, client);
}
