/* SPDX-License-Identifier: MIT */
// env: SHORTCUT_RMEM=16K SHORTCUT_WMEM=16K
/* Go's netpoller again (sem_epoll_poller_sleeper): a sleeper always in
 * epoll_wait(-1) and a poller that looks with timeout 0 until one look
 * reports something, on one connection registered as Go registers it
 * (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET).  Each round the server's
 * ring is full (a send ran out of room), the client reads a byte (room:
 * an OUT-only edge, which the reader does not wait for) and a moment
 * later sends one (IN, which it does).  When the poller's look reports
 * the room and the byte comes within that same call, the byte's edge
 * must still reach someone: the sleeper, if the poller stops.  (The
 * poller's later look at it in the same call deferred it to the next
 * call, which the sleeper was not woken for: a Go echo server's io.Copy
 * never heard of its client's SHUT_WR, in CI.)  Small rings (the env line
 * above, run.sh) make a full ring, and an OUT-only edge, a few sends
 * away; both threads on one CPU make the sleeper late.  A round runs
 * until the byte is heard of; a lost edge is a round with no news for
 * 10 s.  Rounds for 5 s at most. */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "common.h"

#define ROUNDS 20000
#define POLLS 2000

static int ep, efd, sfd;
static sem_t go_poll, p_done;
static atomic_int stop;

static void news(struct epoll_event *ev, int n)
{
	uint64_t one = 1;
	for (int i = 0; i < n; i++)
		if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			if (write(efd, &one, sizeof(one)) != sizeof(one))
				fatal("eventfd write");
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);        /* (where it can: a hint) */
}

static void *sleeper(void *arg)
{
	(void)arg;
	pin(0);
	struct epoll_event ev[8];
	for (;;) {
		int n = epoll_wait(ep, ev, 8, -1);
		if (n > 0)
			news(ev, n);
	}
	return NULL;
}

static void *poller(void *arg)
{
	(void)arg;
	pin(0);
	struct epoll_event ev[8];
	for (;;) {
		sem_wait(&go_poll);
		if (atomic_load(&stop))
			return NULL;
		for (int k = 0; k < POLLS; k++) {
			int n = epoll_wait(ep, ev, 8, 0);
			if (n > 0) {
				news(ev, n);
				break;
			}
		}
		sem_post(&p_done);
	}
}

static void server(int lfd)
{
	sfd = server_conn(lfd);
	fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
	ep = epoll_create1(0);
	efd = eventfd(0, EFD_NONBLOCK);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.u32 = 1 };
	res("server: epoll_ctl ADD", epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev));
	sem_init(&go_poll, 0, 0);
	sem_init(&p_done, 0, 0);
	pthread_t ts, tp;
	pthread_create(&ts, NULL, sleeper, NULL);
	pthread_create(&tp, NULL, poller, NULL);
	static char buf[65536];
	int lost = 0;
	long t0 = t_now_ms();
	for (int i = 0; i < ROUNDS && t_now_ms() - t0 < 5000; i++) {
		while (send(sfd, buf, sizeof(buf), 0) > 0)
			;
		if (errno != EAGAIN)
			fatal("send: %s", ename(errno));
		uint64_t stale;
		if (read(efd, &stale, sizeof(stale)) < 0 && errno != EAGAIN)   /* Go's prepareRead */
			fatal("eventfd read");
		if (i)
			sem_wait(&p_done);      /* its last look is over */
		sem_post(&go_poll);
		tell();
		for (;;) {
			char c;
			ssize_t r = recv(sfd, &c, 1, 0);
			if (r == 1)
				break;
			if (r == 0 || errno != EAGAIN)
				fatal("recv: %zd %s", r, ename(errno));
			struct pollfd p = { .fd = efd, .events = POLLIN };
			if (poll(&p, 1, 10000) == 0) {
				fprintf(stderr, "round %d: no news in 10 s, %d bytes readable\n",
					i, readable_bytes(sfd));
				lost++;
				goto out;
			}
			uint64_t v;
			if (read(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				fatal("eventfd read");
		}
	}
out:
	say("server: %s", lost ? "an edge lost" : "every byte heard of");
	atomic_store(&stop, 1);
	sem_post(&go_poll);
	pthread_join(tp, NULL);
	close(t_p2c[1]);
	shutdown(sfd, SHUT_RDWR);
	close(sfd);
}

static void spin_ns(long ns)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

static void client(void)
{
	int fd = client_conn();
	static char buf[65536];
	for (int i = 0;; i++) {
		char t;
		ssize_t g = read(t_p2c[0], &t, 1);
		if (g != 1)
			break;
		if (recv(fd, buf, sizeof(buf), 0) <= 0)
			break;
		spin_ns((long)(i * 37 % 41) * 250);
		if (send(fd, "x", 1, 0) != 1)
			break;
	}
	say("client: done");
	close(fd);
}

int main(void)
{
	return run(server, client);
}
