/* SPDX-License-Identifier: MIT */
/*
 * echo: bench/go/main.go's twin in C (libc only), for make bench's Go <-> C
 * rows: a server with a thread per connection echoing with read/write, and
 * a client measuring request/response or a stream.  Same arguments and
 * output as gobench:
 *
 *   echo server tcp|unix ADDR          prints the address it listens on
 *   echo rr     tcp|unix ADDR SECONDS SIZE
 *   echo stream tcp|unix ADDR SECONDS SIZE
 *
 * ADDR: HOST:PORT (PORT 0: any) or a path.  A client prints one JSON line:
 * {"ops", "seconds", "ops_per_s", "gbytes_per_s"}.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* addr as a sockaddr; returns its length */
static socklen_t parse(const char *net, const char *addr, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!strcmp(net, "unix")) {
		struct sockaddr_un *u = (struct sockaddr_un *)ss;
		u->sun_family = AF_UNIX;
		snprintf(u->sun_path, sizeof(u->sun_path), "%s", addr);
		return sizeof(*u);
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	const char *colon = strrchr(addr, ':');
	char host[64];
	if (!colon || (size_t)(colon - addr) >= sizeof(host)) {
		fprintf(stderr, "echo: ADDR: HOST:PORT\n");
		exit(2);
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	in->sin_family = AF_INET;
	in->sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &in->sin_addr) != 1) {
		fprintf(stderr, "echo: %s: not an IPv4 address\n", host);
		exit(2);
	}
	return sizeof(*in);
}

static void *echo_conn(void *arg)
{
	int fd = (int)(long)arg;
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w <= 0)
				goto out;
			off += w;
		}
	}
out:
	close(fd);
	return NULL;
}

static void serve(const char *net, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = parse(net, addr, &ss);
	int l = socket(ss.ss_family, SOCK_STREAM, 0), one = 1;
	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&ss, len) || listen(l, 128))
		die("bind/listen");
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in in;
		socklen_t il = sizeof(in);
		getsockname(l, (struct sockaddr *)&in, &il);
		printf("127.0.0.1:%u\n", ntohs(in.sin_port));
	} else {
		printf("%s\n", addr);
	}
	fflush(stdout);
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			die("accept");
		pthread_t t;
		if (pthread_create(&t, NULL, echo_conn, (void *)(long)c))
			die("pthread_create");
		pthread_detach(t);
	}
}

static void full(int fd, char *b, size_t n, int rd)
{
	for (size_t off = 0; off < n;) {
		ssize_t k = rd ? read(fd, b + off, n - off) : write(fd, b + off, n - off);
		if (k <= 0)
			die(rd ? "read" : "write");
		off += (size_t)k;
	}
}

struct writer {
	int fd;
	size_t size;
	atomic_bool stop;
};

static void *stream_writer(void *arg)
{
	struct writer *w = arg;
	char *b = calloc(1, w->size);
	while (!atomic_load_explicit(&w->stop, memory_order_relaxed))
		if (write(w->fd, b, w->size) <= 0)
			break;
	free(b);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: echo server|rr|stream tcp|unix ADDR [SECONDS SIZE]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);       /* a peer gone: write fails, as in Go */
	if (!strcmp(argv[1], "server"))
		serve(argv[2], argv[3]);
	double secs = argc == 6 ? atof(argv[4]) : 0;
	long size = argc == 6 ? atol(argv[5]) : 0;
	if (secs <= 0 || size <= 0) {
		fprintf(stderr, "usage: echo rr|stream tcp|unix ADDR SECONDS SIZE\n");
		return 2;
	}
	struct sockaddr_storage ss;
	socklen_t len = parse(argv[2], argv[3], &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len))
		die("connect");
	char *b = calloc(1, (size_t)size);
	long long ops = 0, bytes = 0;
	double t = now(), end = t + secs;
	if (!strcmp(argv[1], "rr")) {
		while (now() < end)
			for (int i = 0; i < 100; i++, ops++) {
				full(fd, b, (size_t)size, 0);
				full(fd, b, (size_t)size, 1);
			}
	} else {
		struct writer w = { .fd = fd, .size = (size_t)size };
		pthread_t th;
		if (pthread_create(&th, NULL, stream_writer, &w))
			die("pthread_create");
		while (now() < end) {
			ssize_t k = read(fd, b, (size_t)size);
			if (k <= 0)
				die("read");
			bytes += k;
		}
		atomic_store(&w.stop, true);
		shutdown(fd, SHUT_RDWR);
		pthread_join(th, NULL);
		ops = bytes / size;
	}
	double el = now() - t;
	printf("{\"ops\": %lld, \"seconds\": %.3f, \"ops_per_s\": %.1f, \"gbytes_per_s\": %.4f}\n",
	       ops, el, (double)ops / el, (double)bytes / el / 1e9);
	close(fd);
	free(b);
	return 0;
}
