/* SPDX-License-Identifier: MIT */
/* A read in one thread while another thread creates, nests and closes epoll
 * sets holding the connection (the nested set is held readable): no use
 * after free (it crashed before the sets got their life lock). */
#include "common.h"
#include <pthread.h>
#include <sys/epoll.h>

static int X, Y;
static volatile int stop;

static void *reader(void *a)
{
	(void)a;
	char buf[256];
	long n = 0;
	while (!stop) {
		ssize_t r = recv(X, buf, sizeof(buf), 0);
		if (r <= 0) break;
		n += r;
	}
	return (void *)n;
}

static void server(int lfd)
{
	X = server_conn(lfd);
	Y = server_conn(lfd);
	tell();
	await_peer();      /* Y has a byte, X streams */
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	int held = 0;
	for (int i = 0; i < 20000; i++) {
		int k = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 };
		epoll_ctl(k, EPOLL_CTL_ADD, Y, &ev);
		struct pollfd p = { .fd = k, .events = POLLIN };
		held += poll(&p, 1, 0);
		close(k);
	}
	stop = 1;
	tell();
	pthread_join(t, NULL);
	say("done %s", yesno(held > 0));
	close(X); close(Y);
}

static void client(void)
{
	int x = client_conn();
	int y = client_conn();
	await_peer();
	send_all(y, "y", 1);
	tell();
	char buf[256] = {0};
	int fl = fcntl(x, F_GETFL);
	fcntl(x, F_SETFL, fl | O_NONBLOCK);
	struct pollfd p = { .fd = t_p2c[0], .events = POLLIN };
	while (poll(&p, 1, 0) == 0) {
		if (send(x, buf, 64, MSG_NOSIGNAL) < 0 && errno != EAGAIN) break;
	}
	await_peer();
	close(x); close(y);
}

int main(void) { return run(server, client); }
