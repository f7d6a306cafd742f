/* SPDX-License-Identifier: MIT */
/* An epoll set shared across fork: the child waits in it while the
 * parent's accelerated connection in it has data the parent has not read.
 * The child's wait reports the connection at once (level-triggered), as on
 * the kernel, without busy-looping (its CPU time is checked; from the
 * review's t_fork_spin: the child's wait once spun while the parent had
 * not drained), and the parent's next wait reports it too. */
// expect: switched 2
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>

static long cpu_ms(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000L +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
}

static void report(const char *label, int n, const struct epoll_event *out)
{
	if (n == 1)
		say("%s = 1 [tag %llu %s]", label, (unsigned long long)out[0].data.u64,
		    pmask((int)out[0].events));
	else
		res(label, n);
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64];
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 }, out[2];
	res("ADD C", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	res("epoll_wait(0)", epoll_wait(ep, out, 2, 0));
	res("epoll_wait(50)", epoll_wait(ep, out, 2, 50));     /* a wait that sleeps */
	tell();                                 /* the client sends 1 byte */
	await_peer();
	wait_inq(fd, 1);                        /* it is here */
	pid_t p = t_fork();
	if (p == 0) {
		long c0 = cpu_ms();
		int n = epoll_wait(ep, out, 2, 1000);
		long used = cpu_ms() - c0;
		report("child: epoll_wait(1000) in the inherited set", n, out);
		say("child: CPU time in it under 100 ms: %s", yesno(used < 100));
		fflush(stdout);
		_exit(0);
	}
	int st;
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
		fatal("the child failed");
	int n = epoll_wait(ep, out, 2, 1000);
	report("epoll_wait(1000), not drained", n, out);
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	res("epoll_wait(0), drained", epoll_wait(ep, out, 2, 0));
	tell();
	close(ep);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	send_all(fd, "a", 1);
	tell();
	await_peer();                           /* the server is done */
	close(fd);
}

int main(void)
{
	return run(server, client);
}
