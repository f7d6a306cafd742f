/* SPDX-License-Identifier: MIT */
/* splice() into a socket just connected, before the server has accepted
 * it: a nonblocking splice of 64 KiB from a pipe moves what the socket
 * takes (how much is the transport's: the kernel's send buffer, or the
 * buffer a client keeps until the server's first use), and the pipe holds
 * exactly the rest; again, the same (SPLICE_F_NONBLOCK: the pipe may be
 * empty by then).  Then the server accepts and reads
 * while the client splices the rest, blocking; every byte checked. */
#include "common.h"

#define SEED 3
#define TOTAL 65536

static void server(int lfd)
{
	await_peer();                           /* the client's first splices */
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	static char buf[TOTAL], want[TOTAL];
	ssize_t n = recv_all(fd, buf, TOTAL);
	pattern(want, TOTAL, 0, SEED);
	say("received %zd bytes, in order: %s", n, yesno(n == TOTAL && !memcmp(buf, want, TOTAL)));
	tell();
	res("close", close(fd));
}

static void client(void)
{
	int fd = raw_connect();
	int p[2];
	static char buf[TOTAL];
	if (pipe(p) < 0)
		fatal("pipe");
	pattern(buf, TOTAL, 0, SEED);
	if (write(p[1], buf, TOTAL) != TOTAL)
		fatal("pipe write");
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	for (int i = 0; i < 2; i++) {
		int before = readable_bytes(p[0]);
		ssize_t n = splice(p[0], NULL, fd, NULL, TOTAL, SPLICE_F_NONBLOCK);
		say("nonblocking splice of 64 KiB: EAGAIN or moved some: %s",
		    yesno(n > 0 || (n < 0 && errno == EAGAIN)));
		say("pipe lost nothing: %s", yesno(readable_bytes(p[0]) == before - (n > 0 ? n : 0)));
	}
	tell();
	fcntl(fd, F_SETFL, fl);
	while (readable_bytes(p[0]) > 0) {
		int before = readable_bytes(p[0]);
		ssize_t n = splice(p[0], NULL, fd, NULL, TOTAL, 0);
		if (n <= 0 || readable_bytes(p[0]) != before - n)
			fatal("splice: %zd (pipe %d -> %d)", n, before, readable_bytes(p[0]));
	}
	say("the rest moved");
	await_peer();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
