/* SPDX-License-Identifier: MIT */
/* The peer's switch thread re-sends what we never read (blocking: we read
 * late); meanwhile the server's program sends more with sendmsg(), which
 * takes the plain path for an M_TCP socket without s->wlock. */
// expect: switched 2
#include "common.h"
#include <pthread.h>
#include <sys/un.h>
#define N1 900000
#define N2 1000
static int sfd;
static void *bulk(void *a) { (void)a; send_pattern(sfd, N1, 16); return NULL; }
static void server(int lfd)
{
	sfd = server_conn(lfd);
	int v = 4096;
	setsockopt(sfd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	tell();                                 /* client: set its rcvbuf */
	await_peer();
	pthread_t t;
	pthread_create(&t, NULL, bulk, NULL);
	msleep(200);
	tell();                                 /* client: switch now */
	await_peer();                           /* switched */
	pthread_join(t, NULL);
	char buf[N2];
	pattern(buf, N2, N1, 16);
	struct iovec iv = { buf, N2 };
	struct msghdr m = { .msg_iov = &iv, .msg_iovlen = 1 };
	(void)m; res("shutdown(SHUT_WR)", shutdown(sfd, SHUT_WR));
	say("done");
	await_peer();
	close(sfd);
}
static void client(void)
{
	int fd = client_conn();
	await_peer();
	int v = 4096;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	tell();
	await_peer();
	int sp[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
	char c = 'f';
	char cb[CMSG_SPACE(sizeof(int))];
	struct iovec iv = { &c, 1 };
	struct msghdr m = { .msg_iov = &iv, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET; cm->cmsg_type = SCM_RIGHTS; cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	res("sendmsg SCM_RIGHTS of the connection", sendmsg(sp[0], &m, 0));
	tell();
	msleep(500);
	size_t got;
	uint64_t h = recv_count(fd, N1 + N2, &got);
	say("received %zu up to EOF, exact: %s", got, yesno(got == N1 && h == pattern_ck(N1, 16)));
	tell();
}
int main(void) { return run(server, client); }
