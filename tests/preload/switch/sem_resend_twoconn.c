/* SPDX-License-Identifier: MIT */
/* Two connections X, Y.  The server has sent 900000 on X that the client
 * has not read.  The client passes X, then Y, with SCM_RIGHTS (to itself),
 * then reads X.  The server's program sits idle: its switch thread does
 * its halves, one at a time. */
// expect: switched 4
#include "common.h"
#include <pthread.h>
#define N1 900000
static int sx;
static void *bulk(void *a) { (void)a; send_pattern(sx, N1, 16); return NULL; }
static void server(int lfd)
{
	sx = server_conn(lfd);
	int sy = server_conn(lfd);
	int v = 65536;
	setsockopt(sx, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	tell();
	await_peer();
	pthread_t t;
	pthread_create(&t, NULL, bulk, NULL);
	msleep(200);
	tell();                                 /* client: go */
	await_peer();                           /* client done */
	pthread_join(t, NULL);
	res("send on Y", send(sy, "y", 1, 0));
	await_peer();
	say("done");
	close(sx); close(sy);
}
static void client(void)
{
	int x = client_conn();
	int y = client_conn();
	await_peer();
	int v = 65536;
	setsockopt(x, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	tell();
	await_peer();
	int sp[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
	res("pass X", send_fd(sp[0], x));
	res("pass Y", send_fd(sp[0], y));
	size_t got;
	uint64_t h = recv_count(x, N1, &got);
	say("X: received %zu, exact: %s", got, yesno(got == N1 && h == pattern_ck(N1, 16)));
	tell();
	char c;
	res("recv on Y", recv(y, &c, 1, 0));
	tell();
}
int main(void) { return run(server, client); }
