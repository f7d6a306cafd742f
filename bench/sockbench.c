/* SPDX-License-Identifier: MIT */
/*
 * sockbench: a plain-socket benchmark (libc only, no shortcut API), run
 * once on kernel TCP and once under `shortcut run` by bench/run.sh.
 *
 *   sockbench conn   [--seconds S] [--size N]   connect/send/recv/close loop
 *   sockbench rr     [--seconds S] [--size N]   request/response on one connection
 *   sockbench stream [--seconds S] [--size N]   one-way stream
 *
 * Forks a server on 127.0.0.1 and prints one JSON line:
 *   {"mode": ..., "size": N, "seconds": S, "ops": N, "ops_per_s": X, "gbytes_per_s": Y}
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "sockbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int full(ssize_t (*op)(int, void *, size_t, int), int fd, char *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = op(fd, buf + done, n - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static ssize_t send_(int fd, void *b, size_t n, int f) { return send(fd, b, n, f | MSG_NOSIGNAL); }

static void server(int lfd, const char *mode, size_t size)
{
	char *buf = malloc(size);
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			die("accept");
		int one = 1;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!strcmp(mode, "stream")) {
			while (recv(c, buf, size, 0) > 0) {
			}
			send_(c, "k", 1, 0);
		} else {
			while (full(recv, c, buf, size) == 0 && full(send_, c, buf, size) == 0) {
				if (!strcmp(mode, "conn"))
					break;
			}
		}
		close(c);
	}
}

static int dial(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		die("connect");
	return fd;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	double seconds = 1;
	size_t size = 64;

	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = strtoul(argv[i + 1], NULL, 10);
	}
	if ((strcmp(mode, "conn") && strcmp(mode, "rr") && strcmp(mode, "stream")) ||
	    seconds <= 0 || size < 1 || size > (64u << 20)) {
		fprintf(stderr, "usage: sockbench conn|rr|stream [--seconds S] [--size N]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1024) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
		die("listen");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		server(lfd, mode, size);
		_exit(0);
	}
	close(lfd);
	char *buf = calloc(1, size);
	long ops = 0;
	double t0 = now(), t = t0;
	if (!strcmp(mode, "conn")) {
		while (t - t0 < seconds) {
			for (int k = 0; k < 16; k++, ops++) {
				int fd = dial(&sa);
				if (full(send_, fd, buf, size) || full(recv, fd, buf, size))
					die("exchange");
				close(fd);
			}
			t = now();
		}
	} else {
		int fd = dial(&sa);
		if (!strcmp(mode, "rr")) {
			while (t - t0 < seconds) {
				for (int k = 0; k < 64; k++, ops++)
					if (full(send_, fd, buf, size) || full(recv, fd, buf, size))
						die("exchange");
				t = now();
			}
		} else {
			while (t - t0 < seconds) {
				for (int k = 0; k < 16; k++, ops++)
					if (full(send_, fd, buf, size))
						die("send");
				t = now();
			}
			shutdown(fd, SHUT_WR);
			char k;
			if (recv(fd, &k, 1, 0) != 1)    /* everything was read */
				die("stream end");
			t = now();
		}
		close(fd);
	}
	double el = t - t0;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	printf("{\"mode\": \"%s\", \"size\": %zu, \"seconds\": %.3f, \"ops\": %ld, "
	       "\"ops_per_s\": %.1f, \"gbytes_per_s\": %.4f}\n",
	       mode, size, el, ops, ops / el, ops * (double)size / el / 1e9);
	return 0;
}
