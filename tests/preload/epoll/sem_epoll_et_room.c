/* SPDX-License-Identifier: MIT */
/* An epoll set with an accelerated connection and two EPOLLET pipes both
 * ready: epoll_wait(max 1) twice must report both pipes. */
#include "common.h"
#include <sys/epoll.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int p1[2], p2[2];
	if (pipe(p1) || pipe(p2)) fatal("pipe");
	int e = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[1];
	res("ctl conn", epoll_ctl(e, EPOLL_CTL_ADD, fd, &ev));
	ev.events = EPOLLIN | EPOLLET; ev.data.u32 = 2;
	res("ctl p1", epoll_ctl(e, EPOLL_CTL_ADD, p1[0], &ev));
	ev.data.u32 = 3;
	res("ctl p2", epoll_ctl(e, EPOLL_CTL_ADD, p2[0], &ev));
	if (write(p1[1], "a", 1) != 1 || write(p2[1], "b", 1) != 1) fatal("write");
	int seen = 0;
	for (int i = 0; i < 3; i++) {
		int n = epoll_wait(e, out, 1, 200);
		if (n == 1) seen |= 1 << out[0].data.u32;
	}
	say("pipes reported: p1 %s p2 %s", yesno(seen & 4), yesno(seen & 8));
	tell();
	close(e); close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	close(fd);
}

int main(void) { return run(server, client); }
