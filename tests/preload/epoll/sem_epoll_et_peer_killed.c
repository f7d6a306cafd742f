/* SPDX-License-Identifier: MIT */
/* An EPOLLET registration hears of its peer's death: killed with bytes it
 * had not read (a reset: IN|RDHUP|HUP|ERR, once), and killed with nothing
 * unread (an end: IN|RDHUP).  Under the interposer the reset was no edge
 * (the connection's error was not part of the state edges are told
 * from): an nginx worker kept the connections of a wrk that exited
 * mid-response until its keepalive timeout. */
#include "epoll_common.h"

enum { K_CONNECT = 1, K_KILL, K_END };

static void server(int lfd)
{
	char buf[256];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	memset(buf, 'r', sizeof(buf));
	for (int unread = 1; unread >= 0; unread--) {
		say("--- the peer is killed, %s", unread ? "with bytes it did not read" : "nothing unread");
		tell_u64(K_CONNECT);
		int fd = server_conn(lfd);
		await_peer();
		if (unread)
			res("send 100", send_all(fd, buf, 100));
		ctl("ADD IN|OUT|RDHUP|ET", ep, EPOLL_CTL_ADD, fd,
		    EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
		wait_report(ep, "writable", 1000);
		wait_report(ep, "before", 100);
		tell_u64(K_KILL);
		await_peer();
		wait_ev(fd, unread ? POLLERR : POLLRDHUP);      /* its end has arrived */
		wait_report(ep, "peer killed", 1000);
		wait_report(ep, "no news", 100);
		res("recv", recv(fd, buf, sizeof(buf), 0));
		res("recv", recv(fd, buf, sizeof(buf), 0));
		res("close", close(fd));
	}
	tell_u64(K_END);
	close(ep);
}

/* the peer: a process of its own, killed when told */
static void client(void)
{
	pid_t gc = -1;
	for (;;) {
		uint64_t c = await_u64();
		if (c == K_END)
			break;
		if (c == K_CONNECT) {
			gc = connected_kid("the peer did not connect");
		} else {
			kill(gc, SIGKILL);
			waitpid(gc, NULL, 0);
		}
		tell();
	}
}

int main(void)
{
	return run(server, client);
}
