/* SPDX-License-Identifier: MIT */
/*
 * shortcut perf devmem [--size N] [--seconds S] [--reps R] [--spin-us U] [--json]
 *
 * A stream of N-byte messages (1 MiB by default), one process sending and
 * one receiving, side by side and alternating, each run in fresh
 * processes: kernel TCP on loopback, shortcut's copy path (sc_send /
 * sc_recv), shortcut devmem (the receiver binds a 64 MiB memfd region and
 * gets fragments, touching no payload, returning the tokens), and devmem
 * with the receiver reading each fragment's bytes once.  Reports GB/s
 * and the receiving process's CPU seconds per GB (user + system, all its
 * threads, from its first byte to the end), medians of the reps; --json
 * prints one object per transport (transport, size, gbytes_per_s,
 * rx_cpu_s_per_gb, ratio_to_tcp, spin_us), as the other perf modes do.
 *
 * shortcut's receivers sleep when there is nothing to read (--spin-us 0,
 * SHORTCUT_SPIN_US=0) unless told otherwise, as a kernel TCP receiver
 * does: a receiver that spins charges its wait to the CPU column.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "devmem.h"
#include "shortcut.h"
#include "txrx.h"

enum { T_TCP, T_SHM, T_DEVMEM, T_DEVMEM_READ, NT };
static const char *const tnames[NT] = { "tcp", "shortcut", "devmem", "devmem_read" };
#define REGION (64u << 20)

struct result {
	double gbps, cpu_per_gb;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The sender: size-byte messages for `seconds`, then the end. */
static void send_for(int t, int fd, struct sc_conn *c, size_t size, double seconds)
{
	char *buf = malloc(size);
	if (!buf)
		_exit(3);
	memset(buf, 0x5a, size);
	double end = now_s() + seconds;
	while (now_s() < end) {
		size_t off = 0;
		while (off < size) {
			ssize_t k = t == T_TCP ? send(fd, buf + off, size - off, MSG_NOSIGNAL)
					       : sc_send(c, buf + off, size - off, 0);
			if (k <= 0)
				_exit(4);
			off += (size_t)k;
		}
	}
	if (t == T_TCP)
		shutdown(fd, SHUT_WR);
	else
		sc_shutdown(c, SHUT_WR);
	char b;
	if (t == T_TCP)
		(void)!recv(fd, &b, 1, 0);
	else
		sc_recv(c, &b, 1, 0);
	free(buf);
}

/* The receiver: to the end; writes its result to out. */
static void recv_all(int t, int fd, struct sc_conn *c, size_t size, struct result *out)
{
	char *buf = malloc(size);
	struct sc_dm_rx *rx = NULL;
	static struct sc_dm_frag fr[1024];
	struct sc_dm_token tok[128];
	const uint8_t *reg = NULL;
	if (t == T_DEVMEM || t == T_DEVMEM_READ) {
		/* sealed against shrinking, as a region shared with a
		 * peer must be (docs/devmem.md) */
		int mfd = memfd_create("perf-devmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (mfd < 0 || ftruncate(mfd, REGION) < 0 ||
		    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) < 0 || sc__dm_bind(mfd, SC_DM_RX) < 0 ||
		    sc__dm_rx_new(&rx) < 0)
			_exit(5);
		reg = mmap(NULL, REGION, PROT_READ, MAP_SHARED, mfd, 0);
		if (reg == MAP_FAILED)
			_exit(5);
	}
	uint64_t bytes = 0, sink = 0;
	double t0 = 0, c0 = 0;
	for (;;) {
		struct iovec iov = { buf, size };
		ssize_t k;
		int n = 0;
		size_t lin = 0;
		if (t == T_TCP)
			k = recv(fd, buf, size, 0);
		else if (t == T_SHM)
			k = sc_recv(c, buf, size, 0);
		else
			k = sc__recv_devmem(c, rx, &iov, 1, fr, 1024, &n, &lin, 0);
		if (k <= 0)
			break;
		if (!bytes) {
			t0 = now_s();
			c0 = cpu_s();
		}
		bytes += (uint64_t)k;
		int nt = 0;
		for (int i = 0; i < n; i++) {
			if (t == T_DEVMEM_READ) {
				const uint64_t *w = (const uint64_t *)(reg + fr[i].offset);
				for (uint32_t j = 0; j < fr[i].size / 8; j++)
					sink += w[j];
			}
			tok[nt++] = (struct sc_dm_token){ fr[i].token, 1 };
			if (nt == 128) {
				sc__dm_release(rx, tok, nt, 1024);
				nt = 0;
			}
		}
		if (nt)
			sc__dm_release(rx, tok, nt, 1024);
		if (n)
			sc__dm_space_freed(c);
	}
	double dt = now_s() - t0, dc = cpu_s() - c0;
	out->gbps = dt > 0 ? (double)bytes / dt / 1e9 : 0;
	out->cpu_per_gb = bytes ? dc / ((double)bytes / 1e9) : 0;
	if (sink == 42)
		out->gbps += 0;         /* (keeps the reads) */
	if (t == T_TCP)
		(void)!send(fd, "k", 1, MSG_NOSIGNAL);
	else
		sc_send(c, "k", 1, 0);
	if (rx)
		sc__dm_rx_free(rx);
	free(buf);
}

/* One run of transport t in fresh processes; 0 or -1. */
static int run_once(int t, size_t size, double seconds, struct result *res)
{
	struct result *shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return -1;
	memset(shared, 0, sizeof(*shared));
	char path[64];
	snprintf(path, sizeof(path), "@sc-perf-dm-%d-%d", (int)getpid(), t);
	int lfd = -1;
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	if (t == T_TCP) {
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 1) < 0 ||
		    getsockname(lfd, (struct sockaddr *)&a, &al) < 0)
			return -1;
	}
	int ready[2];
	if (pipe(ready) < 0)
		return -1;
	pid_t rxp = fork();
	if (rxp == 0) {
		close(ready[0]);
		struct sc_listener *l;
		struct sc_conn *c = NULL;
		int fd = -1;
		if (t == T_TCP) {
			(void)!write(ready[1], "r", 1);
			fd = accept(lfd, NULL, NULL);
		} else {
			if (sc_listen(path, 0, &l) < 0)
				_exit(6);
			(void)!write(ready[1], "r", 1);
			if (sc_accept(l, &c, 0) < 0)
				_exit(6);
		}
		recv_all(t, fd, c, size, shared);
		_exit(0);
	}
	close(ready[1]);
	char b;
	if (read(ready[0], &b, 1) != 1)
		return -1;
	close(ready[0]);
	pid_t txp = fork();
	if (txp == 0) {
		int fd = -1;
		struct sc_conn *c = NULL;
		if (t == T_TCP) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
				_exit(7);
		} else if (sc_connect(path, &c, 0) < 0) {
			_exit(7);
		}
		send_for(t, fd, c, size, seconds);
		_exit(0);
	}
	if (lfd >= 0)
		close(lfd);
	int s1, s2;
	waitpid(txp, &s1, 0);
	waitpid(rxp, &s2, 0);
	*res = *shared;
	munmap(shared, sizeof(*shared));
	return WIFEXITED(s1) && !WEXITSTATUS(s1) && WIFEXITED(s2) && !WEXITSTATUS(s2) ? 0 : -1;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int sc__perf_devmem_main(int argc, char **argv)
{
	size_t size = 1u << 20;
	double seconds = 1;
	int reps = 3;
	bool json = false;
	const char *spin = "0";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--spin-us") && i + 1 < argc)
			spin = argv[++i];
		else {
			fprintf(stderr, "usage: shortcut perf devmem [--size N] [--seconds S] "
					"[--reps R] [--spin-us U] [--json]\n");
			return 2;
		}
	}
	if (size < 1 || size > (64u << 20) || seconds <= 0 || reps < 1 || reps > 100) {
		fprintf(stderr, "shortcut perf devmem: --size 1..64M, --seconds > 0, --reps 1..100\n");
		return 2;
	}
	/* before any library call: the library reads it once, on first use */
	if (setenv("SHORTCUT_SPIN_US", spin, 1) || sc_config_check()) {
		fprintf(stderr, "shortcut perf devmem: --spin-us: '%s' is not 0..1000000\n", spin);
		return 2;
	}
	double g[NT][100], cpu[NT][100];
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < NT; k++) {
			int t = (k + r) % NT;   /* alternating */
			struct result res;
			if (run_once(t, size, seconds, &res) < 0) {
				fprintf(stderr, "shortcut perf devmem: %s failed\n", tnames[t]);
				return 1;
			}
			g[t][r] = res.gbps;
			cpu[t][r] = res.cpu_per_gb;
		}
	double mg[NT], mc[NT];
	for (int t = 0; t < NT; t++) {
		mg[t] = median(g[t], reps);
		mc[t] = median(cpu[t], reps);
	}
	for (int t = 0; t < NT; t++) {
		if (json)
			printf("{\"transport\": \"%s\", \"size\": %zu, \"gbytes_per_s\": %.3f, "
			       "\"rx_cpu_s_per_gb\": %.4f, \"ratio_to_tcp\": %.2f, \"spin_us\": %s}\n",
			       tnames[t], size, mg[t], mc[t], mg[T_TCP] > 0 ? mg[t] / mg[T_TCP] : 0,
			       spin);
		else
			printf("%-12s %8.2f GB/s  %8.4f rx CPU s/GB  %6.2fx tcp\n", tnames[t], mg[t],
			       mc[t], mg[T_TCP] > 0 ? mg[t] / mg[T_TCP] : 0);
	}
	if (!json)
		printf("stream of %zu-byte messages, medians of %d reps of %.1f s, "
		       "SHORTCUT_SPIN_US=%s\n", size, reps, seconds, spin);
	return 0;
}
