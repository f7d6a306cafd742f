/* SPDX-License-Identifier: MIT */
/* The client writes right after connect() and then waits for something
 * other than the socket (a pipe): the bytes must reach the server anyway,
 * as they do over TCP.  Likewise the server writing right after accept()
 * to a client that then only polls. */
#include "common.h"

static void server(int lfd)
{
	char buf[256];
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	await_peer();                           /* client: sent 100, now waits on the pipe */
	poll1("client's first bytes", fd, POLLIN, 3000);
	res("recv(DONTWAIT)", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	res("close", close(fd));

	fd = accept(lfd, NULL, NULL);
	res("send right after accept", send(fd, "early", 5, 0));
	tell();
	await_peer();
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

static void client(void)
{
	char buf[256];
	int fd = raw_connect();
	memset(buf, 'e', 100);
	res("send right after connect", send(fd, buf, 100, 0));
	tell();
	await_peer();
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));

	fd = raw_connect();
	await_peer();                           /* server sent 5 */
	poll1("server's first bytes", fd, POLLIN, 3000);
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	res("recv(DONTWAIT)", n);
	res("close", close(fd));
	tell();
}

int main(void)
{
	return run(server, client);
}
