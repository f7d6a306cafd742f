/* SPDX-License-Identifier: MIT */
/* SO_RCVTIMEO / SO_SNDTIMEO on a blocking socket: a recv with nothing to
 * read and a send into a full buffer return EAGAIN once the timeout passes;
 * data arriving in time is returned. */
#include "common.c"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	struct timeval tv = { 0, 150000 };
	char buf[4096];

	res("setsockopt(SO_RCVTIMEO)", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	res("recv with nothing to read", recv(fd, buf, sizeof(buf), 0));
	tell();                                 /* client: send in 50 ms */
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
	int fd = client_conn();
	struct timeval tv = { 0, 150000 };
	char buf[65536];

	memset(buf, 'x', sizeof(buf));
	await_peer();
	msleep(50);
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
