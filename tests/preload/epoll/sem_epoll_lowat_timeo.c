/* SPDX-License-Identifier: MIT */
/* SO_RCVLOWAT + SO_RCVTIMEO on a connection in an epoll set: the mark
 * reached while it sleeps must end the wait, not the 2 s timeout (the
 * client sends once the server sleeps, and the time is counted from the
 * send that reaches the mark, not from a sleep of the client's). */
#include "common.h"
#include <sys/epoll.h>

static uint64_t ms_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec*1000ull + t.tv_nsec/1000000; }

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[256];
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[2];
	res("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: 1 byte, while we sleep */
	res("epoll_wait", epoll_wait(ep, out, 2, 3000));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	int v = 100;
	struct timeval tv = { 2, 0 };
	res("SO_RCVLOWAT", setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)));
	res("SO_RCVTIMEO", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	tell();                                 /* client: 60, then 60, while we sleep */
	res("recv(200)", recv(fd, buf, 200, 0));
	uint64_t t1 = ms_now();
	uint64_t tm = await_u64();              /* when the client sent the second 60 */
	uint64_t el = t1 > tm ? t1 - tm : 0;
	say("within 1 s: %s", yesno(el < 1000));
	fprintf(stderr, "elapsed %llu\n", (unsigned long long)el);
	close(ep); close(fd);
}

static void client(void)
{
	int fd = client_conn();
	char b[60] = {0};
	await_peer();
	await_peer_asleep();                    /* in epoll_wait */
	send_all(fd, "a", 1);
	await_peer();
	await_peer_asleep();                    /* in recv(200) */
	send_all(fd, b, 60);
	msleep(100);                            /* apart (the outcome does not depend on it) */
	uint64_t tm = ms_now();
	send_all(fd, b, 60);
	tell_u64(tm);
	close(fd);
}

int main(void) { return run(server, client); }
