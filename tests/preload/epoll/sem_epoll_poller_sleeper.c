/* SPDX-License-Identifier: MIT */
/* One epoll set, two threads, as Go's runtime uses its netpoller's: a
 * sleeper always in epoll_wait(-1), and a poller that looks with timeout
 * 0 a couple of times after each request, then stops.  The main thread
 * sends a byte, the echo comes back, and whichever thread sees it tells
 * the main thread.  When the poller took the set's wake-up and the
 * sleeper went back to sleep, the next echo must still wake the sleeper:
 * the poller must leave the set armed for it (it hung after a few hundred
 * round trips when it did not). */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "common.h"

#define ROUNDS 3000
#define POLLS 2

static int ep, efd;
static sem_t go_poll;
static atomic_int stop;

static void tell_main(void)
{
	uint64_t one = 1;
	if (write(efd, &one, sizeof(one)) != sizeof(one))
		fatal("eventfd write");
}

static void *sleeper(void *arg)
{
	(void)arg;
	struct epoll_event ev[4];
	while (!atomic_load(&stop))
		if (epoll_wait(ep, ev, 4, -1) > 0)
			tell_main();
	return NULL;
}

static void *poller(void *arg)
{
	(void)arg;
	struct epoll_event ev[4];
	for (;;) {
		sem_wait(&go_poll);
		if (atomic_load(&stop))
			return NULL;
		for (int k = 0; k < POLLS; k++)
			if (epoll_wait(ep, ev, 4, 0) > 0) {
				tell_main();
				break;
			}
	}
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char c;
	int n = 0;
	while (recv_all(fd, &c, 1) == 1 && c != 'q' && send_all(fd, &c, 1) == 1)
		n++;
	say("server: echoed %d bytes", n);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	ep = epoll_create1(0);
	efd = eventfd(0, 0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = 1 };
	res("client: epoll_ctl ADD (EPOLLIN | EPOLLET)", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	sem_init(&go_poll, 0, 0);
	pthread_t ts, tp;
	pthread_create(&ts, NULL, sleeper, NULL);
	pthread_create(&tp, NULL, poller, NULL);
	int good = 0;
	for (int i = 0; i < ROUNDS; i++) {
		char c = (char)('a' + i % 16), got = 0;       /* a..p: never the 'q' that ends */
		if (send(fd, &c, 1, 0) != 1)
			fatal("send");
		sem_post(&go_poll);
		for (;;) {
			uint64_t v;
			ssize_t r = recv(fd, &got, 1, 0);
			if (r == 1)
				break;
			if (r == 0 || errno != EAGAIN)
				fatal("recv: %zd", r);
			if (read(efd, &v, sizeof(v)) != sizeof(v))     /* a thread saw news */
				fatal("eventfd read");
		}
		good += got == c;
	}
	say("client: %d round trips, %d echoes right", ROUNDS, good);
	atomic_store(&stop, 1);
	sem_post(&go_poll);
	pthread_join(tp, NULL);
	send_all(fd, "q", 1);   /* the server closes: the sleeper's last event */
	pthread_join(ts, NULL);
	close(fd);
}

int main(void)
{
	return run(server, client);
}
