/* SPDX-License-Identifier: MIT */
/* The owner sends with MSG_MORE (held) and exits; its fork child, which
 * holds the socket, then writes.  The peer must get the held bytes, then
 * the child's.  (The peer is stopped while the owner dies, so the child's
 * takeover marks the owner's half frozen before the peer notices the
 * death: the order a busy peer can also give.)  The peer is stopped once
 * it sleeps in its recv, and its being stopped is its state (T), not a
 * sleep of ours; it is continued once the child's sending thread sleeps
 * (in the send, which waits for the stopped peer under the interposer, or
 * after it), not after a fixed time. */
#include "common.h"
#include <pthread.h>

static pid_t spid, send_tid;

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
	/* the sender sleeps (in the send, or past it in the join); should it
	 * wait without sleeping, the peer goes on after 2 s all the same */
	wait_state_for(getpid(), send_tid, 'S', 2000);
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
		send_tid = gettid();
		pthread_create(&t, NULL, cont, NULL);
		send(fd, "x", 1, MSG_NOSIGNAL);
		pthread_join(t, NULL);
		msleep(500);
		_exit(0);
	}
	await_peer_asleep();                    /* in its recv */
	kill(spid, SIGSTOP);
	wait_state(spid, spid, 'T', "the server stopped");
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
