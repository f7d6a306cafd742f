/* SPDX-License-Identifier: MIT */
/* The client has 900000 bytes in flight the server has not read.  The
 * server passes its fd with SCM_RIGHTS (a switch; the client's switch
 * thread re-sends, blocked on the server reading late).  The client then
 * execs `sleep 1` with the socket open. */
// expect: switched 2
#include "common.h"
#include <pthread.h>
#define N1 900000
static int cfd;
static void *bulk(void *a) { (void)a; send_pattern(cfd, N1, 16); return NULL; }
static void server(int lfd)
{
	int fd = server_conn(lfd);
	int v = 65536;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	tell();
	await_peer();                           /* bulk under way */
	int sp[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
	res("pass the fd", send_fd(sp[0], fd));
	tell();
	msleep(300);
	size_t got;
	uint64_t h = recv_count(fd, N1 + 1, &got);
	say("received %zu up to EOF, exact: %s", got, yesno(got == N1 && h == pattern_ck(N1, 16)));
	close(fd);
}
static void client(void)
{
	cfd = client_conn();
	int v = 65536;
	setsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	await_peer();
	pthread_t t;
	pthread_create(&t, NULL, bulk, NULL);
	msleep(200);
	tell();
	await_peer();                           /* the server switched */
	pthread_join(t, NULL);
	msleep(50);
	say("exec sleep 1 with the socket");
	fflush(t_out);
	execlp("sleep", "sleep", "1", (char *)NULL);
	fatal("exec");
}
int main(void) { return run(server, client); }
