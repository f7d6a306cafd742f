/* SPDX-License-Identifier: MIT */
/* The body of switch/sem_resend_sendmsg and sem_resend_shut, which differ
 * only in what the server does once the connection is switched (tail()).
 * The server sends 900000 bytes (seed 16) from a thread through a 4096-byte
 * send buffer to the client's 4096-byte receive buffer; the client passes
 * its connection with SCM_RIGHTS (a switch: the peer's switch thread
 * re-sends what the server's program sent and the client never read,
 * blocking: the client reads late), then reads up to 901000 bytes or EOF.
 *
 * A program defines, before including it:
 *   N2        the bytes its tail adds to the stream after the 900000 (0: none)
 *   RECEIVED  the client's words for what it got ("received %zu")
 * and, after it, tail(sfd): the server's call once the switch is done. */
#ifndef SEM_RESEND_LATE_READER_H
#define SEM_RESEND_LATE_READER_H

#include "common.h"
#include <pthread.h>
#include <sys/un.h>

#define N1 900000
static int sfd;
static void tail(int fd);
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
	tail(sfd);
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
	res("sendmsg SCM_RIGHTS of the connection", send_fd(sp[0], fd));
	tell();
	msleep(500);
	size_t got;
	uint64_t h = recv_count(fd, N1 + 1000, &got);   /* the count or EOF ends it */
	say(RECEIVED ", exact: %s", got, yesno(got == N1 + N2 && h == pattern_ck(N1 + N2, 16)));
	tell();
}
int main(void) { return run(server, client); }

#endif
