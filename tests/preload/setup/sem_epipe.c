/* SPDX-License-Identifier: MIT */
/* Sending to a peer that closed: the first send succeeds (the peer answers
 * RST), the next reports ECONNRESET, then EPIPE with SIGPIPE unless
 * MSG_NOSIGNAL; write() too.  The next send waits for the RST to have
 * arrived (poll reports POLLERR/POLLHUP), not for a fixed time. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	res("close", close(fd));
	tell();

	fd = server_conn(lfd);
	res("shutdown(SHUT_RDWR)", shutdown(fd, SHUT_RDWR));
	tell();
	await_peer();
	res("close", close(fd));
}

static void client(void)
{
	char buf[64] = "0123456789";
	count_sigpipes();

	int fd = client_conn();
	await_peer();                           /* server closed */
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("send 10", send(fd, buf, 10, 0));
	wait_ev(fd, POLLERR);                   /* the peer's RST */
	res("send 10", send(fd, buf, 10, 0));
	say("SIGPIPE count %d", (int)sigpipes);
	res("send 10", send(fd, buf, 10, 0));
	say("SIGPIPE count %d", (int)sigpipes);
	res("send 10 (NOSIGNAL)", send(fd, buf, 10, MSG_NOSIGNAL));
	say("SIGPIPE count %d", (int)sigpipes);
	res("write 10", write(fd, buf, 10));
	say("SIGPIPE count %d", (int)sigpipes);
	struct iovec iov = { buf, 10 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	res("sendmsg 10 (NOSIGNAL)", sendmsg(fd, &m, MSG_NOSIGNAL));
	res("sendmsg 10", sendmsg(fd, &m, 0));
	say("SIGPIPE count %d", (int)sigpipes);
	res("close", close(fd));

	/* peer shut down both ways without closing */
	fd = client_conn();
	await_peer();
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("send 10", send(fd, buf, 10, 0));
	wait_ev(fd, POLLERR);
	res("send 10", send(fd, buf, 10, 0));
	res("send 10", send(fd, buf, 10, 0));
	say("SIGPIPE count %d", (int)sigpipes);
	tell();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
