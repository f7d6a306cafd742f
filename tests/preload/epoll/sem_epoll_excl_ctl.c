/* SPDX-License-Identifier: MIT */
/* epoll_ctl's rules for EPOLLEXCLUSIVE on an accelerated connection, as
 * the kernel has them: ADD only (MOD of an exclusive registration is
 * EINVAL, whatever its events, and so is MOD asking for EPOLLEXCLUSIVE),
 * only with EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP/EPOLLET/EPOLLWAKEUP (with
 * EPOLLRDHUP or EPOLLONESHOT: EINVAL, nothing added), never for an epoll
 * fd; an exclusive registration reports like any other. */
#include "epoll_common.h"

static int ep;

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	ep = epoll_create1(0);
	int other = epoll_create1(0);
	if (ep < 0 || other < 0)
		fatal("epoll_create1");

	ctl("ADD IN|EXCLUSIVE", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLEXCLUSIVE, 1);
	ctl("MOD IN", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 2);
	ctl("MOD IN|OUT", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 2);
	ctl("MOD IN|EXCLUSIVE", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLEXCLUSIVE, 2);
	ctl("ADD again", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 2);
	wait_report(ep, "idle (still IN only)", 100);
	tell();                                 /* client: send 3 */
	await_peer();
	wait_report(ep, "peer sent 3", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	ctl("DEL", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ctl("DEL again", ep, EPOLL_CTL_DEL, fd, 0, 0);

	ctl("ADD IN|RDHUP|EXCLUSIVE", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP | EPOLLEXCLUSIVE, 3);
	ctl("ADD IN|ONESHOT|EXCLUSIVE", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLONESHOT | EPOLLEXCLUSIVE, 3);
	ctl("ADD IN|PRI|EXCLUSIVE", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLPRI | EPOLLEXCLUSIVE, 3);
	ctl("DEL (nothing was added)", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ctl("ADD epoll fd with EXCLUSIVE", ep, EPOLL_CTL_ADD, other, EPOLLIN | EPOLLEXCLUSIVE, 3);
	ctl("ADD IN|OUT|ET|EXCLUSIVE", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET | EPOLLEXCLUSIVE, 4);
	wait_report(ep, "fresh (OUT edge)", 1000);
	wait_report(ep, "no new edge", 100);
	ctl("MOD IN|OUT|ET", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT | EPOLLET, 5);
	ctl("DEL", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ctl("ADD IN (plain)", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 6);
	ctl("MOD IN|EXCLUSIVE (plain registration)", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLEXCLUSIVE, 6);
	ctl("MOD IN|OUT (plain registration)", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 7);
	wait_report(ep, "plain registration", 1000);
	ctl("DEL", ep, EPOLL_CTL_DEL, fd, 0, 0);
	tell();                                 /* client: done */
	await_peer();
	close(other);
	close(ep);
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	res("send 3", send(fd, "abc", 3, 0));
	tell();
	await_peer();
	res("close", close(fd));
	tell();
}

int main(void)
{
	return run(server, client);
}
