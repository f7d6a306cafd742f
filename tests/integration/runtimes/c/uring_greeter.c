/* SPDX-License-Identifier: MIT */
/* A server shaped like MariaDB's for tests/integration/test_runtimes.py:
 * it sets up an io_uring (liburing) BEFORE it listens and uses it for file
 * reads (as InnoDB does for its data files), keeps its connections on plain
 * accept/send/recv with a thread each, and speaks first: right after
 * accept it sends a greeting, like the MySQL protocol's handshake packet.
 *
 *   uring_greeter [MESSAGES]
 *       binds 127.0.0.1:0, prints "listening PORT" once the ring worked.
 *       Each connection: "GREETING <conn#> <64 hex>\n", then MESSAGES times:
 *       reads a line "MSG <i> <len>\n" followed by len bytes, answers
 *       "ACK <i> <fnv64 hex of the bytes>\n"; then sends "BYE\n" and closes
 *       (the server closes first, as a server that drops an idle client).
 *   Exits on SIGTERM; prints "served N" on stdout as each connection ends. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int messages = 5;
static int served;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv(const unsigned char *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int send_all(int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int recv_all(int fd, void *b, size_t n)
{
	char *p = b;
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* one line, byte by byte (the client sends the payload right after it) */
static int recv_line(int fd, char *b, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		if (recv_all(fd, b + n, 1) < 0)
			return -1;
		if (b[n++] == '\n') {
			b[n] = 0;
			return 0;
		}
	}
	return -1;
}

static void *conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static int next;
	pthread_mutex_lock(&lock);
	int id = ++next;
	pthread_mutex_unlock(&lock);
	size_t cap = 1 << 20;
	unsigned char *buf = malloc(cap);
	if (!buf)
		goto out;
	char line[256];
	unsigned char salt[32];
	for (size_t i = 0; i < sizeof(salt); i++)
		salt[i] = (unsigned char)(rand() & 255);
	int n = snprintf(line, sizeof(line), "GREETING %d ", id);
	for (size_t i = 0; i < sizeof(salt); i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%02x", salt[i]);
	line[n++] = '\n';
	if (send_all(fd, line, (size_t)n) < 0) {
		fprintf(stderr, "conn %d: greeting: %s\n", id, strerror(errno));
		goto out;
	}
	for (int m = 0; m < messages; m++) {
		int i;
		size_t len;
		if (recv_line(fd, line, sizeof(line)) < 0 || sscanf(line, "MSG %d %zu", &i, &len) != 2 ||
		    i != m || len > cap) {
			fprintf(stderr, "conn %d: bad message %d: %s\n", id, m, strerror(errno));
			goto out;
		}
		if (recv_all(fd, buf, len) < 0) {
			fprintf(stderr, "conn %d: message %d body: %s\n", id, m, strerror(errno));
			goto out;
		}
		n = snprintf(line, sizeof(line), "ACK %d %016llx\n", i, (unsigned long long)fnv(buf, len));
		if (send_all(fd, line, (size_t)n) < 0) {
			fprintf(stderr, "conn %d: ack %d: %s\n", id, m, strerror(errno));
			goto out;
		}
	}
	if (send_all(fd, "BYE\n", 4) < 0)
		fprintf(stderr, "conn %d: bye: %s\n", id, strerror(errno));
out:
	free(buf);
	close(fd);
	pthread_mutex_lock(&lock);
	printf("served %d\n", ++served);
	fflush(stdout);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		messages = atoi(argv[1]);
	/* the ring first, used for a file read, as a storage engine does */
	struct io_uring ring;
	int r = io_uring_queue_init(64, &ring, 0);
	if (r < 0) {
		printf("io_uring unavailable: %s\n", strerror(-r));
		return 2;
	}
	int ffd = open("/proc/self/stat", O_RDONLY);
	char fbuf[512];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, ffd, fbuf, sizeof(fbuf) - 1, 0);
	io_uring_submit(&ring);
	struct io_uring_cqe *cqe;
	if (io_uring_wait_cqe(&ring, &cqe) < 0 || cqe->res <= 0) {
		printf("io_uring read failed\n");
		return 2;
	}
	io_uring_cqe_seen(&ring, cqe);
	close(ffd);

	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 128) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
		perror("listen");
		return 1;
	}
	printf("listening %d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("accept");
			return 1;
		}
		pthread_t t;
		if (pthread_create(&t, NULL, conn, (void *)(intptr_t)fd) != 0) {
			perror("pthread_create");
			return 1;
		}
		pthread_detach(t);
	}
}
