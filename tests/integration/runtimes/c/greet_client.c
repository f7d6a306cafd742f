/* SPDX-License-Identifier: MIT */
/* The client of uring_greeter.c (tests/integration/test_runtimes.py): it
 * reads first, as a MySQL client does, waiting in poll() with NO timeout for
 * the server's greeting; then sends MESSAGES messages of random sizes and
 * checks each ACK's hash; then reads "BYE" and waits (poll, no timeout) for
 * the server's close, which must read as EOF.
 *
 *   greet_client PORT [CONNS] [MESSAGES] [SEED]
 *       CONNS connections one after another.  Each step is written to stderr
 *       before it starts ("conn 3: wait greeting"), so a hang shows where.
 *       Prints "result ok=1 conns=N bytes=B" and exits 0 when all went
 *       right; exits 1 with "error: ..." otherwise. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char in[4096];
static size_t have;
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t fnv(const unsigned char *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void fail(int c, const char *what)
{
	printf("error: conn %d: %s%s%s\n", c, what, errno ? ": " : "", errno ? strerror(errno) : "");
	exit(1);
}

/* wait (no timeout) until readable, then read what is there */
static ssize_t wait_read(int fd, int c, const char *step)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	fprintf(stderr, "conn %d: %s\n", c, step);
	for (;;) {
		int r = poll(&p, 1, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != 1)
			fail(c, "poll");
		break;
	}
	ssize_t n = recv(fd, in + have, sizeof(in) - 1 - have, 0);
	if (n < 0)
		fail(c, "recv");
	return n;
}

/* one line into line[] (without the newline) */
static void read_line(int fd, int c, const char *step, char *line, size_t cap)
{
	for (;;) {
		char *nl = memchr(in, '\n', have);
		if (nl) {
			size_t n = (size_t)(nl - in);
			if (n >= cap)
				fail(c, "line too long");
			memcpy(line, in, n);
			line[n] = 0;
			memmove(in, nl + 1, have - n - 1);
			have -= n + 1;
			return;
		}
		ssize_t r = wait_read(fd, c, step);
		if (r == 0) {
			errno = 0;
			char m[128];
			snprintf(m, sizeof(m), "EOF while waiting for a line (%s)", step);
			fail(c, m);
		}
		have += (size_t)r;
	}
}

static void send_all(int fd, int c, const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail(c, "send");
		p += r;
		n -= (size_t)r;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int port = atoi(argv[1]);
	int conns = argc > 2 ? atoi(argv[2]) : 1;
	int messages = argc > 3 ? atoi(argv[3]) : 5;
	if (argc > 4)
		rng ^= strtoull(argv[4], NULL, 0) * 0x9E3779B97F4A7C15ull;
	static unsigned char payload[1 << 18];
	unsigned long long bytes = 0;
	for (int c = 1; c <= conns; c++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		fprintf(stderr, "conn %d: connect\n", c);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			fail(c, "connect");
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		char line[256], want[64];
		have = 0;
		read_line(fd, c, "wait greeting", line, sizeof(line));
		if (strncmp(line, "GREETING ", 9) != 0 || strlen(line) < 9 + 2 + 64)
			fail(c, "bad greeting");
		bytes += strlen(line) + 1;
		for (int m = 0; m < messages; m++) {
			size_t len = 1 + next() % sizeof(payload);
			for (size_t i = 0; i < len; i++)
				payload[i] = (unsigned char)next();
			int n = snprintf(line, sizeof(line), "MSG %d %zu\n", m, len);
			fprintf(stderr, "conn %d: send message %d (%zu bytes)\n", c, m, len);
			send_all(fd, c, line, (size_t)n);
			send_all(fd, c, payload, len);
			snprintf(want, sizeof(want), "ACK %d %016llx", m, (unsigned long long)fnv(payload, len));
			read_line(fd, c, "wait ack", line, sizeof(line));
			if (strcmp(line, want) != 0) {
				errno = 0;
				char e[400];
				snprintf(e, sizeof(e), "got \"%s\", expected \"%s\"", line, want);
				fail(c, e);
			}
			bytes += (size_t)n + len + strlen(want) + 1;
		}
		read_line(fd, c, "wait bye", line, sizeof(line));
		if (strcmp(line, "BYE") != 0) {
			errno = 0;
			fail(c, "no BYE");
		}
		bytes += 4;
		if (have) {
			errno = 0;
			fail(c, "bytes after BYE");
		}
		ssize_t r = wait_read(fd, c, "wait EOF");
		if (r != 0) {
			errno = 0;
			fail(c, "data instead of EOF");
		}
		close(fd);
		fprintf(stderr, "conn %d: done\n", c);
	}
	printf("result ok=1 conns=%d bytes=%llu\n", conns, bytes);
	return 0;
}
