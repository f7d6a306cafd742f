/* SPDX-License-Identifier: MIT */
/* MSG_MORE bytes, held; the reader starts waiting in a new epoll set while
 * the writer's control thread ends the hold (ctl_cork_scan, group lock
 * held): the wake-up needs the reader's new CELL message, pumped under
 * the same group lock (it deadlocked the control thread; the window is
 * narrow: a review found it with a sleep added in sc__cork_expire). */
#include "common.h"
#include <sys/epoll.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                   /* the client sent 100 with MSG_MORE */
	msleep(350);
	int ep = epoll_create1(0);
	struct epoll_event e = { .events = EPOLLIN, .data.fd = fd };
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
	int n = epoll_wait(ep, &e, 1, 3000);
	say("epoll_wait within 3 s: %d", n);
	char buf[200];
	res("recv (DONTWAIT)", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	char buf[100] = { 0 };
	res("send 100 MSG_MORE", send(fd, buf, 100, MSG_MORE));
	tell();
	await_peer();
	/* a new connection needs the control thread (the OPEN) */
	int fd2 = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = t_addr();
	(void)a;
	close(fd2);
	close(fd);
}

int main(void)
{
	return run(server, client);
}
