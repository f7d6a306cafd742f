/* SPDX-License-Identifier: MIT */
/* A connection added to set e1 (never waited on), then to e2: a thread
 * sleeping in e2 must be woken by data (the client sends once the server
 * sleeps). */
#include "common.h"
#include <sys/epoll.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	int e1 = epoll_create1(0), e2 = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[4];
	res("ctl e1", epoll_ctl(e1, EPOLL_CTL_ADD, fd, &ev));
	ev.data.u32 = 2;
	res("ctl e2", epoll_ctl(e2, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: sends 1 byte while we sleep */
	int n = epoll_wait(e2, out, 4, 2000);
	res("epoll_wait(e2, 2000)", n);
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	await_peer();
	tell();
	close(e1); close(e2);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	await_peer_asleep();                    /* in epoll_wait(e2) */
	send_all(fd, "a", 1);
	tell();
	await_peer();                           /* the server read it */
	close(fd);
}

int main(void) { return run(server, client); }
