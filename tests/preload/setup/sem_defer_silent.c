/* SPDX-License-Identifier: MIT */
/* A client of a listener that defers its accepts (TCP_DEFER_ACCEPT 1)
 * connects and sends nothing: it waits for the server to speak first.
 * The kernel accepts the connection once its deferral ran out (about a
 * second, on kernel TCP as under shortcut); the server then greets, the
 * client answers.  Under shortcut the claim comes that late and still
 * puts the connection on shared memory: no byte of the client's went on
 * TCP, and none was to. */
#include "common.h"

static void server(int lfd)
{
	int v = 1;
	char buf[8];
	res("setsockopt(TCP_DEFER_ACCEPT, 1)",
	    setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v)));
	tell();
	int fd = accept(lfd, NULL, NULL);       /* once the deferral ran out */
	if (fd < 0)
		fatal("accept");
	res("send greeting", send(fd, "hello", 5, 0));
	ssize_t n = recv_all(fd, buf, 2);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("close", close(fd));
}

static void client(void)
{
	char buf[8];
	await_peer();
	int fd = raw_connect();
	ssize_t n = recv_all(fd, buf, 5);
	say("greeted \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("send", send(fd, "ok", 2, 0));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
