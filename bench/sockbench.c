/* SPDX-License-Identifier: MIT */
/*
 * sockbench: a plain-socket benchmark (libc only, no shortcut API), run
 * once on kernel TCP and once under `shortcut run` by bench/run.sh.
 *
 *   sockbench conn   [--seconds S] [--size N] [--unix]   connect/send/recv/close loop
 *   sockbench rr     [--seconds S] [--size N] [--unix]   request/response on one connection
 *   sockbench stream [--seconds S] [--size N] [--unix]   one-way stream
 *
 * Forks a server on 127.0.0.1 (or, with --unix, on a Unix-domain stream
 * socket at a fresh path in $TMPDIR or /tmp) and prints one JSON line:
 *   {"mode": ..., "transport": "tcp"|"unix", "size": N, "seconds": S, "ops": N,
 *    "ops_per_s": X, "gbytes_per_s": Y}
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
#include <sys/un.h>
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

static int use_unix;

static void server(int lfd, const char *mode, size_t size)
{
	char *buf = malloc(size);
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			die("accept");
		int one = 1;
		if (!use_unix)
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

static int dial(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	int one = 1;
	if (!use_unix)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, sa, len) < 0)
		die("connect");
	return fd;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	double seconds = 1;
	size_t size = 64;

	int bad = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--unix"))
			use_unix = 1;
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = strtoul(argv[++i], NULL, 10);
		else
			bad = 1;
	}
	if ((strcmp(mode, "conn") && strcmp(mode, "rr") && strcmp(mode, "stream")) || bad ||
	    seconds <= 0 || size < 1 || size > (64u << 20)) {
		fprintf(stderr, "usage: sockbench conn|rr|stream [--seconds S] [--size N] [--unix]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_storage ss;
	struct sockaddr *sa = (struct sockaddr *)&ss;
	socklen_t sl;
	int lfd;
	memset(&ss, 0, sizeof(ss));
	if (use_unix) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		const char *dir = getenv("TMPDIR");
		un->sun_family = AF_UNIX;
		if (!dir || !*dir || strlen(dir) > 60)
			dir = "/tmp";
		snprintf(un->sun_path, sizeof(un->sun_path), "%s/sockbench-%d.sock", dir, (int)getpid());
		unlink(un->sun_path);
		sl = sizeof(*un);
		lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, sa, sl) < 0 || listen(lfd, 1024) < 0)
			die("listen");
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*in);
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		int one = 1;
		if (lfd >= 0)
			setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd < 0 || bind(lfd, sa, sl) < 0 || listen(lfd, 1024) < 0 ||
		    getsockname(lfd, sa, &sl) < 0)
			die("listen");
	}
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
				int fd = dial(sa, sl);
				if (full(send_, fd, buf, size) || full(recv, fd, buf, size))
					die("exchange");
				close(fd);
			}
			t = now();
		}
	} else {
		int fd = dial(sa, sl);
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
	if (use_unix)
		unlink(((struct sockaddr_un *)&ss)->sun_path);
	printf("{\"mode\": \"%s\", \"transport\": \"%s\", \"size\": %zu, \"seconds\": %.3f, "
	       "\"ops\": %ld, \"ops_per_s\": %.1f, \"gbytes_per_s\": %.4f}\n",
	       mode, use_unix ? "unix" : "tcp", size, el, ops, ops / el, ops * (double)size / el / 1e9);
	return 0;
}
