/* SPDX-License-Identifier: MIT */
/* A server forks while another of its threads changes its listener (a
 * multi-threaded server that forks workers or helpers): one thread turns
 * TCP_DEFER_ACCEPT on and off on the listener without a pause, while the
 * main thread forks 200 children, one at a time, each of which _exit(0)s
 * at once, and reaps each.  Then the thread stops, and one connection is
 * accepted and echoes 100 bytes.
 *
 * Under shortcut each change of the option writes the listener's entry on
 * its offer board under the board file's flock, and a fork child takes
 * the same flock for the listener it inherits (before fork() returns in
 * it).  A flock belongs to the open file description: one held by the
 * other thread at the fork stayed held by the child's copy of that fd
 * once the thread closed its own, so the child waited for itself for ever
 * (the run hit its alarm). */
#include <pthread.h>

#include "common.h"

#define CHILDREN 200

static _Atomic bool stop;

static void *toggler(void *arg)
{
	int lfd = *(int *)arg, v = 0;
	while (!stop) {
		v ^= 1;
		if (setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &v, sizeof(v)) < 0)
			fatal("setsockopt");
	}
	return NULL;
}

static void server(int lfd)
{
	pthread_t t;
	if (pthread_create(&t, NULL, toggler, &lfd))
		fatal("pthread_create");
	int ok = 0;
	fflush(stdout);
	for (int i = 0; i < CHILDREN; i++) {
		pid_t pid = t_fork();
		if (pid == 0)
			_exit(0);
		int st;
		if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	stop = true;
	pthread_join(t, NULL);
	int off = 0;
	setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &off, sizeof(off));
	say("%d children forked while the listener changed, %d exited 0", CHILDREN, ok);
	tell();
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	char buf[100];
	ssize_t n = recv_all(fd, buf, sizeof(buf));
	res("recv", n);
	res("send", send_all(fd, buf, sizeof(buf)));
	close(fd);
}

static void client(void)
{
	char buf[100], back[100];
	await_peer();
	int fd = raw_connect();
	pattern(buf, sizeof(buf), 0, 7);
	res("send", send_all(fd, buf, sizeof(buf)));
	say("echo: %s", yesno(recv_all(fd, back, sizeof(back)) == (ssize_t)sizeof(back) &&
			      !memcmp(buf, back, sizeof(buf))));
	close(fd);
}

int main(void)
{
	return run(server, client);
}
