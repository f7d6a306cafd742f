/* SPDX-License-Identifier: MIT */
/* A connection in an epoll set, then poll()ed after an epoll_wait returned:
 * data sent while poll sleeps must wake it. */
#include "common.c"
#include <sys/epoll.h>

static uint64_t ms_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec*1000ull + t.tv_nsec/1000000; }

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[2];
	res("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: sends 1 byte in 50 ms */
	res("epoll_wait(-1)", epoll_wait(ep, out, 2, 3000));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	tell();                                 /* client: sends 1 byte in 100 ms */
	uint64_t t0 = ms_now();
	int r = poll1("poll(3000)", fd, POLLIN, 3000);
	(void)r;
	uint64_t el = ms_now() - t0;
	say("poll woke within 1 s: %s", yesno(el < 1000));
	fprintf(stderr, "elapsed %llu ms\n", (unsigned long long)el);
	/* the same with a thread-less epoll set B watching it too */
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	await_peer();
	close(ep);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	msleep(50);
	send_all(fd, "a", 1);
	await_peer();
	msleep(100);
	send_all(fd, "b", 1);
	msleep(100);
	tell();
	msleep(100);
	close(fd);
}

int main(void) { return run(server, client); }
