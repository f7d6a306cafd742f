/* SPDX-License-Identifier: MIT */
/* A client that talks to an echo server with send/recv first, then sets up
 * an io_uring (liburing) and goes on through the ring on the same socket,
 * then opens a second connection.  Prints one line per step; exits 1 on any
 * mismatch.  Used by tests/integration/test_switch.py. */
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 131 + seed + (i >> 9)) & 255);
}

/* one op through the ring; returns its result */
static int ring_op(struct io_uring *r, int fd, void *buf, size_t len, int is_send)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);
	if (is_send)
		io_uring_prep_send(sqe, fd, buf, len, 0);
	else
		io_uring_prep_recv(sqe, fd, buf, len, 0);
	io_uring_submit(r);
	struct io_uring_cqe *cqe;
	if (io_uring_wait_cqe(r, &cqe) < 0) {
		fprintf(stderr, "wait_cqe failed\n");
		exit(1);
	}
	int res = cqe->res;
	io_uring_cqe_seen(r, cqe);
	return res;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int port = atoi(argv[1]);
	int fd = dial(port);
	static unsigned char out[200000], in[200000];
	/* plain calls first: these go through shared memory */
	pattern(out, 50000, 1);
	size_t got = 0;
	if (send(fd, out, 50000, 0) != 50000)
		return 1;
	while (got < 50000) {
		ssize_t r = recv(fd, in + got, 50000 - got, 0);
		if (r <= 0)
			return 1;
		got += (size_t)r;
	}
	printf("plain echo exact: %s\n", memcmp(in, out, 50000) ? "no" : "yes");
	/* now the ring, on the same socket */
	struct io_uring ring;
	if (io_uring_queue_init(8, &ring, 0) < 0) {
		printf("io_uring unavailable\n");
		return 2;
	}
	pattern(out, sizeof(out), 7);
	size_t sent = 0;
	got = 0;
	while (got < sizeof(out)) {
		if (sent < sizeof(out)) {
			size_t n = sizeof(out) - sent < 30000 ? sizeof(out) - sent : 30000;
			int r = ring_op(&ring, fd, out + sent, n, 1);
			if (r <= 0) {
				printf("ring send = %d\n", r);
				return 1;
			}
			sent += (size_t)r;
		}
		int r = ring_op(&ring, fd, in + got, sizeof(in) - got, 0);
		if (r <= 0) {
			printf("ring recv = %d\n", r);
			return 1;
		}
		got += (size_t)r;
	}
	printf("ring echo of %zu bytes exact: %s\n", got, memcmp(in, out, sizeof(out)) ? "no" : "yes");
	io_uring_queue_exit(&ring);
	close(fd);
	/* a connection made after the ring: stays on TCP */
	fd = dial(port);
	if (send(fd, "x", 1, 0) != 1 || recv(fd, in, 1, 0) != 1 || in[0] != 'x')
		return 1;
	printf("second connection echoes: yes\n");
	close(fd);
	return 0;
}
