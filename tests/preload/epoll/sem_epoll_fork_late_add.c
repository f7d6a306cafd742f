/* SPDX-License-Identifier: MIT */
/* An epoll set shared across fork, empty when the child starts waiting in
 * it; the parent then accepts a connection and adds it to the set, and the
 * client sends: the child's wait must report the connection (on the kernel
 * the set is one, whoever waits in it).  The parent adds the connection
 * once the child sleeps in its wait (its state; after 1 s anyway). */
// expect: xfail a child waiting in an inherited set with no connection in it is not woken by one the parent adds later (docs/limits.md, fork)
#include "common.h"
#include <sys/epoll.h>

static void server(int lfd)
{
	int ep = epoll_create1(0), p[2];
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 }, out[4];
	char buf[64];
	if (ep < 0 || pipe(p) < 0)
		fatal("epoll_create1/pipe");
	pid_t kid = t_fork();
	if (kid == 0) {
		close(p[0]);
		if (write(p[1], "w", 1) != 1)
			_exit(2);
		int n = epoll_wait(ep, out, 4, 3000);
		if (n == 1)
			say("child: epoll_wait(3000) in the empty set = 1 [tag %llu %s]",
			    (unsigned long long)out[0].data.u64, pmask((int)out[0].events));
		else
			res("child: epoll_wait(3000) in the empty set", n);
		fflush(stdout);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], buf, 1) != 1)
		fatal("the child did not start");
	close(p[0]);
	wait_state_for(kid, kid, 'S', 1000);    /* in its epoll_wait */
	tell();                                 /* the client connects */
	int fd = server_conn(lfd);
	res("ADD C to the shared set", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* the client sends 1 byte */
	int st;
	if (waitpid(kid, &st, 0) != kid)
		fatal("waitpid");
	say("child exited 0: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	wait_inq(fd, 1);
	res("recv", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();
	await_peer();
	close(ep);
	close(fd);
}

static void client(void)
{
	await_peer();
	int fd = client_conn();
	await_peer();
	send_all(fd, "a", 1);
	await_peer();
	close(fd);
	tell();
}

int main(void)
{
	return run(server, client);
}
