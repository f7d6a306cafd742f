/* SPDX-License-Identifier: MIT */
/* A connection in an epoll set, then poll()ed after an epoll_wait returned:
 * data sent while poll sleeps must wake it (the client sends once the
 * server sleeps; the time is counted from that send). */
#include "common.h"
#include <sys/epoll.h>

static uint64_t ms_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec*1000ull + t.tv_nsec/1000000; }

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[2];
	res("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: sends 1 byte while we sleep */
	res("epoll_wait(-1)", epoll_wait(ep, out, 2, 3000));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	tell();                                 /* client: sends 1 byte while we sleep */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r = poll(&p, 1, 3000);
	uint64_t t1 = ms_now();
	if (r < 0)
		say("poll(3000): poll = -1 %s", ename(errno));
	else
		say("poll(3000): poll = %d revents=%s", r, pmask(p.revents));
	uint64_t ts = await_u64();              /* when the client sent */
	uint64_t el = t1 > ts ? t1 - ts : 0;
	say("poll woke within 1 s: %s", yesno(el < 1000));
	fprintf(stderr, "elapsed %llu ms\n", (unsigned long long)el);
	/* the same with a thread-less epoll set B watching it too */
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	close(ep);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	await_peer_asleep();                    /* in epoll_wait */
	send_all(fd, "a", 1);
	await_peer();
	await_peer_asleep();                    /* in poll */
	uint64_t ts = ms_now();
	send_all(fd, "b", 1);
	tell_u64(ts);
	await_peer();                           /* the server read it */
	close(fd);
}

int main(void) { return run(server, client); }
