/* SPDX-License-Identifier: MIT */
/* splice() from a pipe into the socket and from the socket into a pipe:
 * the bytes arrive in order, whole. */
#include "common.h"
#include <fcntl.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int p[2];
	char buf[65536];

	if (pipe(p) < 0)
		fatal("pipe");
	tell();
	/* socket → pipe → us */
	size_t total = 0;
	uint64_t h = CK_INIT;
	while (total < 200000) {
		ssize_t n = splice(fd, NULL, p[1], NULL, 65536, 0);
		if (n <= 0) {
			say("server: splice from socket = %zd %s", n, n < 0 ? ename(errno) : "");
			break;
		}
		ssize_t r = read(p[0], buf, (size_t)n);
		if (r != n)
			fatal("pipe read");
		h = ck(h, buf, (size_t)r);
		total += (size_t)r;
	}
	say("server: received %zu bytes, checksum ok: %s", total, yesno(h == pattern_ck(200000, 7)));
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	int p[2];
	char buf[50000];

	if (pipe(p) < 0)
		fatal("pipe");
	await_peer();
	/* us → pipe → socket, in 4 pieces */
	for (int i = 0; i < 4; i++) {
		pattern(buf, sizeof(buf), (uint64_t)i * sizeof(buf), 7);
		if (write(p[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			fatal("pipe write");
		size_t moved = 0;
		while (moved < sizeof(buf)) {
			ssize_t n = splice(p[0], NULL, fd, NULL, sizeof(buf) - moved, 0);
			if (n <= 0)
				fatal("splice to socket");
			moved += (size_t)n;
		}
	}
	say("client: spliced 200000 bytes");
	loff_t off = 0;
	res("splice with an offset on the socket side", splice(p[0], NULL, fd, &off, 10, 0));
	close(fd);
}

int main(void)
{
	return run(server, client);
}
