/* SPDX-License-Identifier: MIT */
/* The server has 900000 bytes in flight the client has not read; a child
 * it forks then sends 1000 more on the inherited socket. */
// expect: switched 2
#include "common.h"
#include <pthread.h>
#define N1 900000
#define N2 1000
static int sfd;
static void *bulk(void *a) { (void)a; send_pattern(sfd, N1, 16); return NULL; }
static void server(int lfd)
{
	sfd = server_conn(lfd);
	int v = 65536;
	setsockopt(sfd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	tell();
	await_peer();
	pthread_t t;
	pthread_create(&t, NULL, bulk, NULL);
	msleep(300);
	tell();                                 /* client: start reading in 500 ms */
	int kp[2];
	if (pipe(kp) < 0) fatal("pipe");
	pid_t k = fork();
	if (k == 0) {
		/* kernel: after the parent's send finished (it is ours to order) */
		char buf[N2];
		pattern(buf, N2, N1, 16);
		char c;
		if (read(kp[0], &c, 1) != 1) _exit(3);       /* parent: bulk sent */
		_exit(send_all(sfd, buf, N2) == N2 ? 0 : 2);
	}
	pthread_join(t, NULL);
	/* the child waits for this: on kernel TCP the bulk is queued */
	if (write(kp[1], "z", 1) != 1) fatal("w");
	int st;
	waitpid(k, &st, 0);
	say("child exit %d", WEXITSTATUS(st));
	await_peer();
	close(sfd);
}
static void client(void)
{
	int fd = client_conn();
	await_peer();
	int v = 65536;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	tell();
	await_peer();
	char z;
	msleep(500);
	size_t got;
	uint64_t h = recv_count(fd, N1 + N2, &got);
	say("received %zu, exact: %s", got, yesno(got == N1 + N2 && h == pattern_ck(N1 + N2, 16)));
	(void)z;
	tell();
}
int main(void) { return run(server, client); }
