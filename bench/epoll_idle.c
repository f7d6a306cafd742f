/* SPDX-License-Identifier: MIT */
/*
 * epoll_idle: the cost of many idle connections in one epoll set (issue 4).
 * Plain sockets and libc only: run once on kernel TCP and once under
 * `shortcut run` (with SHORTCUT_RMEM=16K SHORTCUT_WMEM=16K for 10k
 * connections) by bench/readiness.py.
 *
 *   epoll_idle [--conns N] [--seconds S] [--idle-seconds I] [--calls K]
 *              [--nofile F] [--holders H] [--pin SRVCPU,CLICPU]
 *
 * Forks a server on 127.0.0.1 that accepts every connection and registers it
 * (level-triggered EPOLLIN) in one epoll set, and answers 64 B messages from
 * the event loop (epoll_wait(-1), then a blocking recv/send).  The client
 * (the parent) opens one active connection, then:
 *
 *   lone phase:  ping-pong 64 B on the active connection for S seconds;
 *                the server's CPU time over I seconds without traffic;
 *                the mean cost of epoll_wait(timeout 0) on the set with
 *                nothing ready (K calls, timed by the server);
 *   then it opens N idle connections and waits until the server has them
 *   all registered;
 *   idle phase:  the same three figures with N idle connections in the set;
 *   burst:       every idle connection sends one 64 B message at once; the
 *                time until the server has read all N (none may be missed).
 *
 * The idle connections are opened by H client processes (default: as many
 * as RLIMIT_NOFILE requires: under `shortcut run` a connecting process holds
 * an eventfd per accelerated connection besides its socket, and keeps new
 * connections on TCP past three quarters of its limit).  RLIMIT_NOFILE is
 * raised to F (default 3N+300), or to the hard limit if that fails (no
 * CAP_SYS_RESOURCE).  --pin puts the server on one CPU and the clients on
 * another.  Prints one JSON object on stdout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "epoll_idle[%d]: %s: %s\n", (int)getpid(), what, strerror(errno));
	exit(1);
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

static int full_recv(int fd, void *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = recv(fd, (char *)buf + done, n - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static int full_send(int fd, const void *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* A message: a command byte and up to seven 64-bit arguments. */
struct msg {
	char cmd;
	char pad[7];
	uint64_t a[7];
};
_Static_assert(sizeof(struct msg) == MSG, "64 B messages");

/* ---- server (the child) ---- */

static void server(int lfd, int ready_fd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl listen");
	uint64_t nconns = 0, wakeups = 0, reported = 0, noted = 0;
	struct epoll_event evs[256];
	char one = 1;
	if (write(ready_fd, &one, 1) != 1)
		die("ready pipe");
	close(ready_fd);
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		wakeups++;
		reported += (uint64_t)n;
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				for (;;) {
					int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
					if (c < 0) {
						if (errno == EAGAIN || errno == EWOULDBLOCK)
							break;
						if (errno == EINTR || errno == ECONNABORTED)
							continue;
						die("accept4");
					}
					int on = 1;
					setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
					struct epoll_event cev = { .events = EPOLLIN, .data.fd = c };
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev))
						die("epoll_ctl add");
					nconns++;
				}
				continue;
			}
			struct msg m;
			if (full_recv(fd, &m, sizeof(m))) {
				/* an idle connection closed or reset by the client */
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				nconns--;
				continue;
			}
			switch (m.cmd) {
			case 'p':       /* ping: echo */
				break;
			case 'n':       /* an idle connection speaks once: no answer */
				noted++;
				continue;
			case 'c':       /* how many connections are registered */
				m.a[0] = nconns;
				m.a[1] = wakeups;
				m.a[2] = reported;
				m.a[3] = noted;
				break;
			case 'r':       /* CPU time of this process so far */
				m.a[0] = cpu_ns();
				m.a[1] = wakeups;
				break;
			case 'e': {     /* time a[0] epoll_wait(0) calls, nothing ready */
				uint64_t k = m.a[0], got = 0;
				struct epoll_event more[256];
				uint64_t t0 = now_ns();
				for (uint64_t j = 0; j < k; j++) {
					int r = epoll_wait(ep, more, 256, 0);
					if (r > 0)
						got += (uint64_t)r;
				}
				uint64_t t1 = now_ns();
				m.a[0] = t1 - t0;
				m.a[1] = got;
				break;
			}
			case 'x':
				_exit(0);
			default:
				fprintf(stderr, "epoll_idle: server: bad command %d\n", m.cmd);
				_exit(1);
			}
			if (full_send(fd, &m, sizeof(m)))
				die("send");
		}
	}
}

/* ---- client (the parent) ---- */

static struct sockaddr_in srv_addr;

static int dial(void)
{
	for (int tries = 0;; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&srv_addr, sizeof(srv_addr)) == 0)
			return fd;
		if ((errno != EADDRNOTAVAIL && errno != ECONNREFUSED && errno != EAGAIN) || tries > 100)
			die("connect");
		close(fd);
		usleep(10000);
	}
}

static void rpc(int fd, struct msg *m)
{
	if (full_send(fd, m, sizeof(*m)) || full_recv(fd, m, sizeof(*m)))
		die("rpc");
}

/* Latency histogram: 16 sub-buckets per power of two of nanoseconds. */
#define HB 16
static uint64_t hist[64 * HB];

static void hist_add(uint64_t ns)
{
	if (ns < HB) {
		hist[ns]++;
		return;
	}
	int e = 63 - __builtin_clzll(ns);          /* >= 4 */
	unsigned sub = (unsigned)(ns >> (e - 4)) & (HB - 1);
	hist[(e - 3) * HB + sub]++;
}

static double hist_pct(double p)
{
	uint64_t total = 0, acc = 0;
	for (int i = 0; i < 64 * HB; i++)
		total += hist[i];
	uint64_t want = (uint64_t)(p * (double)total);
	for (int i = 0; i < 64 * HB; i++) {
		acc += hist[i];
		if (acc > want) {
			if (i < HB)
				return i;
			int e = i / HB + 3;
			unsigned sub = (unsigned)i % HB;
			/* middle of the bucket */
			double lo = (double)(((uint64_t)HB + sub) << (e - 4));
			return lo + (double)(1ull << (e - 4)) / 2;
		}
	}
	return 0;
}

struct pp {
	double mean_us, median_us, p99_us;
	uint64_t rounds;
};

static struct pp pingpong(int fd, double seconds)
{
	struct msg m = { .cmd = 'p' };
	/* warm-up */
	uint64_t end = now_ns() + 200000000u;
	while (now_ns() < end)
		rpc(fd, &m);
	memset(hist, 0, sizeof(hist));
	uint64_t t0 = now_ns(), t = t0, rounds = 0;
	end = t0 + (uint64_t)(seconds * 1e9);
	while (t < end) {
		rpc(fd, &m);
		uint64_t t1 = now_ns();
		hist_add(t1 - t);
		t = t1;
		rounds++;
	}
	struct pp r = { .rounds = rounds };
	r.mean_us = (double)(t - t0) / 1e3 / (double)rounds;
	r.median_us = hist_pct(0.5) / 1e3;
	r.p99_us = hist_pct(0.99) / 1e3;
	return r;
}

struct phase {
	struct pp pp;
	double srv_idle_cpu_ms, cli_idle_cpu_ms, idle_s;
	uint64_t srv_idle_wakeups;
	double ep0_ns;
	uint64_t ep0_reported;
	uint64_t registered;
};

static void measure(int a, struct phase *ph, double seconds, double idle_s, uint64_t calls)
{
	struct msg m;
	/* idle: nothing moves for idle_s seconds */
	usleep(100000);
	m = (struct msg){ .cmd = 'r' };
	rpc(a, &m);
	uint64_t s0 = m.a[0], w0 = m.a[1], c0 = cpu_ns(), t0 = now_ns();
	usleep((useconds_t)(idle_s * 1e6));
	uint64_t c1 = cpu_ns(), t1 = now_ns();
	m = (struct msg){ .cmd = 'r' };
	rpc(a, &m);
	ph->idle_s = (double)(t1 - t0) / 1e9;
	ph->srv_idle_cpu_ms = (double)(m.a[0] - s0) / 1e6;
	ph->cli_idle_cpu_ms = (double)(c1 - c0) / 1e6;
	ph->srv_idle_wakeups = m.a[1] - w0 - 1;      /* the 'r' itself woke it once */
	/* epoll_wait(0) with nothing ready */
	m = (struct msg){ .cmd = 'e', .a = { calls } };
	rpc(a, &m);
	ph->ep0_ns = (double)m.a[0] / (double)calls;
	ph->ep0_reported = m.a[1];
	m = (struct msg){ .cmd = 'c' };
	rpc(a, &m);
	ph->registered = m.a[0];
	ph->pp = pingpong(a, seconds);
}

static void print_phase(const char *name, const struct phase *ph, int last)
{
	printf("  \"%s\": {\"registered\": %llu, \"rtt_us\": %.4f, \"rtt_median_us\": %.4f, "
	       "\"rtt_p99_us\": %.4f, \"rounds\": %llu, \"idle_s\": %.3f, "
	       "\"server_idle_cpu_ms\": %.3f, \"server_idle_cpu_pct\": %.4f, "
	       "\"server_idle_wakeups\": %llu, \"client_idle_cpu_ms\": %.3f, "
	       "\"epoll_wait0_ns\": %.1f, \"epoll_wait0_reported\": %llu}%s\n",
	       name, (unsigned long long)ph->registered, ph->pp.mean_us, ph->pp.median_us,
	       ph->pp.p99_us, (unsigned long long)ph->pp.rounds, ph->idle_s,
	       ph->srv_idle_cpu_ms, ph->srv_idle_cpu_ms / 1e3 / ph->idle_s * 100,
	       (unsigned long long)ph->srv_idle_wakeups, ph->cli_idle_cpu_ms, ph->ep0_ns,
	       (unsigned long long)ph->ep0_reported, last ? "" : ",");
}

/* A holder: a process that opens its share of the idle connections when
 * told to ('g' on go), reports how many it opened (8 bytes on ack), sends one
 * 'n' message on each when told to ('w', acked the same way), and holds them
 * until go reaches EOF. */
static void holder(long count, int go, int ack)
{
	char c;
	if (read(go, &c, 1) != 1)
		_exit(0);
	int *fds = malloc(sizeof(int) * (size_t)(count ? count : 1));
	for (long i = 0; i < count; i++)
		fds[i] = dial();
	uint64_t done = (uint64_t)count;
	if (write(ack, &done, sizeof(done)) != sizeof(done))
		_exit(1);
	while (read(go, &c, 1) > 0) {
		struct msg m = { .cmd = 'n' };
		for (long i = 0; i < count; i++)
			if (full_send(fds[i], &m, sizeof(m)))
				die("send n");
		if (write(ack, &done, sizeof(done)) != sizeof(done))
			_exit(1);
	}
	for (long i = 0; i < count; i++)
		close(fds[i]);
	_exit(0);
}

/* How many connections a client process can hold: under `shortcut run` a
 * connecting process keeps an eventfd per accelerated connection besides its
 * socket, and a process keeps new connections on TCP once its socket's fd
 * number comes within 64 of three quarters of RLIMIT_NOFILE. */
static long per_process(long nofile)
{
	long c = (nofile - nofile / 4 - 64 - 64) / 2;
	return c > 1 ? c : 1;
}

#define MAX_HOLDERS 64

/* --pin: the server on one CPU, the clients on another, so that every
 * round trip crosses CPUs (otherwise the scheduler sometimes puts both on
 * one vCPU, and the round trip is a context switch instead of a wake-up). */
static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

int main(int argc, char **argv)
{
	long n = 10000, calls = 100000, nofile = 0, holders = 0;
	int pin_srv = -1, pin_cli = -1;
	double seconds = 1, idle_s = 1.5;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--conns") && i + 1 < argc)
			n = atol(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--idle-seconds") && i + 1 < argc)
			idle_s = atof(argv[++i]);
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--nofile") && i + 1 < argc)
			nofile = atol(argv[++i]);
		else if (!strcmp(argv[i], "--holders") && i + 1 < argc)
			holders = atol(argv[++i]);
		else if (!strcmp(argv[i], "--pin") && i + 1 < argc &&
			 sscanf(argv[i + 1], "%d,%d", &pin_srv, &pin_cli) == 2)
			i++;
		else {
			fprintf(stderr, "usage: epoll_idle [--conns N] [--seconds S] [--idle-seconds I] "
					"[--calls K] [--nofile F] [--holders H] [--pin SRVCPU,CLICPU]\n");
			return 2;
		}
	}
	if (n < 0 || calls <= 0 || seconds <= 0 || idle_s <= 0 || holders < 0 ||
	    holders > MAX_HOLDERS || nofile < 0) {
		fprintf(stderr, "epoll_idle: bad arguments\n");
		return 2;
	}
	/* RLIMIT_NOFILE: the server holds N+1 sockets in one process; a client
	 * process under shortcut about 2 fds per connection (per_process) */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	long want = nofile ? nofile : 3 * n + 300;
	if (rl.rlim_cur == RLIM_INFINITY || (nofile == 0 && rl.rlim_cur >= (rlim_t)want)) {
		nofile = rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
	} else {
		struct rlimit w = rl;
		w.rlim_cur = (rlim_t)want;
		if (w.rlim_max != RLIM_INFINITY && w.rlim_max < w.rlim_cur)
			w.rlim_max = w.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &w) == 0) {
			nofile = want;
		} else {
			/* no CAP_SYS_RESOURCE: up to the hard limit */
			rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl))
				die("setrlimit(RLIMIT_NOFILE)");
			nofile = (long)rl.rlim_cur;
		}
	}
	if (nofile < n + 200) {
		fprintf(stderr, "epoll_idle: RLIMIT_NOFILE %ld < %ld (the server holds every "
			"connection) and cannot be raised\n", nofile, n + 200);
		return 1;
	}
	if (!holders)
		holders = n ? (n + per_process(nofile) - 1) / per_process(nofile) : 1;
	if (holders > MAX_HOLDERS) {
		fprintf(stderr, "epoll_idle: %ld connections need more than %d client processes "
			"at RLIMIT_NOFILE %ld\n", n, MAX_HOLDERS, nofile);
		return 1;
	}

	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	int on = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	srv_addr = (struct sockaddr_in){ .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(srv_addr);
	if (bind(lfd, (struct sockaddr *)&srv_addr, sizeof(srv_addr)) ||
	    getsockname(lfd, (struct sockaddr *)&srv_addr, &sl))
		die("bind");
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC))
		die("pipe");
	/* listen in the child: the listener's board entry is the server's */
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[0]);
		if (pin_srv >= 0)
			pin(pin_srv);
		if (listen(lfd, 4096))
			die("listen");
		server(lfd, pfd[1]);
		_exit(0);
	}
	close(lfd);
	close(pfd[1]);
	if (pin_cli >= 0)
		pin(pin_cli);
	char c;
	if (read(pfd[0], &c, 1) != 1) {
		fprintf(stderr, "epoll_idle: the server did not start\n");
		return 1;
	}
	close(pfd[0]);

	/* the holders of the idle connections, forked before this process has
	 * any connection of its own */
	int go[MAX_HOLDERS], ack[MAX_HOLDERS];
	pid_t hpid[MAX_HOLDERS];
	for (long h = 0; h < holders; h++) {
		int g[2], a[2];
		if (pipe2(g, O_CLOEXEC) || pipe2(a, O_CLOEXEC))
			die("pipe");
		long share = n / holders + (h < n % holders);
		hpid[h] = fork();
		if (hpid[h] < 0)
			die("fork");
		if (hpid[h] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (long j = 0; j < h; j++) {
				close(go[j]);
				close(ack[j]);
			}
			close(g[1]);
			close(a[0]);
			holder(share, g[0], a[1]);
		}
		close(g[0]);
		close(a[1]);
		go[h] = g[1];
		ack[h] = a[0];
	}

	int a = dial();
	setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	struct phase lone, idle;
	measure(a, &lone, seconds, idle_s, (uint64_t)calls);

	uint64_t t0 = now_ns();
	for (long h = 0; h < holders; h++)
		if (write(go[h], "g", 1) != 1)
			die("holder");
	for (long h = 0; h < holders; h++) {
		uint64_t done;
		if (read(ack[h], &done, sizeof(done)) != sizeof(done)) {
			fprintf(stderr, "epoll_idle: a holder failed\n");
			kill(pid, SIGKILL);
			return 1;
		}
	}
	double connect_s = (double)(now_ns() - t0) / 1e9;
	/* wait until the server has every connection registered */
	struct msg m;
	uint64_t deadline = now_ns() + 120000000000u;
	for (;;) {
		m = (struct msg){ .cmd = 'c' };
		rpc(a, &m);
		if (m.a[0] >= (uint64_t)n + 1)
			break;
		if (now_ns() > deadline) {
			fprintf(stderr, "epoll_idle: the server registered only %llu of %ld connections\n",
				(unsigned long long)m.a[0], n + 1);
			kill(pid, SIGKILL);
			return 1;
		}
		usleep(10000);
	}
	double settle_s = (double)(now_ns() - t0) / 1e9;
	measure(a, &idle, seconds, idle_s, (uint64_t)calls);

	/* every idle connection speaks once, all at the same time: the server
	 * must see each of them (a missed epoll event would show here) */
	t0 = now_ns();
	for (long h = 0; h < holders; h++)
		if (write(go[h], "w", 1) != 1)
			die("holder");
	for (long h = 0; h < holders; h++) {
		uint64_t done;
		if (read(ack[h], &done, sizeof(done)) != sizeof(done)) {
			fprintf(stderr, "epoll_idle: a holder failed\n");
			kill(pid, SIGKILL);
			return 1;
		}
	}
	deadline = now_ns() + 60000000000u;
	for (;;) {
		m = (struct msg){ .cmd = 'c' };
		rpc(a, &m);
		if (m.a[3] >= (uint64_t)n)
			break;
		if (now_ns() > deadline) {
			fprintf(stderr, "epoll_idle: the server saw %llu of the %ld messages sent on "
				"the idle connections within 60 s\n", (unsigned long long)m.a[3], n);
			kill(pid, SIGKILL);
			return 1;
		}
		usleep(1000);
	}
	double burst_s = (double)(now_ns() - t0) / 1e9;

	m = (struct msg){ .cmd = 'x' };
	full_send(a, &m, sizeof(m));
	int st, ok = 1;
	waitpid(pid, &st, 0);
	ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	for (long h = 0; h < holders; h++) {
		close(go[h]);
		close(ack[h]);
		int hs;
		waitpid(hpid[h], &hs, 0);
		ok = ok && WIFEXITED(hs) && WEXITSTATUS(hs) == 0;
	}
	close(a);

	printf("{\"conns\": %ld, \"nofile\": %ld, \"holders\": %ld, \"pin\": [%d, %d], "
	       "\"seconds\": %g, \"calls\": %ld, \"connect_s\": %.3f, \"registered_s\": %.3f, "
	       "\"burst_s\": %.4f,\n",
	       n, nofile, holders, pin_srv, pin_cli, seconds, calls, connect_s, settle_s, burst_s);
	print_phase("lone", &lone, 0);
	print_phase("idle", &idle, 0);
	printf("  \"rtt_ratio\": %.4f, \"epoll_wait0_ratio\": %.4f}\n",
	       idle.pp.mean_us / lone.pp.mean_us, idle.ep0_ns / lone.ep0_ns);
	return ok ? 0 : 1;
}
