/* SPDX-License-Identifier: MIT */
/* epoll over an accelerated socket: level-triggered (reported again while
 * data remains), EPOLLET (once per arrival), EPOLLONESHOT (once, then
 * nothing until EPOLL_CTL_MOD), EPOLL_CTL_DEL, ctl errors, a set mixing the
 * socket with a pipe, and a closed fd leaving the set (only when its last
 * duplicate is closed). */
#include "epoll_common.h"

static int ep;

static void drain_quiet(int fd)
{
	char buf[4096];
	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
	}
}

/* the client sends n bytes when told to */
static void ask(uint64_t n)
{
	tell_u64(n);
	await_peer();
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[100];
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fatal("epoll_create1");

	ctl("ADD EPOLLIN (level)", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1);
	wait_report(ep, "idle", 100);
	ask(10);
	wait_report(ep, "data", 1000);
	res("recv 4", recv(fd, buf, 4, 0));
	wait_report(ep, "6 bytes remain", 100);
	res("recv 6", recv(fd, buf, 6, 0));
	wait_report(ep, "drained", 100);

	ctl("MOD EPOLLIN|EPOLLET", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET, 1);
	wait_report(ep, "edge, idle", 100);
	ask(10);
	wait_report(ep, "edge, data", 1000);
	wait_report(ep, "edge, no new data", 100);
	res("recv 4", recv(fd, buf, 4, 0));
	wait_report(ep, "edge, after partial read", 100);
	drain_quiet(fd);
	res("recv(DONTWAIT) drained", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	ask(10);
	wait_report(ep, "edge, new data", 1000);
	wait_report(ep, "edge, again", 100);
	drain_quiet(fd);

	ctl("MOD EPOLLIN|EPOLLONESHOT", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 1);
	ask(10);
	wait_report(ep, "oneshot, data", 1000);
	wait_report(ep, "oneshot, disabled", 100);
	ask(10);
	wait_report(ep, "oneshot, more data while disabled", 100);
	ctl("MOD re-arm", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 2);
	wait_report(ep, "oneshot, re-armed", 1000);
	wait_report(ep, "oneshot, disabled again", 100);
	drain_quiet(fd);

	ctl("MOD EPOLLIN|EPOLLOUT", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 3);
	wait_report(ep, "writable", 1000);
	ctl("MOD EPOLLIN", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 3);
	ctl("DEL", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ask(10);
	wait_report(ep, "deleted, data", 100);
	ctl("DEL again", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ctl("MOD unregistered", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 1);
	ctl("ADD", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 4);
	ctl("ADD twice", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 4);
	wait_report(ep, "re-added with data pending", 1000);
	drain_quiet(fd);

	/* a pipe in the same set */
	int pp[2];
	if (pipe(pp) < 0)
		fatal("pipe");
	ctl("ADD pipe", ep, EPOLL_CTL_ADD, pp[0], EPOLLIN, 5);
	wait_report(ep, "mixed, idle", 100);
	if (write(pp[1], "p", 1) != 1)
		fatal("write");
	wait_report(ep, "mixed, pipe ready", 1000);
	ask(10);
	wait_report(ep, "mixed, both ready", 1000);
	if (read(pp[0], buf, 1) != 1)
		fatal("read");
	wait_report(ep, "mixed, socket ready", 1000);
	drain_quiet(fd);
	wait_report(ep, "mixed, idle again", 100);
	struct epoll_event evs[1];
	res("epoll_wait with maxevents 0", epoll_wait(ep, evs, 0, 0));

	/* a second connection: closing its fd removes it from the set, but
	 * only once no duplicate is left */
	tell_u64(0);                            /* client: connect again */
	int fd2 = server_conn(lfd);
	await_peer();
	int dup2fd = dup(fd2);
	ctl("ADD second connection EPOLLOUT", ep, EPOLL_CTL_ADD, fd2, EPOLLOUT, 6);
	wait_report(ep, "second connection", 1000);
	res("close second connection (a duplicate remains)", close(fd2));
	wait_report(ep, "after closing fd with a duplicate", 1000);
	res("close duplicate", close(dup2fd));
	wait_report(ep, "after closing the last fd", 100);
	ctl("DEL of closed fd", ep, EPOLL_CTL_DEL, fd2, 0, 0);
	ctl("DEL of the pipe", ep, EPOLL_CTL_DEL, pp[0], 0, 0);

	ctl("ADD of a registered fd", ep, EPOLL_CTL_ADD, fd, 0, 7);
	ctl("MOD EPOLLIN|EPOLLRDHUP", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLRDHUP, 7);
	tell_u64(1);                            /* client: SHUT_WR both connections */
	await_peer();
	wait_report(ep, "peer SHUT_WR", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close epoll fd", close(ep));
	res("close", close(fd));
	close(pp[0]);
	close(pp[1]);
}

static void client(void)
{
	int fd = client_conn(), fd2 = -1;
	char buf[4096];

	for (;;) {
		uint64_t n = await_u64();
		if (n == 0) {
			fd2 = client_conn();
			tell();
			continue;
		}
		if (n == 1)
			break;
		pattern(buf, n, 0, 12);
		if (send_all(fd, buf, n) != (ssize_t)n)
			fatal("send");
		tell();
	}
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("recv on the second connection (peer closed)", recv(fd2, buf, sizeof(buf), 0));
	res("close second", close(fd2));
	tell();
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
