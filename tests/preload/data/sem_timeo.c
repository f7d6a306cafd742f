/* SPDX-License-Identifier: MIT */
/* SO_RCVTIMEO / SO_SNDTIMEO on a blocking socket: a recv with nothing to
 * read and a send into a full buffer return EAGAIN once the timeout passes;
 * data arriving in time is returned.  The data for the waiting recv is sent
 * once the server sleeps in it (its state), not after a fixed time; the
 * buffers the client fills are fixed (SO_SNDBUF on its socket, SO_RCVBUF
 * on the listener before it connects), so the kernel's autotuning does not
 * decide when they are full. */
#include "common.h"

#define BUFSZ 65536

static void server(int lfd)
{
	set_rcvbuf(lfd, BUFSZ);
	tell();                                 /* client: connect now */
	int fd = server_conn(lfd);
	struct timeval tv = { 0, 150000 };
	char buf[4096];

	res("setsockopt(SO_RCVTIMEO)", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	res("recv with nothing to read", recv(fd, buf, sizeof(buf), 0));
	tell();                                 /* client: send while we wait */
	res("recv of data sent within the timeout", recv(fd, buf, sizeof(buf), 0));
	tell();                                 /* client: fill our buffer */
	await_peer();                           /* client filled our buffer */
	msleep(100);
	tell();
	await_peer();                           /* client's timed-out send done */
	size_t got = 0;
	recv_count(fd, 1u << 30, &got);         /* drain to EOF */
	say("server: drained to EOF: %s", yesno(got > 0));
	close(fd);
}

static void client(void)
{
	int fd = sndbuf_socket(BUFSZ);
	await_peer();                           /* the listener's SO_RCVBUF is set */
	connect_hs(fd);
	struct timeval tv = { 0, 150000 };
	char buf[65536];

	memset(buf, 'x', sizeof(buf));
	await_peer();
	await_peer_asleep();                    /* in its recv (150 ms timeout) */
	res("send 10", send(fd, buf, 10, 0));
	await_peer();                           /* the server got them */
	res("setsockopt(SO_SNDTIMEO)", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	/* fill everything until a send times out */
	long total = 0;
	ssize_t n;
	while ((n = send(fd, buf, sizeof(buf), 0)) > 0)
		total += n;
	say("client: a send timed out after filling the buffer: %s (%s)", yesno(n < 0),
	    n < 0 ? ename(errno) : "-");
	tell();
	await_peer();
	tell();
	close(fd);
}

int main(void)
{
	return run(server, client);
}
