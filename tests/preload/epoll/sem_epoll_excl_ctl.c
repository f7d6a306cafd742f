/* SPDX-License-Identifier: MIT */
/* epoll_ctl's rules for EPOLLEXCLUSIVE on an accelerated connection, as
 * the kernel has them: ADD only (MOD of an exclusive registration is
 * EINVAL, whatever its events, and so is MOD asking for EPOLLEXCLUSIVE),
 * only with EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP/EPOLLET/EPOLLWAKEUP (with
 * EPOLLRDHUP or EPOLLONESHOT: EINVAL, nothing added), never for an epoll
 * fd; an exclusive registration reports like any other. */
#include "common.h"
#include <sys/epoll.h>

static int ep;

static void ctl(const char *label, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };
	res(label, epoll_ctl(ep, op, fd, &ev));
}

static void wait_report(const char *label, int timeout_ms)
{
	struct epoll_event ev[8];
	int n = epoll_wait(ep, ev, 8, timeout_ms);
	if (n < 0) {
		say("%s: epoll_wait = -1 %s", label, ename(errno));
		return;
	}
	char line[512];
	int len = snprintf(line, sizeof(line), "%s: epoll_wait = %d", label, n);
	for (int i = 0; i < n; i++)
		len += snprintf(line + len, sizeof(line) - (size_t)len, " [tag %llu %s]",
				(unsigned long long)ev[i].data.u64, pmask((int)ev[i].events));
	say("%s", line);
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	ep = epoll_create1(0);
	int other = epoll_create1(0);
	if (ep < 0 || other < 0)
		fatal("epoll_create1");

	ctl("ADD IN|EXCLUSIVE", EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLEXCLUSIVE, 1);
	ctl("MOD IN", EPOLL_CTL_MOD, fd, EPOLLIN, 2);
	ctl("MOD IN|OUT", EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 2);
	ctl("MOD IN|EXCLUSIVE", EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLEXCLUSIVE, 2);
	ctl("ADD again", EPOLL_CTL_ADD, fd, EPOLLIN, 2);
	wait_report("idle (still IN only)", 100);
	tell();                                 /* client: send 3 */
	await_peer();
	wait_report("peer sent 3", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	ctl("DEL", EPOLL_CTL_DEL, fd, 0, 0);
	ctl("DEL again", EPOLL_CTL_DEL, fd, 0, 0);

	ctl("ADD IN|RDHUP|EXCLUSIVE", EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP | EPOLLEXCLUSIVE, 3);
	ctl("ADD IN|ONESHOT|EXCLUSIVE", EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLONESHOT | EPOLLEXCLUSIVE, 3);
	ctl("ADD IN|PRI|EXCLUSIVE", EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLPRI | EPOLLEXCLUSIVE, 3);
	ctl("DEL (nothing was added)", EPOLL_CTL_DEL, fd, 0, 0);
	ctl("ADD epoll fd with EXCLUSIVE", EPOLL_CTL_ADD, other, EPOLLIN | EPOLLEXCLUSIVE, 3);
	ctl("ADD IN|OUT|ET|EXCLUSIVE", EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLET | EPOLLEXCLUSIVE, 4);
	wait_report("fresh (OUT edge)", 1000);
	wait_report("no new edge", 100);
	ctl("MOD IN|OUT|ET", EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT | EPOLLET, 5);
	ctl("DEL", EPOLL_CTL_DEL, fd, 0, 0);
	ctl("ADD IN (plain)", EPOLL_CTL_ADD, fd, EPOLLIN, 6);
	ctl("MOD IN|EXCLUSIVE (plain registration)", EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLEXCLUSIVE, 6);
	ctl("MOD IN|OUT (plain registration)", EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 7);
	wait_report("plain registration", 1000);
	ctl("DEL", EPOLL_CTL_DEL, fd, 0, 0);
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
