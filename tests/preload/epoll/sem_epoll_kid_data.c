/* SPDX-License-Identifier: MIT */
/* A nested epoll set and a pipe registered in the outer set with the same
 * epoll_data: the pipe's event must be reported. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>
static double cpu(void){struct rusage u;getrusage(RUSAGE_SELF,&u);return u.ru_utime.tv_sec+u.ru_stime.tv_sec+(u.ru_utime.tv_usec+u.ru_stime.tv_usec)/1e6;}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int p[2];
	if (pipe(p)) fatal("pipe");
	int k = epoll_create1(0), o = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 }, out[2];
	res("ctl k conn", epoll_ctl(k, EPOLL_CTL_ADD, fd, &ev));
	res("ctl o k", epoll_ctl(o, EPOLL_CTL_ADD, k, &ev));
	res("ctl o pipe", epoll_ctl(o, EPOLL_CTL_ADD, p[0], &ev));
	if (write(p[1], "a", 1) != 1) fatal("write");
	double c0 = cpu();
	res("epoll_wait(o, 500)", epoll_wait(o, out, 2, 500));
	fprintf(stderr, "cpu %.3f\n", cpu() - c0);
	tell();
	close(o); close(k); close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	close(fd);
}

int main(void) { return run(server, client); }
