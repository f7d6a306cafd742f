/* SPDX-License-Identifier: MIT */
/* Closing with unread data resets the connection (peer: ECONNRESET, then
 * 0, then EPIPE); so does close after SO_LINGER {1, 0} (peer: poll shows
 * the error, SO_ERROR takes it). */
#include "common.h"

static void server(int lfd)
{
	/* A: unread data in the receive queue at close */
	int fd = server_conn(lfd);
	await_peer();                           /* client sent 100 bytes */
	res("close with 100 unread bytes", close(fd));
	tell();

	/* B: SO_LINGER {1, 0} */
	fd = server_conn(lfd);
	struct linger lg = { 1, 0 };
	res("setsockopt(SO_LINGER {1,0})", setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	struct linger lg2 = { 0, 0 };
	socklen_t l = sizeof(lg2);
	res("getsockopt(SO_LINGER)", getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg2, &l));
	say("linger on=%d secs=%d", lg2.l_onoff, lg2.l_linger);
	await_peer();
	res("close", close(fd));
	tell();

	/* C: the client sends into a reset connection until it sees the error */
	fd = server_conn(lfd);
	res("setsockopt(SO_LINGER {1,0})", setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	res("close", close(fd));
	tell();
	await_peer();
}

static void client(void)
{
	char buf[256];
	int fd = client_conn();

	memset(buf, 'r', sizeof(buf));
	res("send 100", send(fd, buf, 100, 0));
	tell();
	await_peer();
	ssize_t n;
	int tries = 0;
	while ((n = recv(fd, buf, sizeof(buf), 0)) >= 0 && tries++ < 3)
		if (n == 0)                     /* FIN first: TCP needs a send to see the RST */
			send(fd, "z", 1, MSG_NOSIGNAL);
	res("recv after peer's close with unread data", n);
	res("recv again", recv(fd, buf, sizeof(buf), 0));
	res("send (NOSIGNAL)", send(fd, "y", 1, MSG_NOSIGNAL));
	res("close", close(fd));

	fd = client_conn();
	tell();
	await_peer();
	poll1("after peer's abortive close", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	int err = -1;
	socklen_t l = sizeof(err);
	res("getsockopt(SO_ERROR)", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l));
	say("SO_ERROR = %s", err ? ename(err) : "0");
	l = sizeof(err);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
	say("SO_ERROR again = %s", err ? ename(err) : "0");
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("send (NOSIGNAL)", send(fd, "y", 1, MSG_NOSIGNAL));
	res("close", close(fd));

	fd = client_conn();
	await_peer();
	res("recv after abortive close", recv(fd, buf, sizeof(buf), 0));
	res("recv again", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	res("close", close(fd));
	tell();
}

int main(void)
{
	return run(server, client);
}
