/* SPDX-License-Identifier: MIT */
/* dup, dup2, dup3, F_DUPFD_CLOEXEC: the connection lives while any fd names
 * it; only the last close sends the FIN; O_NONBLOCK is shared by the
 * duplicates (one open file description). */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];

	for (int i = 0; i < 4; i++) {
		await_peer();                   /* client: wrote through another fd, closed one */
		ssize_t n = recv_all(fd, buf, 5);
		res("recv", n);
		say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
		res("recv(DONTWAIT): no EOF yet", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
		res("send", send(fd, "reply", 5, 0));
		tell();
	}
	await_peer();                           /* client closed the last fd */
	poll1("after the last close", fd, POLLIN | POLLRDHUP, 1000);
	res("recv: EOF now", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	char buf[64];
	ssize_t n;

	int d = dup(fd);
	say("dup: new fd: %s", yesno(d >= 0 && d != fd));
	res("close original", close(fd));
	res("send via dup", send(d, "dup01", 5, 0));
	tell();
	await_peer();
	n = recv(d, buf, sizeof(buf), 0);
	say("recv via dup: \"%.*s\"", (int)(n > 0 ? n : 0), buf);

	int d2 = dup2(d, 50);
	say("dup2 returned 50: %s", yesno(d2 == 50));
	res("dup2 onto itself", dup2(50, 50) == 50 ? 0 : -1);
	res("close dup", close(d));
	res("write via dup2", write(50, "dup02", 5));
	tell();
	await_peer();
	n = read(50, buf, sizeof(buf));
	say("read via dup2: \"%.*s\"", (int)(n > 0 ? n : 0), buf);

	int d3 = fcntl(50, F_DUPFD_CLOEXEC, 60);
	say("F_DUPFD_CLOEXEC >= 60: %s, FD_CLOEXEC: %s", yesno(d3 >= 60),
	    yesno(fcntl(d3, F_GETFD) & FD_CLOEXEC));
	say("original has no FD_CLOEXEC: %s", yesno(!(fcntl(50, F_GETFD) & FD_CLOEXEC)));
	res("fcntl(F_SETFL, O_NONBLOCK) via the copy", fcntl(d3, F_SETFL, O_NONBLOCK));
	say("O_NONBLOCK seen through the other fd: %s", yesno(fcntl(50, F_GETFL) & O_NONBLOCK));
	res("recv on empty via the other fd", recv(50, buf, sizeof(buf), 0));
	res("fcntl(F_SETFL, 0)", fcntl(50, F_SETFL, 0));
	res("close dup2", close(50));
	res("send via F_DUPFD_CLOEXEC", send(d3, "dup03", 5, 0));
	tell();
	await_peer();
	n = recv(d3, buf, sizeof(buf), 0);
	say("recv via F_DUPFD_CLOEXEC: \"%.*s\"", (int)(n > 0 ? n : 0), buf);

	int d4 = dup3(d3, 70, O_CLOEXEC);
	say("dup3 returned 70: %s, FD_CLOEXEC: %s", yesno(d4 == 70),
	    yesno(fcntl(70, F_GETFD) & FD_CLOEXEC));
	res("dup3 onto itself", dup3(70, 70, 0));
	/* dup2 over a live duplicate: drops that reference only */
	int spare = dup(d3);
	res("dup2 onto a duplicate of the same socket", dup2(d4, spare) == spare ? 0 : -1);
	res("close spare", close(spare));
	res("close F_DUPFD_CLOEXEC copy", close(d3));
	res("send via dup3", send(70, "dup04", 5, 0));
	tell();
	await_peer();
	n = recv(70, buf, sizeof(buf), 0);
	say("recv via dup3: \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("close the last fd", close(70));
	res("send on closed fd", send(70, "x", 1, MSG_NOSIGNAL));
	tell();
}

int main(void)
{
	return run(server, client);
}
