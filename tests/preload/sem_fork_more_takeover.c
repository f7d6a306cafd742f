/* SPDX-License-Identifier: MIT */
/* The owner sends with MSG_MORE (held) and exits; its fork child, which
 * holds the socket, then writes.  The peer must get the held bytes, then
 * the child's.  (The peer is stopped while the owner dies, so the child's
 * takeover marks the owner's half frozen before the peer notices the
 * death: the order a busy peer can also give.) */
#include "common.c"
#include <pthread.h>

static pid_t spid;

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[64], want[51];
	memset(want, 'm', 50);
	want[50] = 'x';
	ssize_t n = recv_all(fd, buf, 51);
	say("got %zd of 51, exact: %s", n, yesno(n == 51 && !memcmp(buf, want, 51)));
	close(fd);
}

static void *cont(void *arg)
{
	(void)arg;
	msleep(400);
	kill(spid, SIGCONT);
	return NULL;
}

static void client(void)
{
	int fd = client_conn();
	spid = getppid();
	pid_t a = getpid();
	fflush(t_out);
	pid_t k = fork();
	if (k == 0) {
		while (getppid() == a)
			msleep(5);
		msleep(20);
		pthread_t t;
		pthread_create(&t, NULL, cont, NULL);
		send(fd, "x", 1, MSG_NOSIGNAL);
		pthread_join(t, NULL);
		msleep(500);
		_exit(0);
	}
	msleep(100);
	kill(spid, SIGSTOP);
	msleep(50);
	char m[50];
	memset(m, 'm', sizeof(m));
	res("send 50 MSG_MORE", send(fd, m, 50, MSG_MORE));
	fflush(t_out);
	exit(0);
}

int main(void)
{
	return run(server, client);
}
