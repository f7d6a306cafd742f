/* SPDX-License-Identifier: MIT */
/* A server that sets up io_uring before it listens (as MariaDB's InnoDB
 * does), then serves connections with plain accept/send/recv and speaks
 * first (a greeting, as the MySQL protocol does): prints its port, then per
 * connection sends "hello N\n", answers one line with its upper-case copy,
 * and closes.  argv[1]: connections to serve. */
#include <arpa/inet.h>
#include <ctype.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	struct io_uring ring;
	if (io_uring_queue_init(8, &ring, 0) < 0) {
		fprintf(stderr, "io_uring_queue_init failed\n");
		return 2;
	}
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 64) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) < 0)
		return 2;
	printf("%d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0)
			return 3;
		char buf[256];
		int len = snprintf(buf, sizeof(buf), "hello %d\n", i);
		if (send(fd, buf, (size_t)len, 0) != len)
			return 4;
		size_t got = 0;
		while (got < sizeof(buf) - 1) {
			ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
			if (r <= 0)
				return 5;
			got += (size_t)r;
			if (buf[got - 1] == '\n')
				break;
		}
		for (size_t k = 0; k < got; k++)
			buf[k] = (char)toupper((unsigned char)buf[k]);
		if (send(fd, buf, got, 0) != (ssize_t)got)
			return 6;
		close(fd);
	}
	io_uring_queue_exit(&ring);
	return 0;
}
