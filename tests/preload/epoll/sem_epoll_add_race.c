/* SPDX-License-Identifier: MIT */
/* A thread blocked in epoll_wait on a set holding no accelerated socket yet
 * (only a pipe), while another thread adds the first connection to it: the
 * waiter reports the connection with the program's epoll_data (issue 11,
 * item 2: it returned the interposer's internal cookie, 3 runs of 3).
 * Many rounds, each with a fresh set and connection; the data is already
 * there when the connection is added in one round of two, and sent after
 * the add in the other.  The waiter says it is about to wait (a pipe)
 * before the add: whether it is already asleep in the kernel then is the
 * scheduler's business, and either way the result must be the same. */
#include "common.h"
#include <pthread.h>
#include <sys/epoll.h>

#define ROUNDS 40

static void server(int lfd)
{
	for (int i = 0; i < ROUNDS; i++) {
		int fd = server_conn(lfd);
		await_u64();                    /* send now (before or after the add) */
		send_all(fd, "x", 1);
		char b;
		recv_all(fd, &b, 1);            /* the client's "done" */
		close(fd);
	}
	say("served %d rounds", ROUNDS);
}

static int t_ep, t_ready[2];
static _Atomic int t_n;
static struct epoll_event w_out[4];

static void *waiter(void *arg)
{
	(void)arg;
	char b = 'w';
	if (write(t_ready[1], &b, 1) != 1)
		fatal("write");
	t_n = epoll_wait(t_ep, w_out, 4, 15000);
	return NULL;
}

static void client(void)
{
	int good = 0, pipefd[2];
	if (pipe(t_ready) < 0 || pipe(pipefd) < 0)
		fatal("pipe");
	for (int i = 0; i < ROUNDS; i++) {
		int fd = client_conn();
		bool before = i % 2 == 0;
		uint64_t tag = 1000 + (uint64_t)i;
		t_ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 };
		epoll_ctl(t_ep, EPOLL_CTL_ADD, pipefd[0], &ev);        /* never readable */
		if (before) {
			tell_u64(1);
			/* until the byte is here */
			int avail = 0;
			while (ioctl(fd, FIONREAD, &avail) == 0 && avail < 1) {
				struct pollfd p = { .fd = fd, .events = POLLIN };
				poll(&p, 1, -1);
			}
		}
		pthread_t th;
		if (pthread_create(&th, NULL, waiter, NULL))
			fatal("pthread_create");
		char b;
		if (read(t_ready[0], &b, 1) != 1)
			fatal("read");
		ev.events = EPOLLIN;
		ev.data.u64 = tag;
		if (epoll_ctl(t_ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			fatal("epoll_ctl");
		if (!before)
			tell_u64(2);
		pthread_join(th, NULL);
		int n = t_n;
		if (n == 1 && w_out[0].data.u64 == tag && (w_out[0].events & EPOLLIN))
			good++;
		else
			say("round %d (data %s the add): epoll_wait = %d data %llu events %s", i,
			    before ? "before" : "after", n,
			    n > 0 ? (unsigned long long)w_out[0].data.u64 : 0ull,
			    n > 0 ? pmask((int)w_out[0].events) : "-");
		char x;
		recv_all(fd, &x, 1);
		send_all(fd, "d", 1);
		close(t_ep);
		close(fd);
	}
	say("rounds with the connection's own data and EPOLLIN: %d of %d", good, ROUNDS);
}

int main(void)
{
	return run(server, client);
}
