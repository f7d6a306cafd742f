/* SPDX-License-Identifier: MIT */
/* A plain C echo server and client (libc sockets, a thread per connection),
 * the C end of tests/integration/test_go.py's Go <-> C rows; they speak to
 * runtimes/goaccel's echo server and client the same way.
 *
 *   echo_peer server [CONNS]
 *       listens on 127.0.0.1:0, prints "listening PORT"; a thread per
 *       connection echoes with read/write until EOF, then closes.  With
 *       CONNS > 0 it exits after CONNS connections ended, printing
 *       "server conns=N errors=E bytes=B" (exit 1 if any failed).
 *   echo_peer client PORT [CONNS] [MSGS] [MAX] [SEED]
 *       CONNS connections at once (default 8); on each a writer thread
 *       sends MSGS messages (default 16) of random size 1..MAX (default
 *       1 MiB, log-uniform) of pseudo-random bytes, then shuts down its
 *       write side, while the connection's reader checks every byte of the
 *       echo against the same sequence and then wants EOF.  Prints
 *       "result ok=true|false errors=N msgs=M bytes=B secs=S mb_per_s=R
 *       conns=C"; exit 0 iff ok.  Hangs are caught by the caller. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int want, ended, errors;
static long long total;

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- server ---- */

static void server_end(long long n, const char *err)
{
	pthread_mutex_lock(&mu);
	ended++;
	total += n;
	if (err) {
		errors++;
		fprintf(stderr, "conn %d: %s: %s\n", ended, err, strerror(errno));
	}
	if (want > 0 && ended == want) {
		printf("server conns=%d errors=%d bytes=%lld\n", ended, errors, total);
		fflush(stdout);
		_exit(errors ? 1 : 0);
	}
	pthread_mutex_unlock(&mu);
}

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread char buf[65536];
	long long n = 0;
	const char *err = NULL;
	for (;;) {
		ssize_t k = read(fd, buf, sizeof buf);
		if (k == 0)
			break;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			err = "read";
			break;
		}
		n += k;
		for (ssize_t off = 0; off < k;) {
			ssize_t w = write(fd, buf + off, k - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				err = "write";
				goto out;
			}
			off += w;
		}
	}
out:
	close(fd);
	server_end(n, err);
	return NULL;
}

static int server(int argc, char **argv)
{
	want = argc > 2 ? atoi(argv[2]) : 0;
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 512) ||
	    getsockname(ls, (struct sockaddr *)&a, &al)) {
		perror("listen");
		return 2;
	}
	printf("listening %d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			perror("accept");
			return 2;
		}
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, echo, (void *)(intptr_t)fd)) {
			perror("pthread_create");
			return 2;
		}
		pthread_attr_destroy(&at);
	}
}

/* ---- client ---- */

struct conn {
	int i, fd, msgs, port;
	size_t max;
	uint64_t seed;
	char err[200];
	long long bytes;
};

static atomic_llong done_msgs;

/* message m's size and the byte stream: the same in writer and reader */
static size_t msg_size(uint64_t *s, size_t max)
{
	unsigned k = xs(s) % 21;
	size_t n = ((size_t)1 << k) + xs(s) % ((size_t)1 << k);
	return n > max ? max : n;
}

static void *writer(void *arg)
{
	struct conn *c = arg;
	uint64_t sz = c->seed, data = c->seed ^ 0x9e3779b97f4a7c15ull;
	char *buf = malloc(c->max);
	for (int m = 0; m < c->msgs; m++) {
		size_t n = msg_size(&sz, c->max);
		for (size_t j = 0; j < n; j++)
			buf[j] = (char)xs(&data);
		for (size_t off = 0; off < n;) {
			ssize_t w = write(c->fd, buf + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				snprintf(c->err, sizeof c->err, "conn %d message %d: write: %s", c->i, m,
					 strerror(errno));
				free(buf);
				return NULL;
			}
			off += w;
		}
	}
	if (shutdown(c->fd, SHUT_WR))
		snprintf(c->err, sizeof c->err, "conn %d: shutdown: %s", c->i, strerror(errno));
	free(buf);
	return NULL;
}

static void *client_conn(void *arg)
{
	struct conn *c = arg;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(c->port)};
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	c->seed = c->seed * 2654435761u + (uint64_t)c->i * 7919 + 1;
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a)) {
		snprintf(c->err, sizeof c->err, "conn %d: connect: %s", c->i, strerror(errno));
		return NULL;
	}
	pthread_t w;
	pthread_create(&w, NULL, writer, c);
	uint64_t sz = c->seed, data = c->seed ^ 0x9e3779b97f4a7c15ull;
	static __thread char buf[65536];
	char rerr[200] = "";
	for (int m = 0; m < c->msgs && !rerr[0]; m++) {
		size_t n = msg_size(&sz, c->max);
		for (size_t got = 0; got < n && !rerr[0];) {
			size_t want_n = n - got < sizeof buf ? n - got : sizeof buf;
			ssize_t k = read(c->fd, buf, want_n);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				snprintf(rerr, sizeof rerr, "conn %d message %d: read %zu of %zu bytes: %s", c->i, m,
					 got, n, k ? strerror(errno) : "EOF");
				break;
			}
			for (ssize_t j = 0; j < k; j++)
				if (buf[j] != (char)xs(&data)) {
					snprintf(rerr, sizeof rerr, "conn %d message %d (%zu bytes): echo differs at byte %zu",
						 c->i, m, n, got + j);
					break;
				}
			got += k;
			c->bytes += k;
		}
		if (!rerr[0])
			atomic_fetch_add(&done_msgs, 1);
	}
	if (!rerr[0]) {
		ssize_t k = read(c->fd, buf, 1);
		if (k != 0)
			snprintf(rerr, sizeof rerr, "conn %d: after the last echo: %zd (%s), want EOF", c->i, k,
				 k < 0 ? strerror(errno) : "bytes");
	}
	if (rerr[0]) /* the writer may be stuck on a full connection */
		shutdown(c->fd, SHUT_RDWR);
	pthread_join(w, NULL);
	if (rerr[0])
		memcpy(c->err, rerr, sizeof rerr);
	close(c->fd);
	return NULL;
}

static int client(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "client needs PORT\n");
		return 2;
	}
	int port = atoi(argv[2]);
	int conns = argc > 3 ? atoi(argv[3]) : 8, msgs = argc > 4 ? atoi(argv[4]) : 16;
	size_t max = argc > 5 ? strtoul(argv[5], NULL, 10) : 1 << 20;
	uint64_t seed = argc > 6 ? strtoull(argv[6], NULL, 0) : 1;
	struct conn *cs = calloc(conns, sizeof *cs);
	pthread_t *ts = calloc(conns, sizeof *ts);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < conns; i++) {
		cs[i] = (struct conn){.i = i, .msgs = msgs, .port = port, .max = max, .seed = seed};
		if (pthread_create(&ts[i], NULL, client_conn, &cs[i])) {
			perror("pthread_create");
			return 2;
		}
	}
	long long bytes = 0;
	int nerr = 0;
	for (int i = 0; i < conns; i++) {
		pthread_join(ts[i], NULL);
		bytes += cs[i].bytes;
		if (cs[i].err[0]) {
			if (nerr < 20)
				printf("error: %s\n", cs[i].err);
			nerr++;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	long long m = atomic_load(&done_msgs);
	if (!nerr && m != (long long)conns * msgs) {
		printf("error: %lld messages echoed, want %lld\n", m, (long long)conns * msgs);
		nerr++;
	}
	printf("result ok=%s errors=%d msgs=%lld bytes=%lld secs=%.3f mb_per_s=%.1f conns=%d\n",
	       nerr ? "false" : "true", nerr, m, bytes, secs, bytes / secs / 1e6, conns);
	return nerr ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "server"))
		return server(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "client"))
		return client(argc, argv);
	fprintf(stderr, "usage: echo_peer server [CONNS] | client PORT [CONNS] [MSGS] [MAX] [SEED]\n");
	return 2;
}
