/* SPDX-License-Identifier: MIT */
/* Urgent data (MSG_OOB), as TCP has it: before any, recv(MSG_OOB) is EINVAL
 * and SIOCATMARK 0; the client sends "abc", the urgent byte '!' and "def":
 * the server sees POLLPRI (and EPOLLPRI), reads up to the mark (a read
 * stops there), SIOCATMARK says 1, recv(MSG_OOB) gives '!', the rest reads
 * as "def"; with SO_OOBINLINE a second urgent byte stays in the stream.  A
 * connection on shared memory has no urgent data: the sender of one goes
 * back to TCP first, so both halves switch. */
// expect: switched 2
#include "common.h"
#include <sys/epoll.h>
#include <sys/ioctl.h>

static void atmark(const char *label, int fd)
{
	int v = -1;
	int rc = ioctl(fd, SIOCATMARK, &v);
	if (rc < 0)
		say("%s: SIOCATMARK = -1 %s", label, ename(errno));
	else
		say("%s: SIOCATMARK = %d", label, v);
}

static void recv_str(const char *label, int fd, size_t len, int flags)
{
	char buf[64] = { 0 };
	ssize_t r = recv(fd, buf, len, flags);
	if (r < 0)
		say("%s = -1 %s", label, ename(errno));
	else
		say("%s = %zd \"%.*s\"", label, r, (int)r, buf);
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char c;
	res("recv(MSG_OOB) before any", recv(fd, &c, 1, MSG_OOB | MSG_DONTWAIT));
	atmark("before any", fd);
	poll1("POLLPRI before any", fd, POLLIN | POLLPRI, 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLPRI, .data.u64 = 1 }, out[2];
	res("epoll_ctl ADD EPOLLPRI", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: abc ! def */
	int n = epoll_wait(ep, out, 2, 5000);
	say("epoll_wait for the urgent byte = %d%s", n,
	    n == 1 && (out[0].events & EPOLLPRI) ? " (EPOLLPRI)" : "");
	await_peer();                           /* all of it sent */
	/* the whole stream is there (poll until "def" arrived: not timing) */
	for (int i = 0; i < 500; i++) {
		int avail = 0;
		if (ioctl(fd, FIONREAD, &avail) == 0 && avail >= 6)
			break;
		msleep(10);
	}
	poll1("POLLPRI with urgent data", fd, POLLIN | POLLPRI, 0);
	atmark("at the start", fd);
	recv_str("recv(16) stops at the mark", fd, 16, 0);
	atmark("after it", fd);
	recv_str("recv(MSG_OOB)", fd, 1, MSG_OOB);
	recv_str("recv(MSG_OOB) again", fd, 1, MSG_OOB | MSG_DONTWAIT);
	poll1("POLLPRI once read", fd, POLLIN | POLLPRI, 0);
	recv_str("recv(16) the rest", fd, 16, MSG_DONTWAIT);
	int one = 1;
	res("SO_OOBINLINE", setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)));
	tell();                                 /* client: x ? y */
	await_peer();
	for (int i = 0; i < 500; i++) {
		int avail = 0;
		if (ioctl(fd, FIONREAD, &avail) == 0 && avail >= 3)
			break;
		msleep(10);
	}
	atmark("inline: at the start", fd);
	recv_str("inline: recv(16) stops at the mark", fd, 16, 0);
	atmark("inline: after it", fd);
	recv_str("inline: recv(MSG_OOB)", fd, 1, MSG_OOB | MSG_DONTWAIT);
	recv_str("inline: recv(16)", fd, 16, MSG_DONTWAIT);
	tell();
	recv_str("recv at EOF", fd, 16, 0);
	close(ep);
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	res("send abc", send(fd, "abc", 3, 0));
	res("send ! (MSG_OOB)", send(fd, "!", 1, MSG_OOB));
	res("send def", send(fd, "def", 3, 0));
	tell();
	await_peer();
	res("send x", send(fd, "x", 1, 0));
	res("send ? (MSG_OOB)", send(fd, "?", 1, MSG_OOB));
	res("send y", send(fd, "y", 1, 0));
	tell();
	await_peer();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
